"""What numerics' float64 judgement of diverged nodes costs (fxviz/checks/_numerics_truth.py):
``numerics`` with it against ``numerics`` without it, alternating, the median of 5 each, in one
process, as this thread's CPU time (the machine is shared). Cases: bench/numerics.py's 30k-node
chain with a real error at its first node (the search stops at the first run), resnet50 after
fuse_conv_bn (nothing diverges: nothing judged), and tests/test_check_float64.py's training step
with its sums flipped (rounding only: every diverged node judged).
Run: ``PYTHONPATH=. .venv/bin/python bench/numerics_rounding.py``.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

sys.path[:0] = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..", "tests")]
from numerics import resnet50, synthetic  # noqa: E402  (bench/numerics.py)
from test_check_float64 import flip_sums, session  # noqa: E402

from fxviz.checks import numerics as numerics_module  # noqa: E402
from fxviz.diff.structure import structure  # noqa: E402


def rounding_only():
    s = session()
    s.apply(flip_sums)
    return s.steps[0], s.steps[1]


def main() -> None:
    torch.set_num_threads(1)
    judge = numerics_module.judge_rounding
    cases = {"30k-node chain, error at its first node": synthetic, "resnet50 (fuse_conv_bn)": resnet50,
             "float32 stand-in, rounding only": rounding_only}
    print(f"load {os.getloadavg()[0]:.2f}")
    for name, make in cases.items():
        a, b = make()
        marks = structure(a.gm, b.gm)
        times: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(5):
            for variant in ("without", "with"):
                numerics_module.judge_rounding = judge if variant == "with" else (lambda *_: None)
                start = time.thread_time()
                rows = numerics_module.numerics(a, b, marks)
                times[variant].append(time.thread_time() - start)
        numerics_module.judge_rounding = judge
        with_, without = statistics.median(times["with"]), statistics.median(times["without"])
        print(f"{name}: {with_ * 1e3:.1f} ms with the judgement, {without * 1e3:.1f} ms without: "
              f"{with_ / without:.2f}x; {int(rows['diverged'].sum())} diverged, {int(rows['rounding'].sum())} rounding")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
