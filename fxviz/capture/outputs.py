"""Model outputs that graph capture can return: a key/value cache object (Hugging Face's
``DynamicCache``) becomes ``((keys, values), ...)`` per layer, plain tensors; any other
object that holds lists of tensors (Reformer's cache of buckets and states), those lists."""
from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from fxviz._cow import module_copy
from fxviz._torch_internals import tree_map


def with_plain_outputs(model: nn.Module) -> nn.Module:
    """A copy of ``model`` (the same submodules and tensors, so the same module paths)
    whose forward returns caches as nested tuples. torch.export and make_fx refuse output
    types they do not know; the Session checks the graph against this copy."""
    wrapper = module_copy(model)
    forward = model.forward
    if "forward" not in vars(model) and getattr(forward, "__self__", None) is model:
        # The class's forward, as a method of a subclass of the same name: strict torch.export
        # names each module by where it finds it from the traced frame, and through a closure
        # of the bound forward that is ``forward.__closure__[0].cell_contents.__self__.layer``.
        body = forward.__func__

        @functools.wraps(body)  # torch.export names the graph's inputs after forward's parameters
        def plain_method(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            return tree_map(_plain, body(self, *args, **kwargs))

        cls = type(model)
        wrapper.__class__ = type(cls.__name__, (cls,), {"forward": plain_method, "__module__": cls.__module__,
                                                        "__qualname__": cls.__qualname__})
        return wrapper

    @functools.wraps(forward)
    def plain_forward(*args: Any, **kwargs: Any) -> Any:
        return tree_map(_plain, forward(*args, **kwargs))

    wrapper.forward = plain_forward
    return wrapper


def _plain(value: Any) -> Any:
    if hasattr(value, "self_attention_cache") and hasattr(value, "cross_attention_cache"):  # encoder-decoder
        return (_plain(value.self_attention_cache), _plain(value.cross_attention_cache))
    layers = getattr(value, "layers", None)
    if isinstance(layers, (list, tuple)) and all(hasattr(layer, "keys") and hasattr(layer, "values")
                                                 for layer in layers):
        return tuple((layer.keys, layer.values) for layer in layers)
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dict__"):
        return value
    held = [tuple(v) for v in vars(value).values()
            if isinstance(v, list) and v and all(isinstance(t, torch.Tensor) for t in v)]
    return tuple(held) if held else value
