"""The time to fxviz's first view, as ratios to what a user would otherwise wait for.

Per model, side by side in one run: fxviz's first view (``Session`` + the SVG of the
first drawing, ``render(step.graph).drawn()``) against a peer on the same model:

- symbolically traced models (timm resnet50d, convnext_nano, torchvision
  mobilenet_v3_large at 64x64): torchview's ``draw_graph(...).visual_graph.pipe("svg")``
  at its default depth (3: mobilenet_v3 as 39 boxes), the target's peer, and at every op
  (``depth=100``: 189 boxes, as many as fxviz's first view draws, in module clusters), shown;
  also shown, with no target: the whole ``explore()`` (the Explorer and its display bundle);
- models fxviz must export (Hugging Face Mistral, 6 layers; RoBERTa, 4 layers; small
  configs): ``torch.export.export`` alone (non-strict);
- an ExportedProgram (Hugging Face Qwen2, 24 layers, 64 and 512 wide): one forward of
  ``ep.module()`` (warm: made before the clock starts; cold: made and run, as a fresh
  kernel runs a program), against fxviz's first view and against
  its first view plus the fresh session's report (``to_html``), and Model Explorer's conversion of the same program
  (its PyTorch adapter plus the JSON it sends the page) where ``--model-explorer DIR``
  names a ``pip install --target DIR --no-deps ai-edge-model-explorer``; the browser part
  is not measured here.

Cold: each tool's import and first call in a fresh process (what a user meets on the
first ``explore`` in a kernel), fxviz's bytecode compiled first as an install has it; warm: both tools in one process after one call each,
alternating. Every figure is a median of ``--repeats`` (>= 3) runs, fxviz and the peer
alternating; processes run one thread (the machine is shared). The load average is
printed with the table: read the ratios, not the seconds. Each row ends with issue 32's
target for it, PASS where both the cold and the warm ratio meet it: torchview 1.0x,
torch.export 1.1x, one forward 1.0x (with the report: 2.0x).

Run: ``PYTHONPATH=. .venv/bin/python bench/first_view.py [--group traced|export|program] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import compileall
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

LIMIT_S = 600


def _timm(name: str) -> Callable[[], tuple]:
    def build():
        import timm

        return timm.create_model(name, pretrained=False).eval(), (torch.randn(1, 3, 64, 64),)
    return build


def _mobilenet() -> tuple:
    import torchvision

    return torchvision.models.mobilenet_v3_large(weights=None).eval(), (torch.randn(1, 3, 64, 64),)


def _hf(config: str, **kw: Any) -> Callable[[], tuple]:
    def build():
        import transformers

        model = transformers.AutoModel.from_config(getattr(transformers, config)(**kw)).eval()
        return model, (torch.randint(0, 128, (1, 16)),)
    return build


def _qwen2_program(layers: int = 24, width: int = 64) -> tuple:
    import transformers

    config = transformers.Qwen2Config(hidden_size=width, num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=2 * width, vocab_size=256,
                                      max_position_embeddings=64, use_cache=False)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    ids = torch.randint(0, 256, (1, 16))
    return torch.export.export(model, (ids,), strict=False), (ids,)


_LM = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 128,
       "max_position_embeddings": 64}
#: group -> model -> (build, peer); build returns (model, inputs)
MODELS: dict[str, dict[str, tuple[Callable[[], tuple], str]]] = {
    "traced": {"resnet50d": (_timm("resnet50d"), "torchview"),
               "convnext_nano": (_timm("convnext_nano"), "torchview"),
               "mobilenet_v3_large": (_mobilenet, "torchview")},
    "export": {"mistral (6 layers)": (_hf("MistralConfig", num_hidden_layers=6, num_key_value_heads=2,
                                          use_cache=False, **_LM), "export"),
               "roberta (4 layers)": (_hf("RobertaConfig", num_hidden_layers=4, **_LM), "export")},
    "program": {"qwen2 (24 layers) program": (_qwen2_program, "forward"),
                "qwen2 (24 layers, 512 wide) program": (lambda: _qwen2_program(24, 512), "forward")},
}
#: peer -> the most fxviz's time may be, as a multiple of the peer's (issue 32); None: shown, no target
TARGETS = {"torchview": 1.0, "torchview (every op)": None, "export": 1.1, "forward": 1.0, "model explorer": None}
#: fxviz's first view and report (``to_html`` of the fresh session): at most two forwards
REPORT_TARGET = 2.0


def first_view(model: Any, inputs: tuple) -> str:
    import fxviz
    from fxviz.draw.render import render

    session = fxviz.Session(model, inputs)
    return render(session.current.graph).drawn().svg


def first_view_and_report(model: Any, inputs: tuple) -> None:
    """The first view, then the fresh session's report (checks not run: "not checked yet")."""
    import tempfile

    import fxviz
    from fxviz.draw.render import render

    session = fxviz.Session(model, inputs)
    render(session.current.graph).drawn()
    with tempfile.TemporaryDirectory() as folder:
        session.to_html(os.path.join(folder, "report.html"))


def explored(model: Any, inputs: tuple) -> None:
    """What a kernel's first ``explore()`` costs until its output is ready: the Explorer
    (default: checked and profiled in the background) and its display bundle.
    Outside a kernel, the code view it fills after the cell is filled at once: counted."""
    import fxviz

    explorer = fxviz.explore(model, *inputs)
    explorer._repr_mimebundle_()
    _OPEN.append(explorer)  # closed after the clock stops: closing waits for the worker


_OPEN: list[Any] = []


OURS = {"fxviz": first_view, "fxviz + report": first_view_and_report, "fxviz explore": explored}


def peer(name: str, model: Any, inputs: tuple) -> Callable[[], Any]:
    """The peer's call on ``model`` (set up, not timed, where it needs setting up)."""
    if name == "torchview":
        from torchview import draw_graph

        return lambda: draw_graph(model, input_data=list(inputs)).visual_graph.pipe(format="svg")
    if name == "torchview (every op)":  # as much as fxviz's first view draws (189 boxes of mobilenet_v3, not 39)
        from torchview import draw_graph

        return lambda: draw_graph(model, input_data=list(inputs), depth=100).visual_graph.pipe(format="svg")
    if name == "export":
        return lambda: torch.export.export(model, inputs, strict=False)
    if name == "forward":
        module = model.module()

        def forward():
            with torch.no_grad():
                return module(*inputs)
        return forward
    if name == "model explorer":
        return lambda: _model_explorer(model)
    raise SystemExit(f"unknown peer {name!r}")


def _model_explorer(ep: torch.export.ExportedProgram) -> str:
    """Model Explorer's PyTorch adapter alone (its package's __init__ starts a server)."""
    if "model_explorer" not in sys.modules:
        package = types.ModuleType("model_explorer")
        package.__path__ = [os.path.join(os.environ["FXVIZ_MODEL_EXPLORER"], "model_explorer")]
        sys.modules["model_explorer"] = package
    from model_explorer.pytorch_exported_program_adapter_impl import PytorchExportedProgramAdapterImpl

    graphs = PytorchExportedProgramAdapterImpl(ep, {"const_element_count_limit": 16}).convert()  # its default
    return json.dumps({"graphs": [dataclasses.asdict(g) for g in graphs["graphs"]]})


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    while _OPEN:
        _OPEN.pop().close()
    return took


def worker(group: str, name: str, tool: str, warm: int) -> dict[str, Any]:
    """In a fresh process: ``tool``'s first call (cold: its import included), or with
    ``warm`` > 0, fxviz and every peer alternating ``warm`` times after one call each."""
    torch.set_num_threads(1)
    import IPython  # noqa: F401 - loaded in every kernel before its first cell

    model, inputs = MODELS[group][name][0]()
    gc.collect()  # no tool pays for a collection that setting up (importing IPython, building the model) made due
    if not warm:
        return {"s": _timed(lambda: OURS[tool](model, inputs) if tool in OURS else peer(tool, model, inputs)())}
    calls = {**{ours: (lambda f=OURS[ours]: f(model, inputs)) for ours in _ours(group)},
             **{p: peer(p, model, inputs) for p in _peers(group, name)}}
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {tool: [] for tool in calls}
    for _ in range(warm):
        for tool, call in calls.items():
            time.sleep(0.1)  # what a call leaves running (fxviz's next dot starting) settles, as between a user's actions
            times[tool].append(_timed(call))
    return times


def _ours(group: str) -> list[str]:
    return {"program": ["fxviz", "fxviz + report"], "traced": ["fxviz", "fxviz explore"]}.get(group, ["fxviz"])


def _peers(group: str, name: str) -> list[str]:
    found = [MODELS[group][name][1]]
    if found == ["torchview"]:
        found.append("torchview (every op)")
    if group == "program" and os.environ.get("FXVIZ_MODEL_EXPLORER"):
        found.append("model explorer")
    return found


def _spawn(*args: str) -> Any:
    out = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True,
                         timeout=LIMIT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode:
        raise SystemExit(f"worker {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--model", action="append", help="only these models (names as printed)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model-explorer", help="a `pip install --target DIR --no-deps ai-edge-model-explorer`")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker[:3], int(args.worker[3]))))
        return
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (medians)")
    if args.model_explorer:
        os.environ["FXVIZ_MODEL_EXPLORER"] = os.path.abspath(args.model_explorer)
    # fxviz's bytecode cached as an install (or any import but a kernel's first) leaves it: torchview's
    # is, and PYTHONDONTWRITEBYTECODE (set on these machines) would have every cold run compile fxviz anew.
    compileall.compile_dir(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fxviz"),
                           quiet=1)
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()}); one thread per process")
    print(f"{'model':36} {'fxviz':15} {'peer':15} {'cold fxviz':>10} {'peer':>8} {'ratio':>6}   "
          f"{'warm fxviz':>10} {'peer':>8} {'ratio':>6}  target")
    for group, models in MODELS.items():
        if args.group not in ("all", group):
            continue
        for name in models:
            if args.model and name not in args.model:
                continue
            peers = _peers(group, name)
            cold: dict[str, list[float]] = {tool: [] for tool in (*_ours(group), *peers)}
            for _ in range(args.repeats):  # alternating, each in a fresh process
                for tool in cold:
                    cold[tool].append(_spawn(group, name, tool, "0")["s"])
            warm = _spawn(group, name, "fxviz", str(args.repeats))
            for ours in _ours(group):
                ours_cold, ours_warm = statistics.median(cold[ours]), statistics.median(warm[ours])
                for tool in peers:
                    theirs_cold, theirs_warm = statistics.median(cold[tool]), statistics.median(warm[tool])
                    ratios = ours_cold / theirs_cold, ours_warm / theirs_warm
                    target = (REPORT_TARGET if ours == "fxviz + report" and tool == "forward" else
                              None if ours == "fxviz explore" else TARGETS[tool])
                    verdict = "-" if target is None else \
                        f"<= {target:.1f}x {'PASS' if max(ratios) <= target else 'MISS'}"
                    print(f"{name:36} {ours:15} {tool:15} {ours_cold:10.3f} {theirs_cold:8.3f} {ratios[0]:6.2f}x  "
                          f" {ours_warm:10.3f} {theirs_warm:8.3f} {ratios[1]:6.2f}x  {verdict}", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
