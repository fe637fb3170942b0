"""End to end on one ExportedProgram, fxviz against Google's Model Explorer: from the
program to a page in headless Chromium (1600x1000) showing its first node.

- fxviz: ``import fxviz``, ``Session(ep)`` and ``session.to_html(path)`` (prepare), then the
  page opened from file:// until its graph view holds a node (``svg g.node``).
- Model Explorer: ``import model_explorer``, ``config().add_model_from_pytorch(name, ep)``
  (its conversion) and its own server started and answering (prepare: what
  ``model_explorer.visualize_pytorch`` does before it opens a browser), then its page until
  its WebGL canvas is attached and shows something (screenshots: Model Explorer is credited
  with the time the canvas appeared when the first screenshot after it shows a node, else
  with the start of the last screenshot that showed none).

Each run is a fresh process (imports counted: a first call in a kernel); the program is
loaded from a ``.pt2`` made once per size under ``--programs`` and the browser launched
before the clock starts; fxviz and Model Explorer alternate, and each figure is a median of
``--repeats``. Requests that leave the page's own origin are refused (offline). Programs:
a narrow Hugging Face Qwen2 (64 wide, logits out) of 48 and 192 layers: ~3.7k and ~14.5k
nodes. The load average is printed: the machine may be shared, read the ratios.

Model Explorer installs from PyPI: ``pip install --target DIR --no-deps ai-edge-model-explorer``
and, for its server, ``pip install --target DIR2 flask portpicker termcolor watchdog dacite``.
Run: ``PYTHONPATH=. .venv/bin/python bench/model_explorer.py --model-explorer DIR:DIR2
[--layers 48 192] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import labdriver  # noqa: E402

VIEWPORT = {"width": 1600, "height": 1000}
LIMIT_S = 900
TOOLS = ("fxviz", "model explorer")


def program(layers: int, width: int = 64) -> torch.export.ExportedProgram:
    """A narrow Qwen2 (bench/first_view.py's) returning its logits: a program whose output
    is a plain tensor can be saved and loaded (a CausalLMOutputWithPast cannot be loaded)."""
    import transformers

    config = transformers.Qwen2Config(hidden_size=width, num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=2 * width, vocab_size=256,
                                      max_position_embeddings=64, use_cache=False)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    base = type(model)
    model.__class__ = type("Qwen2Logits", (base,), {"forward": lambda self, ids: base.forward(self, ids).logits})
    return torch.export.export(model, (torch.randint(0, 256, (1, 16)),), strict=False)


def saved_program(folder: Path, layers: int) -> Path:
    path = folder / f"qwen2_{layers}_layers.pt2"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        torch.export.save(program(layers), path)
    return path


def _fxviz(ep: torch.export.ExportedProgram, folder: str) -> tuple[str, str, dict[str, float]]:
    start = time.perf_counter()
    import fxviz

    imported = time.perf_counter()
    session = fxviz.Session(ep)
    opened = time.perf_counter()
    path = session.to_html(Path(folder) / "report.html")
    parts = {"import": imported - start, "Session": opened - imported, "to_html": time.perf_counter() - opened}
    return path.as_uri(), ".fxviz-report[data-ready] .fxviz-gv-canvas svg g.node", parts


def _model_explorer(ep: torch.export.ExportedProgram, folder: str) -> tuple[str, str, dict[str, float]]:
    sys.path += os.environ["FXVIZ_MODEL_EXPLORER"].split(os.pathsep)  # after the venv's packages
    start = time.perf_counter()
    import model_explorer
    from model_explorer import server

    imported = time.perf_counter()
    config = model_explorer.config()
    config.add_model_from_pytorch("program", exported_program=ep)
    converted = time.perf_counter()
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    threading.Thread(target=lambda: server.start(port=port, config=config, no_open_in_browser=True),
                     daemon=True).start()
    while True:
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/check_health", timeout=5) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.01)
    parts = {"import": imported - start, "conversion": converted - imported,
             "server": time.perf_counter() - converted}
    return f"http://localhost:{port}/?data={config.to_url_param_value()}", "webgl-renderer canvas.main", parts


def _shows_something(page: Any, selector: str) -> bool:
    """Whether the element's area on screen holds anything darker than the background."""
    import numpy as np
    from PIL import Image

    shot = page.locator(selector).screenshot()
    return bool((np.asarray(Image.open(io.BytesIO(shot)).convert("L")) < 200).any())


def worker(tool: str, pt2: str) -> dict[str, Any]:
    """One run in this fresh process: prepare, then open the page until its first node."""
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(1)
    ep = torch.export.load(pt2)
    with sync_playwright() as p, tempfile.TemporaryDirectory() as folder:
        browser = labdriver.launch_chromium(p)
        page = browser.new_page(viewport=VIEWPORT)
        start = time.perf_counter()
        url, selector, parts = (_fxviz if tool == "fxviz" else _model_explorer)(ep, folder)
        prepared = time.perf_counter()
        origin = url.split("/?")[0] if url.startswith("http") else "file://"
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith((origin, "blob:", "data:"))
                   else route.abort())
        page.goto(url, wait_until="commit")
        page.wait_for_selector(selector, state="visible", timeout=LIMIT_S * 1000)
        shown = time.perf_counter()
        if tool == "model explorer":  # a WebGL canvas: drawn in the frames after it is attached
            while True:
                before = time.perf_counter()
                if _shows_something(page, selector):
                    break
                shown = before
        browser.close()
    nodes = len(ep.graph.nodes)
    return {"prepare": prepared - start, "page": shown - prepared, "total": shown - start, "parts": parts,
            "nodes": nodes}


def _spawn(tool: str, pt2: Path, paths: str) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FXVIZ_MODEL_EXPLORER": paths}
    out = subprocess.run([sys.executable, __file__, "--worker", tool, str(pt2)], capture_output=True, text=True,
                         timeout=LIMIT_S, env=env)
    if out.returncode:
        raise SystemExit(f"{tool} on {pt2.name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-explorer", required=False,
                        help="folders holding model_explorer and its server's packages, os.pathsep-separated")
    parser.add_argument("--layers", type=int, nargs="+", default=[48, 192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--programs", default=os.path.join(tempfile.gettempdir(), "fxviz-bench-programs"),
                        help="where the .pt2 programs are kept between runs")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if not args.model_explorer:  # make bench runs every benchmark bare
        print("bench/model_explorer.py: nothing measured without --model-explorer DIR:DIR2 (see its docstring)")
        return
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (medians)")
    paths = os.pathsep.join(os.path.abspath(p) for p in args.model_explorer.split(os.pathsep))
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()}); one thread per process")
    print(f"{'program':24} {'nodes':>6} {'tool':15} {'prepare':>8} {'page':>7} {'total':>7}   parts (s)")
    for layers in args.layers:
        pt2 = saved_program(Path(args.programs), layers)
        runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in TOOLS}
        for _ in range(args.repeats):
            for tool in TOOLS:
                runs[tool].append(_spawn(tool, pt2, paths))
        medians = {tool: {key: statistics.median(r[key] for r in runs[tool]) for key in ("prepare", "page", "total")}
                   for tool in TOOLS}
        for tool in TOOLS:
            parts = {k: statistics.median(r["parts"][k] for r in runs[tool]) for k in runs[tool][0]["parts"]}
            m = medians[tool]
            print(f"qwen2 ({layers} layers){'':8} {runs[tool][0]['nodes']:6} {tool:15} {m['prepare']:8.2f} "
                  f"{m['page']:7.2f} {m['total']:7.2f}   " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
        ours, theirs = medians["fxviz"], medians["model explorer"]
        verdict = "PASS" if ours["total"] <= theirs["total"] else "MISS"
        print(f"{'':31} fxviz / Model Explorer: prepare {ours['prepare'] / theirs['prepare']:.2f}x, page "
              f"{ours['page'] / theirs['page']:.2f}x, end to end {ours['total'] / theirs['total']:.2f}x "
              f"(target <= 1.0x: {verdict})", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
