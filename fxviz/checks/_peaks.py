"""The check's error of a floating-point leaf in one pass over each tensor, without the float64
copies and masks that NaN and inf need: 10x on a training step's gradients (bench/heavy_open.py:
pnasnet5large's 3 x 77M, where the comparison took longer than the graph's runs)."""
from __future__ import annotations

import math

import torch


def peak(t: torch.Tensor) -> float:
    """``max|t|`` of a real tensor, without the copy ``abs()`` makes (NaN if it holds one)."""
    low, high = torch.aminmax(t.detach())
    return max(-float(low), float(high))


def finite_error(expected: torch.Tensor, actual: torch.Tensor) -> float | None:
    """``max|expected - actual|`` of two real tensors of one shape, computed in float32 (float64's
    own in float64): rounded by 6e-8 of itself at most, where the check's tolerances are 1e-4 of the
    output's scale (float32's). None where it is not finite: NaN or inf in either (any of them makes
    the difference NaN or inf), or a difference past float32's range; the caller's exact path."""
    work = expected.dtype if expected.dtype in (torch.float32, torch.float64) else torch.float32
    error = float((expected.to(work) - actual.to(work)).abs_().max())
    return error if math.isfinite(error) else None
