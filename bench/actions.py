"""What a person waits for when acting on a large graph, kernel side: apply a pass, undo,
open the Code tab, show the code diff, export the report.

bench/scale.py's synthetic graph (every node a cheap op on a tiny tensor, so its Python
costs show), at each size: the seconds of ``session.apply("replace_op")`` (every add
becomes a mul: every block changes), of its networkx graph (the first drawing pays it),
of undo, of the Code tab's HTML with and without a node selected (the whole code, or the
window of it the tab shows), of the code diff (unified text, then the tab's diff HTML) and
of the Explorer's export; and each over the capture of the same graph in the same run (a
graph's own cost to make, the baseline: these actions should cost a small multiple of it).
Run from the repository root: .venv/bin/python -P bench/actions.py [--sizes 10k,30k,100k]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (its synthetic graph)

import fxviz  # noqa: E402
from fxviz.widgets.explorer import Explorer  # noqa: E402
from fxviz.widgets.panel_code import code_html, diff_html, node_line  # noqa: E402

SIZES = {"10k": 10_000, "30k": 30_000, "100k": 100_000}


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def measure(n: int) -> dict[str, float]:
    model, inputs, options = scale.synthetic(n)
    _, capture = timed(fxviz.trace, model, inputs, **options)
    session = fxviz.Session(model, inputs, **options)
    session.current.graph  # as drawn before any action
    _, apply = timed(session.apply, "replace_op")
    _, graph = timed(lambda: session.current.graph)
    code = session.current.code.lstrip("\n")
    name = f"mul_{n // 100}"
    _, code_whole = timed(code_html, code)
    _, code_node = timed(code_html, code, node_line(code, name, "call_function"))
    comparison = session.compare(0, 1)
    _, diff = timed(lambda: comparison.code_diff)
    _, diff_tab = timed(diff_html, comparison, "fit", node_line(session.current.code, name, "call_function"))
    _, undo = timed(session.undo)
    explorer = Explorer(session, profile="off")
    with tempfile.TemporaryDirectory() as tmp:
        _, export = timed(explorer.export, Path(tmp) / "report.html")
    explorer.close()
    return {"capture": capture, "apply": apply, "graph": graph, "undo": undo, "code tab": code_whole,
            "code at node": code_node, "diff": diff, "diff tab": diff_tab, "export": export}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,30k,100k", help="comma-separated: " + ",".join(SIZES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    measure(500)  # imports and warm-up, outside any row
    cols = ["capture", "apply", "graph", "undo", "code tab", "code at node", "diff", "diff tab", "export"]
    print(f"{'graph':6} " + " ".join(f"{c:>12}" for c in cols) + " " + " ".join(f"{c + '/capture':>16}" for c in cols[1:])
          + f" {'load':>5}")
    for size in args.sizes.split(","):
        r = measure(SIZES[size])
        print(f"{size:6} " + " ".join(f"{r[c]:12.3f}" for c in cols) + " "
              + " ".join(f"{r[c] / r['capture']:16.2f}" for c in cols[1:]) + f" {os.getloadavg()[0]:5.1f}", flush=True)
    print("seconds per action, kernel side; X/capture = the action over the capture of the same graph in this run; "
          "code tab = the Code tab's HTML with nothing selected, code at node = with a node selected (both the "
          "400-line window on long codes); diff = the unified code diff after replace_op; diff tab = the tab's diff "
          "HTML at a node (the diff cached); export = Explorer.export of both steps")


if __name__ == "__main__":
    main()
