"""Running a GraphModule without leaving a trace on it."""
from __future__ import annotations

import contextlib
import copy
import inspect
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._torch_internals import OpOverload, get_attr, has_values, op_schema, tree_leaves, tree_map_only


def fresh_containers(value: Any) -> Any:
    """A node's argument values with every list and dict made anew, as a GraphModule's code
    passes them: FX's Interpreter passes the node's own immutable_list, the same object on
    every run, and Python code that fills in a list it is given (torchvision's swin3d_t)
    fails on it, or would change it for later runs."""
    if isinstance(value, list):
        return [fresh_containers(v) for v in value]
    if type(value) is tuple:
        return tuple([fresh_containers(v) for v in value])
    if isinstance(value, dict):
        return {k: fresh_containers(v) for k, v in value.items()}
    return value


@contextlib.contextmanager
def preserved_buffers(module: nn.Module) -> Iterator[None]:
    """Restore every buffer afterwards (a training-mode BatchNorm updates its running
    statistics in place, and those buffers may be shared with the user's model), and
    every parameter a GraphModule writes in place (an optimizer step it traced)."""
    with _restored([*module.buffers(), *_written_by(module)]) as restore:
        yield restore


@contextlib.contextmanager
def _restored(tensors: list[torch.Tensor]) -> Iterator[Callable[[], None]]:
    """Yields a function that restores them now: runs one after another share one copy."""
    saved = [(t, t.detach().clone()) for t in {id(t): t for t in tensors}.values() if has_values(t)]

    def restore() -> None:
        with torch.no_grad():
            for tensor, value in saved:
                if not torch.equal(tensor, value):
                    tensor.copy_(value)
    try:
        yield restore
    finally:
        restore()


def inputs_kept(inputs: Any) -> contextlib.AbstractContextManager[Callable[[], None]]:
    """The tensors in ``inputs`` (any nesting) as they were, after runs that may write into
    them (``x.add_(1)``, an in-place ReLU on the input): the user's example is never changed.
    Yields a function that puts them back now; one copy of them is made. A run whose outputs
    are compared takes :func:`fresh_inputs` instead (an output may be the input it wrote)."""
    return _restored([t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)])


def fresh_inputs(inputs: Any) -> Any:
    """``inputs`` with each tensor that holds values copied (a leaf still a leaf, requiring grad
    as it did; one copy per tensor): a run that writes into its inputs leaves them as they
    were, so runs that are compared start alike, and an output that is its input stays as made."""
    copies: dict[int, torch.Tensor] = {}

    def fresh(t: torch.Tensor) -> torch.Tensor:
        if not has_values(t):
            return t
        if id(t) not in copies:
            copy_ = t.detach().clone()
            copies[id(t)] = copy_.requires_grad_(t.requires_grad) if t.is_leaf else copy_
        return copies[id(t)]
    return tree_map_only(torch.Tensor, fresh, inputs)


def _written_by(module: nn.Module) -> list[torch.Tensor]:
    """The attributes of a GraphModule that its ATen ops write in place (``add_``,
    ``_foreach_add_`` on parameters: an optimizer step traced with make_fx)."""
    if not isinstance(module, torch.fx.GraphModule):
        return []
    written = []
    for node in module.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        for argument, value in zip(op_schema(node.target).arguments, node.args):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            for arg in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
                    tensor = get_attr(module, arg.target)
                    if isinstance(tensor, torch.Tensor):
                        written.append(tensor)
    return written




def closed_over_modules(fn: Callable[..., Any]) -> list[nn.Module]:
    """The nn.Modules a plain function reads from its closure or globals (a training
    step's model, its loss module): running the function runs them."""
    return [v for v in _closed_over(fn) if isinstance(v, nn.Module)]


def _closed_over(fn: Callable[..., Any]) -> list[Any]:
    try:
        variables = inspect.getclosurevars(inspect.unwrap(fn))  # through functools.wraps
    except TypeError:  # builtins, functools.partial, callables without code
        return []
    return [*variables.nonlocals.values(), *variables.globals.values()]


@contextlib.contextmanager
def untouched(model: Any) -> Iterator[Callable[[], None]]:
    """Run ``model`` (a module, or a plain function over the modules and optimizers it
    closes over) and leave them as they were: capturing or checking a training step must
    not advance the user's BatchNorm statistics, and an optimizer step in it must not
    change the user's weights or the optimizer's state. Yields a function that puts them
    back now, for runs one after another (a copy of a large model's weights is made once)."""
    if isinstance(model, nn.Module):
        with preserved_buffers(model) as restore:
            yield restore
        return
    modules = closed_over_modules(model)
    optimizers = [o for o in _closed_over(model) if isinstance(o, torch.optim.Optimizer)]
    states = [copy.deepcopy(o.state_dict()) for o in optimizers]

    def reset() -> None:
        for optimizer, state in zip(optimizers, states):
            optimizer.load_state_dict(copy.deepcopy(state))  # it keeps the tensors it is given
    try:
        with _restored([t for m in modules for t in (*m.parameters(), *m.buffers())]) as restore:
            def both() -> None:
                restore()
                reset()
            yield both
    finally:
        reset()


@contextlib.contextmanager
def containers_kept(model: Any) -> Iterator[None]:
    """Leave every plain dict, list and set that the model's modules hold (a module, or
    those a plain function closes over) as it was: a forward that fills in a cache (timm's
    efficientvit ``attention_bias_cache``) keeps torch.export's fake tensors or symbolic
    tracing's proxies in it, and every later eager run computes with them."""
    modules = [model] if isinstance(model, nn.Module) else closed_over_modules(model)
    saved = [(v, copy.copy(v)) for root in modules for m in root.modules() for v in held_containers(m).values()]
    try:
        yield
    finally:
        for container, content in saved:
            container.clear()
            container.extend(content) if isinstance(container, list) else container.update(content)


def held_containers(module: nn.Module) -> dict[str, Any]:
    """The plain dicts, lists and sets a module's own code keeps (a cache its forward fills in),
    by attribute name; not nn.Module's own (parameters, buffers, children, hooks)."""
    attributes = vars(module)
    return {k: attributes[k] for k in attributes.keys() - _MODULE_OWN if type(attributes[k]) in (dict, list, set)}


_MODULE_OWN = frozenset(vars(nn.Module()))


# torch.profiler's kineto writes notes straight to file descriptor 2 at each start and
# stop, and, on a machine with no GPU, an ERROR that it found none: Jupyter shows them
# in the cell, where they read as a failure. So does its first start on a thread other
# than the one that imported torch (a measuring worker): it then skips its client's init,
# which does nothing on CPU or CUDA (MTIA only). Starting it on the kernel's thread instead
# would freeze the kernel for 1.5-2.5 s (the first start's cost).
_KINETO_NOTE = re.compile(r"(USDT|STAGE):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] "
                          r"|ERROR: External init callback must run in same thread as registerClient ")
_NO_GPU = re.compile(r"ERROR:\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ DeviceProperties\.cpp:\d+\] gpuGetDeviceCount failed")


@contextlib.contextmanager
def kineto_notes_dropped() -> Iterator[None]:
    """Keep back what is written to file descriptor 2 meanwhile and pass it on after,
    less kineto's start/stop notes (and its no-GPU error where torch sees no GPU).
    Other threads' writes meanwhile are delayed, not lost."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (a windowless process): nothing to keep out
        yield
        return
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            lines = kept.read().decode(errors="replace").splitlines(keepends=True)
            gpu = torch.cuda.is_available()
            text = "".join(line for line in lines if not _KINETO_NOTE.match(line)
                           and (gpu or not _NO_GPU.match(line)))
            if text:
                os.write(2, text.encode())
