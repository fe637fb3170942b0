"""What capturing torch.compile's graphs costs, next to torch's own dynamo in the same run.

Per model (random weights; each has a graph break): the first call of
``torch.compile(model, backend="eager")`` (dynamo alone: the baseline) and of
``backend="aot_eager"`` (dynamo + AOT autograd, forward only), then ``fxviz.compiled``
(dynamo + AOT forward and backward, guards, break messages), ``fxviz.compiled`` without
the structured-log handler that collects dynamo's break messages, and
``capture(tracer="dynamo")`` (what tracer="auto" falls back to: dynamo and AOT's forward), and
the same without AOT (what it cost before AOT's forward was added). The variants are
interleaved, ``--repeats`` rounds; medians and ratios to the baseline are printed, with
the spread (max/min of the baseline) to say how noisy the machine was.

Run: ``PYTHONPATH=. .venv/bin/python bench/compiled.py [--repeats 5]``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402
from torch import nn  # noqa: E402

import fxviz  # noqa: E402
from fxviz._torch_internals import dynamo as dynamo_api  # noqa: E402
from fxviz.capture import capture  # noqa: E402
from fxviz.capture.dynamo import capture as dynamo_capture  # noqa: E402


class Gate(nn.Module):
    """An MLP with a branch on a tensor value: two graphs."""

    def __init__(self, width: int = 64, depth: int = 4):
        super().__init__()
        self.a = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
        self.b = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        y = self.a(x)
        if y.mean() > 0:
            y = y * 2
        return self.b(torch.relu(y))


class BranchyResNet(nn.Module):
    """resnet18 with a data-dependent branch after its stem."""

    def __init__(self):
        super().__init__()
        import torchvision

        self.net = torchvision.models.resnet18(weights=None).eval()

    def forward(self, x):
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        if x.mean() > 0:
            x = x * 0.5
        x = n.layer4(n.layer3(n.layer2(n.layer1(x))))
        return n.fc(torch.flatten(n.avgpool(x), 1))


def _torch_compile(backend: str) -> Callable[[nn.Module, torch.Tensor], Any]:
    def run(model, x):
        torch._dynamo.reset()
        with torch.no_grad() if backend == "eager" else contextlib.nullcontext():
            torch.compile(model, backend=backend)(x)
        torch._dynamo.reset()
    return run


class _NoLog(dict):
    """BreakMessages that collects nothing: what the structured-log handler costs."""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        pass

    def quiet(self):
        return contextlib.nullcontext()


def _without_break_messages(model, x):
    saved = dynamo_api.BreakMessages
    dynamo_api.BreakMessages = _NoLog
    try:
        fxviz.compiled(model, x)
    finally:
        dynamo_api.BreakMessages = saved


VARIANTS: dict[str, Callable[[nn.Module, torch.Tensor], Any]] = {
    "torch.compile eager (baseline)": _torch_compile("eager"),
    "torch.compile aot_eager": _torch_compile("aot_eager"),
    "fxviz.compiled": lambda model, x: fxviz.compiled(model, x),
    "fxviz.compiled, no break log": _without_break_messages,
    "capture(tracer='dynamo')": lambda model, x: capture(model, x, tracer="dynamo"),  # with AOT's forward
    "dynamo capture, no AOT": lambda model, x: dynamo_capture(model, (x,), aot=False),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    models = {"Gate (MLP, 2 graphs)": (Gate(), torch.randn(8, 64)),
              "resnet18 + branch": (BranchyResNet(), torch.randn(1, 3, 64, 64))}
    for name, (model, x) in models.items():
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeats):
            for variant, run in VARIANTS.items():  # interleaved: load changes hit every variant alike
                start = time.perf_counter()
                run(model, x)
                times[variant].append(time.perf_counter() - start)
        base = times["torch.compile eager (baseline)"]
        print(f"\n{name}: baseline spread max/min {max(base) / min(base):.2f} over {args.repeats} rounds")
        for variant, values in times.items():
            median = statistics.median(values)
            print(f"  {variant:<32} {median:7.2f} s   {median / statistics.median(base):5.2f}x baseline")


if __name__ == "__main__":
    main()
