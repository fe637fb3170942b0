"""Error statistics of many value pairs, vectorised: what :mod:`fxviz.checks.numerics` tallies
per node without a Python step per tensor element or per small tensor.

A pair is (the earlier step's value, the later step's) under an integer key. Large pairs
are reduced at once; small ones wait, by reference, and are stacked by shape and
reduced in one go, within a budget of elements, so waiting never holds more than that.
Per key: max |d|, max |ref|, sum d², sum ref², sum out² and the worst error over its
tolerance (the step check's rule), summed over a value's tensors.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from fxviz._torch_internals import tree_leaves
from fxviz.checks.check import tolerance

SMALL = 1 << 12  # elements: a value this small waits to be compared with others of its shape
PENDING = 1 << 14  # elements waiting at most (each side), and at most BATCH values
BATCH = 256
_NORM = torch.linalg.vector_norm


class Stats:
    """Pairs added under keys ``0 .. n - 1``; :meth:`table` gives the numbers per key."""

    def __init__(self, n_keys: int, tf32: bool):
        self.n_keys, self.tf32 = n_keys, tf32
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.waiting = 0
        self.done: list[tuple[list[int], np.ndarray, float]] = []  # keys, numbers (k x 5), rtol
        self.nothing: set[int] = set()  # keys whose values do not compare (no tensor, other shapes)
        self.rtols: dict[tuple[torch.dtype, bool], float] = {}

    def add(self, key: int, reference: Any, output: Any) -> None:
        """Compare ``output`` with ``reference`` (tensors, or containers of them) under ``key``."""
        if isinstance(reference, torch.Tensor) and isinstance(output, torch.Tensor):
            if reference.shape != output.shape:
                self.nothing.add(key)
            else:
                self._pair(key, reference, output)
            return
        refs, outs = tree_leaves(reference), tree_leaves(output)
        pairs = [(r, o) for r, o in zip(refs, outs) if isinstance(r, torch.Tensor)]
        if len(refs) != len(outs) or not pairs or any(not isinstance(o, torch.Tensor) or o.shape != r.shape
                                                      for r, o in pairs):
            self.nothing.add(key)
            return
        for r, o in pairs:
            self._pair(key, r, o)

    def _pair(self, key: int, ref: torch.Tensor, out: torch.Tensor) -> None:
        size = ref.numel()
        if size > SMALL:
            r = _wide(ref)
            self.done.append(([key], _host(_numbers(r, _wide(out).to(r.device, r.dtype)).unsqueeze(0)), self._rtol(ref)))
            return
        self.pending.append((key, ref, out))
        self.waiting += size
        if self.waiting >= PENDING or len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Compare what waits (before anything could write into it), one stack per shape and dtypes."""
        groups: dict[tuple, list] = {}
        for item in self.pending:
            groups.setdefault((item[1].shape, item[1].dtype, item[2].dtype), []).append(item)
        self.pending.clear()  # the same list: the lockstep appends to it directly
        self.waiting = 0
        for items in groups.values():
            try:
                ref = _wide(torch.stack([item[1] for item in items]))
                out = _wide(torch.stack([item[2] for item in items])).to(ref.device, ref.dtype)
            except RuntimeError:  # values on several devices (a CPU scalar in a CUDA graph): one by one
                for key, r, o in items:
                    wide = _wide(r)
                    self.done.append(([key], _host(_numbers(wide, _wide(o).to(wide.device, wide.dtype)).unsqueeze(0)),
                                      self._rtol(r)))
                continue
            count = len(items)
            self.done.append(([item[0] for item in items],
                              _host(_numbers(ref.reshape(count, -1), out.reshape(count, -1), dim=1).T),
                              self._rtol(items[0][1])))

    def _rtol(self, ref: torch.Tensor) -> float:
        key = (ref.dtype, ref.is_cuda)
        if key not in self.rtols:
            self.rtols[key] = tolerance(ref.dtype, tf32=self.tf32 and ref.is_cuda)
        return self.rtols[key]

    def table(self) -> np.ndarray:
        """Per key: max_abs, scale (max |ref|), sum d², sum ref², sum out², worst error over
        tolerance; a row of NaN (worst 0) for a key with nothing compared."""
        self.flush()
        found = np.full((self.n_keys, 6), math.nan)
        if not self.done:
            found[:, 5] = 0.0
            return found
        keys = np.concatenate([np.asarray(k, dtype=np.int64) for k, _, _ in self.done])
        numbers = np.concatenate([n for _, n, _ in self.done])
        rtol = np.concatenate([np.full(len(k), r) for k, _, r in self.done])
        error, scale = numbers[:, 0], numbers[:, 1]
        allowed = rtol * scale
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = np.where(allowed > 0, error / allowed, np.where(error > 0, math.inf, 0.0))
        worst[np.isnan(error)] = math.inf  # NaN: never within tolerance
        table = np.zeros((self.n_keys, 6))
        for column, values in ((0, error), (1, scale), (5, worst)):
            np.maximum.at(table[:, column], keys, values)  # NaN carries through
        np.add.at(table[:, 2:5], keys, numbers[:, 2:5])
        seen = np.zeros(self.n_keys, dtype=bool)
        seen[keys] = True
        seen[list(self.nothing)] = False
        table[~seen, :5] = math.nan
        table[~seen, 5] = 0.0
        return table


def _numbers(ref: torch.Tensor, out: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """max |d|, max |ref|, sum d², sum ref², sum out² over ``dim`` (all elements: None), stacked."""
    if ref.numel() == 0:
        return torch.zeros((5, *ref.shape[:1]) if dim is not None else 5, dtype=ref.dtype, device=ref.device)
    diff = out - ref
    return torch.stack([_NORM(diff, math.inf, dim=dim), _NORM(ref, math.inf, dim=dim), _NORM(diff, dim=dim).square(),
                        _NORM(ref, dim=dim).square(), _NORM(out, dim=dim).square()])


def _host(numbers: torch.Tensor) -> np.ndarray:
    """Numbers in the host's own memory (float64): what a batch leaves behind is not a tensor."""
    return numbers.cpu().numpy().astype(np.float64)  # a copy: the tensor is freed


def _wide(t: torch.Tensor) -> torch.Tensor:
    """The dtype errors are computed in: float64 for double, float32 for the rest (complex as pairs)."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t if t.dtype in (torch.float64, torch.float32) else t.to(torch.float32)


def results(table: np.ndarray, propagated: np.ndarray, introduced: np.ndarray) -> tuple[np.ndarray, ...]:
    """From :meth:`Stats.table` rows: (max_abs, max_rel, sqnr_db, cosine, worst) of the rows
    ``propagated``, and max_rel of the rows ``introduced`` over the propagated rows' scale."""
    prop, intro = table[propagated], table[introduced]
    error, scale, error_sq, ref_sq, out_sq = (prop[:, i] for i in range(5))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = _ratio(error, scale)
        sqnr = np.where(error_sq == 0, math.inf, np.where(ref_sq > 0, 10 * np.log10(ref_sq / error_sq), -math.inf))
        sqnr[np.isnan(error_sq)] = math.nan
        norms = np.sqrt(ref_sq * out_sq)
        cosine = np.where(norms > 0, np.clip((ref_sq + out_sq - error_sq) / (2 * norms), -1, 1), math.nan)
        intro_rel = _ratio(intro[:, 0], scale)
    return error, relative, sqnr, cosine, prop[:, 5], intro_rel


def _ratio(error: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """error / scale; inf where only the scale is 0, 0 where both are."""
    out = np.where(scale > 0, error / np.where(scale > 0, scale, 1), np.where(error > 0, math.inf, 0.0))
    out[np.isnan(error) | np.isnan(scale)] = math.nan
    return out
