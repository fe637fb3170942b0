"""What closed Explorers leave behind: open and close Explorers on a training step one
after another (as a notebook re-run does) and print, after each close and a full
collection, the objects the collector tracks and the resident memory over what the
process held after a first, small one. A closed Explorer should leave nothing: the
objects flat and the memory level from the second on (the allocator keeps freed pages).

Run from the repository root: .venv/bin/python -P bench/retained.py [--layers 64] [--times 3]
"""
from __future__ import annotations

import argparse
import gc
import pathlib
import sys
import warnings

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/ is not a package)

import fxviz  # noqa: E402
from fxviz.widgets import Explorer  # noqa: E402


def resident_mb() -> float:
    """Resident memory in MB (Linux; NaN elsewhere)."""
    try:
        status = pathlib.Path("/proc/self/status").read_text()
    except OSError:
        return float("nan")
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")) / 1024


def open_and_close(layers: int) -> None:
    fn, inputs, options = scale.training_step(layers)
    Explorer(fxviz.Session(fn, inputs, **options), profile="off").close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=64, help="layers of the training step (64: about 10k nodes)")
    parser.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    open_and_close(1)  # imports and one-off caches, outside the baseline
    gc.collect()
    objects, resident = len(gc.get_objects()), resident_mb()
    print(f"{'closed':>6} {'objects left':>13} {'MB resident':>12}")
    for i in range(1, args.times + 1):
        open_and_close(args.layers)
        gc.collect()
        print(f"{i:6d} {len(gc.get_objects()) - objects:13d} {resident_mb() - resident:12.0f}", flush=True)


if __name__ == "__main__":
    main()
