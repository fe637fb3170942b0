"""Heavy models: fxviz's first view and check, before and after the make_fx and check speed-ups, beside torch's own trace.

Cases (random weights, small inputs, one thread):

- ``frcnn``: torchvision ``fasterrcnn_resnet50_fpn`` at 64x64 opened with ``tracer="make_fx"``;
  torch's floor: ``make_fx`` alone on the model (``record_module_stack``, as fxviz asks).
- ``maskrcnn``: ``maskrcnn_resnet50_fpn_v2`` at 64x64 with ``tracer="auto"`` (export stops at a
  data-dependent guard, make_fx fails, dynamo opens it); floor: ``tracer="dynamo"`` alone.
- ``pnasnet``: timm ``pnasnet5large`` at 96x96, a training step as bench/frontends.py writes it
  (``_step``); floor: ``make_fx`` alone on the step.

Per case, ``old`` (this work's changes undone in place: a fake mode per tensor, the graph's code
compiled at each rename, a training step's graph run to be drawn, each leaf's error through float64
copies, a copy of the weights per run) and ``new`` alternate in one process with the floor; medians of ``--repeats``. The
first view is ``Session`` + the drawing's layout (as bench/frontends.py times it); the check is
``session.current.check`` after it (a fresh session: nothing cached; the graph's code, made on first
use, is made there now), and both together. The machine is shared:
the load average is printed; read the ratios, not the seconds.

``--cold``: the first view alone, in a fresh process per run (old and new alternating).

Run: ``PYTHONPATH=. .venv/bin/python bench/heavy_open.py [--case frcnn|maskrcnn|pnasnet] [--repeats 3] [--cold]``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

import fxviz  # noqa: E402
from fxviz._runtime import untouched  # noqa: E402
from fxviz.capture import make_fx as fxviz_make_fx  # noqa: E402
from fxviz.checks import check as check_module  # noqa: E402
from fxviz.draw.render import render  # noqa: E402


def _frcnn() -> tuple[Any, tuple, str]:
    import torchvision

    model = torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64).eval()
    return model, ([torch.randn(3, 64, 64)],), "make_fx"


def _maskrcnn() -> tuple[Any, tuple, str]:
    import torchvision

    model = torchvision.models.detection.maskrcnn_resnet50_fpn_v2(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64).eval()
    return model, ([torch.randn(3, 64, 64)],), "auto"


def _pnasnet() -> tuple[Any, tuple, str]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from frontends import _step, _timm

    step, inputs = _step(_timm("pnasnet5large", 96), lambda out: out)()
    return step, inputs, "auto"


CASES: dict[str, Callable[[], tuple[Any, tuple, str]]] = {"frcnn": _frcnn, "maskrcnn": _maskrcnn, "pnasnet": _pnasnet}


@contextlib.contextmanager
def _copy_per_run(model: Any) -> Iterator[Callable[[], None]]:
    """``run_outputs`` as before: a copy of the weights taken (and put back) around each run."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(untouched(model))

        def again() -> None:
            stack.close()
            stack.enter_context(untouched(model))
        yield again


@contextlib.contextmanager
def _old() -> Iterator[None]:
    """This work undone in place: make_fx's trace as before, the check's leaf-by-leaf comparison."""
    undone = {(fxviz_make_fx, "one_fake_mode"): contextlib.nullcontext,
              (fxviz_make_fx, "lazy_code"): contextlib.nullcontext,
              (fxviz_make_fx, "_unreturned_vals"): lambda gm: None,
              (check_module, "finite_error"): lambda e, a: None,  # the exact path: float64 copies, masks
              (check_module, "peak"): lambda t: float(t.detach().abs().max()),
              (check_module, "untouched"): _copy_per_run}
    saved = {key: getattr(*key) for key in undone}
    for (module, name), value in undone.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def _open(model: Any, inputs: tuple, tracer: str) -> tuple[float, float, str]:
    """Seconds to the first view and to the check after it, and the check's status."""
    start = time.perf_counter()
    session = fxviz.Session(model, inputs, tracer=tracer)
    render(session.current.graph).drawn()
    opened = time.perf_counter()
    status = session.current.check.summary
    return opened - start, time.perf_counter() - opened, status


def _floor(case: str, model: Any, inputs: tuple) -> float:
    """torch's own capture of the graph fxviz opens, timed alone."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from fxviz.capture import capture
    from fxviz.capture.closure import closed_over_module

    def target(*args: Any) -> Any:
        return model(*args)

    target._orig_mod = model if isinstance(model, torch.nn.Module) else closed_over_module(model)  # module paths
    start = time.perf_counter()
    if case == "maskrcnn":
        capture(model, inputs, tracer="dynamo")
    else:
        with untouched(model):  # a training step's BatchNorms would move their statistics
            make_fx(target, record_module_stack=True)(*inputs)
    return time.perf_counter() - start


def run(case: str, repeats: int) -> None:
    model, inputs, tracer = CASES[case]()
    times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    floors, statuses = [], {}
    for i in range(repeats):
        for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
            with _old() if name == "old" else contextlib.nullcontext():
                first, check, statuses[name] = _open(model, inputs, tracer)
            times[name].append((first, check))
        floors.append(_floor(case, model, inputs))
    floor = statistics.median(floors)
    med = {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for name, ts in times.items()}
    (old_first, old_check), (new_first, new_check) = med["old"], med["new"]
    what = "dynamo alone" if case == "maskrcnn" else "make_fx alone"
    print(f"{case:9s} first view old {old_first:6.2f} s  new {new_first:6.2f} s  ({new_first / old_first:.2f}x)   "
          f"check old {old_check:6.2f} s  new {new_check:6.2f} s  ({new_check / old_check:.2f}x)   both old "
          f"{old_first + old_check:6.2f} s  new {new_first + new_check:6.2f} s  "
          f"({(new_first + new_check) / (old_first + old_check):.2f}x)   "
          f"{what} {floor:6.2f} s: first view new / floor {new_first / floor:.2f}x, old {old_first / floor:.2f}x   "
          f"check: old {statuses['old']!r}, new {statuses['new']!r}", flush=True)


def cold(case: str, repeats: int) -> None:
    """The first open in a fresh process (torch's one-time costs of its first trace in it), old and new
    alternating; the model is built before the clock starts."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(repeats):
        for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", case, name],
                                  capture_output=True, text=True, check=True)
            times[name].append(float(done.stdout.split("FIRST ")[1].split()[0]))
    old, new = (statistics.median(times[n]) for n in ("old", "new"))
    print(f"{case:9s} cold first view old {old:6.2f} s  new {new:6.2f} s  ({new / old:.2f}x)", flush=True)


def _one(case: str, name: str) -> None:
    model, inputs, tracer = CASES[case]()
    with _old() if name == "old" else contextlib.nullcontext():
        start = time.perf_counter()
        session = fxviz.Session(model, inputs, tracer=tracer)
        render(session.current.graph).drawn()
        print(f"FIRST {time.perf_counter() - start}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=tuple(CASES), action="append")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="fresh processes: the first open in each")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    if args.one:
        return _one(*args.one)
    print(f"load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    for case in args.case or tuple(CASES):
        (cold if args.cold else run)(case, args.repeats)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
