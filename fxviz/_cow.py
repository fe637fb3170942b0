"""Copy-on-write module trees: new module objects that share parameter tensors.

A Session keeps one GraphModule per step. Deep-copying a ResNet50 for every step
costs ~100 MiB each; these helpers copy only the module objects (cheap), so a
step owns its module tree while sharing every tensor nobody changed. The rule
for passes that follows: never write into a tensor, build a new one and
``setattr`` it (see :func:`module_copy` and :func:`set_submodule`).
"""
from __future__ import annotations

import copy

import torch
import torch.fx
from torch import nn

from fxviz._torch_internals import TorchDispatchMode, code_made, code_on_first_use, get_attr, op_schema
from fxviz.errors import FxvizError

from fxviz._runtime import has_values, held_containers


def module_copy(module: nn.Module) -> nn.Module:
    """A shallow copy whose ``_parameters``, ``_buffers`` and ``_modules`` dicts are its
    own, so assigning a new Parameter or child to it leaves ``module`` untouched."""
    # Not copy.copy: GraphModule.__copy__ re-resolves every get_attr target on the
    # copy itself and fails on nested graphs whose constants live on the root (torch.export's
    # ``lifted_tensor_0`` in raft_small).
    new = object.__new__(type(module))  # GraphModule.__new__ would make a class without forward
    # Written into __dict__ directly: nn.Module.__setattr__'s checks cost 10x the copy.
    new.__dict__.update(module.__dict__, _parameters=dict(module._parameters), _buffers=dict(module._buffers),
                        _modules=dict(module._modules))
    return new


def skeleton(model: nn.Module, *, clone_buffers: bool = True) -> nn.Module:
    """``model`` rebuilt from :func:`module_copy` all the way down, sharing parameters.

    With ``clone_buffers`` (what Session does for step 0) the buffers are copied too,
    and every plain dict, list and set a module holds: nothing run on the skeleton, not
    even a training-mode forward that updates BatchNorm statistics in place or an
    eval-mode one that fills in a cache (timm's ``attention_bias_cache``, left holding
    torch.export's fake tensors), can reach the user's model.
    """
    return _Rebuilder(clone_buffers)(model)


class _Rebuilder:
    """Rebuilds module trees; a module reachable under two names stays one object."""

    def __init__(self, clone_buffers: bool):
        self.clone_buffers = clone_buffers
        self.copies: dict[int, nn.Module] = {}

    def __call__(self, module: nn.Module) -> nn.Module:
        if id(module) not in self.copies:
            new = self.copies[id(module)] = module_copy(module)
            if self.clone_buffers:
                new.__dict__["_buffers"] = {k: None if b is None else b.clone() for k, b in module._buffers.items()}
                new.__dict__.update({k: copy.copy(v) for k, v in held_containers(module).items()})
            new.__dict__["_modules"] = {k: None if m is None else self(m) for k, m in module._modules.items()}
        return self.copies[id(module)]


def fork(gm: torch.fx.GraphModule, *, code_later: bool = False) -> torch.fx.GraphModule:
    """The starting point of the next step: a new GraphModule over a copy of ``gm``'s
    graph and a skeleton of the modules it calls. Tensors (buffers too) stay shared.
    ``code_later``: its code is made when first used, or by :func:`code_made` (a pass
    edits the copy and recompiles it anyway: seconds saved at 100k nodes)."""
    graph = copy.deepcopy(gm.graph)
    rebuild = _Rebuilder(clone_buffers=False)
    root = {}
    for node in graph.nodes:
        if node.op in ("call_module", "get_attr"):
            obj = get_attr(gm, node.target)
            root[node.target] = rebuild(obj) if isinstance(obj, nn.Module) else obj
    new = code_on_first_use(root, graph, type(gm).__name__)
    new.training = gm.training
    new.meta = copy.copy(gm.meta)
    if not code_later:
        code_made(new)
    return new


def set_submodule(gm: torch.fx.GraphModule, target: str, module: nn.Module) -> None:
    """Put ``module`` at ``target`` (``"layer1.0.conv1"``) in ``gm``. Safe on a fork:
    the parents are the fork's own objects."""
    parent, _, name = target.rpartition(".")
    setattr(gm.get_submodule(parent), name, module)


def tensor_versions(module: nn.Module | object) -> dict[str, int]:
    """The in-place version counter of every parameter and buffer, by name (none for
    a plain function, e.g. one traced with make_fx)."""
    if not isinstance(module, nn.Module):
        return {}
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return {name: t._version for name, t in tensors.items()}


class SharedTensorWrite(FxvizError, RuntimeError):
    """A pass tried to write into a tensor shared with earlier steps and the model."""


class guard_writes(TorchDispatchMode):
    """Refuse, before it happens, any in-place ATen write into the storage of
    ``module``'s parameters and buffers: those are shared with earlier steps and the
    user's model. Storage identity also catches ``.data`` writes and views, which
    version counters miss."""

    def __init__(self, module: nn.Module):
        super().__init__()
        tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
        self.shared = {t.untyped_storage().data_ptr(): name for name, t in tensors.items()
                       if t.numel() and has_values(t)}  # fake tensors have no storage to share

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for index, argument in enumerate(op_schema(func).arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = args[index] if index < len(args) else kwargs.get(argument.name)
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(tensor, torch.Tensor) and has_values(tensor):
                    name = self.shared.get(tensor.untyped_storage().data_ptr())
                    if name is not None:
                        raise SharedTensorWrite(
                            f"{func} would write in place into '{name}', which is shared with earlier "
                            "steps and the model. Build a new tensor or nn.Parameter and assign it to a "
                            "copy of the module (fxviz._cow.module_copy) instead."
                        )
        return func(*args, **kwargs)
