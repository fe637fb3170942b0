"""Which models open, per family, next to what torch's own front-ends do on the same models.

For each model (random weights, small inputs): does ``fxviz.Session`` open it (and with
which capture), is it drawn with module clusters, does the check match, and the time
from the call to the first drawing (Session + SVG). Beside it, on the same model in the
same run: does ``torch.fx.symbolic_trace`` and ``torch.export.export`` (non-strict)
succeed, and export's time. Times are medians per family; the machine is shared, so
read them as ratios (fxviz / export) rather than absolute numbers.

Run: ``PYTHONPATH=. .venv/bin/python bench/frontends.py [--wide]``. torchview is not
installed here, so its column is absent.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

import fxviz  # noqa: E402
from fxviz.render import render  # noqa: E402

LIMIT_S = 120


def _hf(config: str, **kw: Any) -> Callable[[], tuple]:
    def build():
        import transformers

        model = transformers.AutoModel.from_config(getattr(transformers, config)(vocab_size=128, **kw)).eval()
        ids = torch.randint(0, 128, (1, 8))
        return model, (ids, torch.ones_like(ids), ids) if config == "T5Config" else (ids,)
    return build


def _timm(name: str, size: int = 64) -> Callable[[], tuple]:
    def build():
        import timm

        extra = {"img_size": size} if any(k in name for k in ("vit", "deit", "swin")) else {}
        return timm.create_model(name, pretrained=False, num_classes=8, **extra).eval(), (torch.randn(1, 3, size, size),)
    return build


def _tv(factory: str, shape: tuple, n: int = 1, **kw: Any) -> Callable[[], tuple]:
    def build():
        import torchvision

        module = torchvision.models
        for part in factory.split(".")[:-1]:
            module = getattr(module, part)
        model = getattr(module, factory.split(".")[-1])(weights=None, **kw).eval()
        inputs = tuple(torch.randn(*shape) for _ in range(n))
        return model, ((list(inputs),) if "detection" in factory else inputs)
    return build


SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
FAMILIES: dict[str, dict[str, Callable[[], tuple]]] = {
    "timm": {n: _timm(n) for n in ("resnet18", "convnext_atto", "efficientnet_b0", "mobilenetv3_small_100",
                                   "vit_tiny_patch16_224", "regnetx_002")},
    "hf": {
        "bert": _hf("BertConfig", **SMALL),
        "gpt2 (cache)": _hf("GPT2Config", n_embd=32, n_layer=2, n_head=2, use_cache=True),
        "gpt2 (no cache)": _hf("GPT2Config", n_embd=32, n_layer=2, n_head=2, use_cache=False),
        "llama (cache)": _hf("LlamaConfig", num_key_value_heads=1, **SMALL),
        "qwen2 (no cache)": _hf("Qwen2Config", num_key_value_heads=1, use_cache=False, **SMALL),
        "t5": _hf("T5Config", d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
    },
    "torchvision": {
        "lraspp (segmentation)": _tv("segmentation.lraspp_mobilenet_v3_large", (1, 3, 64, 64), num_classes=3, weights_backbone=None),
        "r3d_18 (video)": _tv("video.r3d_18", (1, 3, 4, 32, 32), num_classes=3),
        "raft_small (flow)": _tv("optical_flow.raft_small", (1, 3, 128, 128), n=2),
        "fasterrcnn_mobilenet (detection)": _tv("detection.fasterrcnn_mobilenet_v3_large_320_fpn",
                                                (3, 64, 64), num_classes=3, weights_backbone=None),
    },
}
WIDE_EXTRA = {
    "timm": ("densenet121", "deit_tiny_patch16_224", "mixer_b16_224", "swin_tiny_patch4_window7_224", "coatnet_0_rw_224"),
}


class _Timeout(Exception):
    pass


def _limited(fn: Callable[[], Any]) -> Any:
    def alarm(*_):
        raise _Timeout(f"over {LIMIT_S} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT_S)
    try:
        return fn()
    finally:
        signal.alarm(0)


def _try(fn: Callable[[], Any]) -> tuple[bool, float, str]:
    start = time.perf_counter()
    try:
        _limited(fn)
        return True, time.perf_counter() - start, ""
    except Exception as exc:  # a benchmark row, not a crash: the reason is printed
        return False, time.perf_counter() - start, f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"


def measure(build: Callable[[], tuple]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    try:
        model, inputs = build()
    except Exception as exc:  # the model cannot even be built here: a row, not a crash
        return {"opens": False, "fxviz_s": 0.0, "error": f"build: {type(exc).__name__}", "symbolic": False,
                "export": False, "export_s": 0.0}

    def open_and_draw():
        row["session"] = session = fxviz.Session(model, inputs)
        render(session.current.graph).svg

    row["opens"], row["fxviz_s"], row["error"] = _try(open_and_draw)
    if row["opens"]:  # the check runs after the first drawing (the Explorer runs it in the background)
        session = row.pop("session")
        row["method"] = session.capture.method
        paths = {d["module_path"] for _, d in session.current.graph.nodes(data=True)} - {None, ""}
        row["clusters"] = bool(paths)
        ok, _, why = _try(lambda: session.current.check.status)
        row["check"] = session.current.check.status if ok else f"error ({why[:40]})"
    row["symbolic"], _, _ = _try(lambda: torch.fx.symbolic_trace(model))
    row["export"], row["export_s"], _ = _try(lambda: torch.export.export(model, inputs, strict=False))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wide", action="store_true", help="more timm models")
    parser.add_argument("--family", choices=tuple(FAMILIES), action="append", help="only these families")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    families = {k: dict(v) for k, v in FAMILIES.items() if not args.family or k in args.family}
    if args.wide:
        for family, names in WIDE_EXTRA.items():
            families.setdefault(family, {})
            families[family].update({n: _timm(n) for n in names})
    print(f"{'family':<12} {'model':<34} {'fxviz':<18} {'clusters':<8} {'check':<10} {'t_fxviz':>8} "
          f"{'symbolic':>8} {'export':>6} {'t_export':>8}")
    for family, models in families.items():
        rows = []
        for name, build in models.items():
            row = measure(build)
            rows.append(row)
            opened = row.get("method", "FAILED") if row["opens"] else "FAILED"
            print(f"{family:<12} {name:<34} {opened:<18} {str(row.get('clusters', '-')):<8} "
                  f"{row.get('check', '-'):<10} {row['fxviz_s']:8.2f} {str(row['symbolic']):>8} "
                  f"{str(row['export']):>6} {row['export_s']:8.2f}" + (f"  {row['error']}" if row["error"] else ""),
                  flush=True)
        n = len(rows)
        opened = [r for r in rows if r["opens"]]
        exported = [r for r in rows if r["export"]]
        print(f"== {family}: fxviz opens {len(opened)}/{n}, clusters {sum(bool(r.get('clusters')) for r in opened)}/{n}, "
              f"check match {sum(r.get('check') == 'match' for r in opened)}/{n}; symbolic_trace "
              f"{sum(r['symbolic'] for r in rows)}/{n}, torch.export {len(exported)}/{n}; median time to first drawing "
              f"{statistics.median(r['fxviz_s'] for r in opened) if opened else float('nan'):.2f} s vs export alone "
              f"{statistics.median(r['export_s'] for r in exported) if exported else float('nan'):.2f} s", flush=True)


if __name__ == "__main__":
    main()
