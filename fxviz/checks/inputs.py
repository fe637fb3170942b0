"""The random inputs a check adds (the example's structure with new values in every
tensor), and how a check says they found a graph right on the example alone.

A model may take its tensors inside lists, tuples, dicts or dataclasses (a detection
model's ``([image],)``, a Hugging Face ``ModelOutput`` fed back in): a check that varied
only top-level tensors would run such a model on its example alone and call a graph
specialised to that example a match.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection
from typing import Any

import torch

from fxviz._torch_internals import tree_map

#: How a check reads whose graph is right on the example alone (its summary; its message starts so).
EXAMPLE_ONLY = "matches on the example only: output sizes depend on the data"
#: Why a graph can be right on its example alone, and what to do.
EXAMPLE_ONLY_WHY = ("make_fx and export fix the sizes of data-dependent ops (nonzero, masked indexing, NMS) at "
                    "the example's, so the graph is right only for data that give those sizes: open the model "
                    "with tracer='symbolic' or tracer='dynamo' for a graph that follows the data")


def nothing_compared(n_inputs: int, empty: bool, tensors: int = 1) -> str:
    """Why a check compared nothing, and what to try: outputs with no tensor (``tensors``: how
    many there were; None, a Python number), with no elements (a detector's level that gets no
    boxes) or all zero (a head initialised to zero)."""
    if not tensors:
        return (f"the outputs hold no tensor on the {n_inputs} inputs tried (None, or plain Python values, "
                "which were equal): nothing to compare numerically; return the tensors to check (not .item())")
    if empty:
        return (f"the outputs are empty on all {n_inputs} inputs tried: nothing to compare (no elements); try "
                "inputs that give nonempty outputs (for a detector, images with objects or boxes on every level)")
    return (f"every output is zero (or empty) in both on all {n_inputs} inputs tried, so nothing could be "
            "compared; a last layer initialised to zero (timm's and torchvision's ViT heads, before training) "
            "gives this on any input: load trained weights or re-initialise it, or pass inputs that give "
            "nonzero outputs")


def random_like(inputs: tuple, seed: int, kept: Collection[int] = ()) -> tuple:
    """``inputs`` with every tensor in them (at any depth of tuples, lists, dicts,
    named tuples and dataclasses) replaced by one of the same shape, dtype and strides
    with new values: normal for floating point, uniform over the example's range for
    integers (token ids stay valid). Bools and non-tensors are kept. A tensor reached
    twice (an input passed twice) is replaced by one new tensor, so aliasing is kept.
    ``kept``: the ids of tensors left as they are: the model's parameters and buffers
    where a graph takes them as inputs (dynamo's), since the model never runs on other
    ones, and a buffer of position ids, varied, indexes past its table."""
    gen = torch.Generator().manual_seed(seed)
    made: dict[int, Any] = {}

    def leaf(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) in kept:
                return x
            if id(x) not in made:
                made[id(x)] = _random_tensor(x, gen)
            return made[id(x)]
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return _with_fields(x, vary)
        return x

    def vary(x: Any) -> Any:
        return tree_map(leaf, x)

    return tuple(vary(list(inputs)))


def _with_fields(obj: Any, vary: Any) -> Any:
    """A copy of dataclass ``obj`` (one torch's pytree does not know) with its fields,
    and its items when it is also a dict (as ``ModelOutput`` is), passed through ``vary``;
    ``obj`` itself is never changed."""
    new = copy.copy(obj)
    for field in dataclasses.fields(obj):
        object.__setattr__(new, field.name, vary(getattr(obj, field.name)))  # frozen ones too
    if isinstance(new, dict):
        for key in new:
            dict.__setitem__(new, key, vary(obj[key]))
    return new


def _random_tensor(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if x.dtype == torch.bool or x.numel() == 0:
        return x
    if x.is_floating_point() or x.is_complex():
        values = torch.randn(x.shape, generator=gen, dtype=x.dtype)
        # an input the step differentiates (torch.autograd.grad(loss, [x, ...])) requires grad as the example does
        return torch.empty_like(x).copy_(values).requires_grad_(x.requires_grad)
    low, high = int(x.min()), int(x.max()) + 1
    values = torch.randint(low, high, x.shape, generator=gen, dtype=x.dtype)
    return torch.empty_like(x).copy_(values)
