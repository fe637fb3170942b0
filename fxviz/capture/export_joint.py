"""torch.export's joint graph of a model whose output is a loss: its forward and its
backward (``torch.export.experimental._export_forward_backward``, core ATen), as one
runnable graph returning ``(outputs, {parameter name: gradient})``.

The joint program keeps neither ``nn_module_stack`` nor a forward/backward link, but the
graph AOT autograd traced first (and torch then traced again, flat) keeps both: its ops
are the program's, in the same order, so a diff of the op sequences pairs them, and each
forward op takes its module stack and source, each backward op the module of the forward
op with its ``seq_nr``. The model is traced once by export and once by AOT autograd, as
``torch.export`` itself would; a node left unpaired falls back to the reads-what-it-saved
rule of :func:`fxviz.capture.backward.attribute_backward`. Running-statistics updates
(BatchNorm buffers) are outputs of the joint graph; the graph here returns only the
outputs and gradients, so running it changes no buffer.
"""
from __future__ import annotations

import difflib
import operator
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.export.graph_signature import InputKind, OutputKind

from fxviz._runtime import untouched
from fxviz._torch_internals import assign_attr, takes_as_exported
from fxviz._torch_internals.joint import export_forward_backward
from fxviz.capture._common import Capture, finish, first_line, front_end, path_from_stack
from fxviz.capture.places import where
from fxviz.capture.backward import attribute_backward
from fxviz.capture.export import next_to_first_user, without_partial_graph
from fxviz.capture.keywords import keywords_last
from fxviz.checks.check import Gradients
from fxviz.errors import TraceError

_LIFTED = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def capture(model: nn.Module, inputs: tuple, loss_index: int = 0,
            kwargs: dict[str, Any] | None = None) -> torch.fx.GraphModule:
    """Export ``model`` (non-strict) and its backward from output ``loss_index`` (a scalar);
    the graph takes ``kwargs`` positionally, after ``inputs``, as fxviz calls graphs."""

    try:
        with without_partial_graph():
            ep = torch.export.export(model, inputs, kwargs, strict=False)
        joint, traced = export_forward_backward(ep, joint_loss_index=loss_index)
    except TraceError:  # fxviz's own (a torch it does not know): no advice about the model
        raise
    except Exception as exc:
        unused = _unused(model, inputs, kwargs, loss_index) if _NO_GRADIENT in str(exc) else None
        if unused:  # raised in export's generated code: no line of the model to point at
            raise TraceError(f"torch.export's joint graph failed: output {loss_index} (the loss) does not depend on "
                             f"{_some(unused)}, and the joint graph needs a gradient for every parameter\n"
                             f"  What to do: set requires_grad=False on {(them := 'it' if len(unused) == 1 else 'them')} (or "
                             f"make the loss use {them}), or open a training step function (the loss, then "
                             "torch.autograd.grad(..., allow_unused=True)) with tracer='auto'.") from exc
        raise TraceError(f"torch.export's joint graph failed{where(exc)}\n  {first_line(exc)}\n"
                         f"  What to do: {_advice(exc, loss_index, every_gradient=unused == [])}") from exc
    gm = _runnable(joint)
    backward = _backward_nodes(gm.graph.output_node().meta.pop("fxviz_loss"), gm.graph)
    known = _from_first_trace(traced.graph, gm.graph, backward)
    finish(gm, "export (joint)", model)
    for node in gm.graph.find_nodes(op="get_attr"):
        node.meta["module_path"] = str(node.target).rpartition(".")[0]
        node.meta["qualified_name"] = str(node.target)
    attribute_backward(gm, backward=backward, known=known)
    return gm


#: torch's words when a parameter gets no gradient from the loss (Decision Transformer's
#: GPT-2 token table, fed embeddings): raised from generated code, naming none of them.
_NO_GRADIENT = "did not receive a gradient"


def _unused(model: nn.Module, inputs: tuple, kwargs: dict[str, Any] | None, loss_index: int) -> list[str] | None:
    """The parameters with no gradient from output ``loss_index``, by one eager step
    (the model left as it was); None when the step itself fails."""
    try:
        with untouched(model):
            _, grads = reference(model, loss_index)(*inputs, **(kwargs or {}))
    except Exception:  # the generic message stands: torch's own words and the advice
        return None
    return [name for name, p in model.named_parameters() if p.requires_grad and name not in grads]


def _some(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} parameter{'s' * (len(names) > 1)}: " + ", ".join(names[:shown]) + more


def _advice(exc: Exception, loss_index: int, every_gradient: bool = False) -> str:
    """A branch on a tensor's value (in training: wav2vec2's random layer drop) is no
    matter of the loss: make_fx stops at it too, dynamo cuts the step there. Nor is a
    parameter torch's joint gives no gradient where eager (``every_gradient``) gives each one."""
    if "data-dependent" in str(exc):
        return ("the model branches on a tensor's value here (in training, a random layer drop or a sampled "
                "mask), which one joint graph cannot hold: open a training step function (the loss, then "
                "torch.autograd.grad) with tracer='auto', which cuts it into dynamo's graphs at this line; or "
                "write the branch as torch.cond in the model.")
    if every_gradient:  # eager autograd gives every parameter one: torch's joint is at fault
        return ("the loss reaches every parameter in eager autograd, but torch.export's joint graph found one "
                "without a gradient: open a training step function (the loss, then torch.autograd.grad) with "
                "tracer='auto' or 'make_fx', which take it.")
    return (f"make output {loss_index} of the model a scalar loss that every parameter contributes to (export's "
            "joint graph refuses unused parameters), or trace a training step function with tracer='make_fx'.")


def reference(model: nn.Module, loss_index: int = 0) -> Any:
    """The eager step the joint graph reproduces: ``(outputs, {name: gradient})``."""
    params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def step(*args: Any, **kwargs: Any) -> Any:  # closes over `model`: the check restores its buffers after each run
        outputs = model(*args, **kwargs)
        loss = outputs[loss_index] if isinstance(outputs, (tuple, list)) else outputs
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
        return outputs, Gradients({name: g for (name, _), g in zip(params, grads) if g is not None})

    step.__name__ = type(model).__name__
    return step


def _runnable(joint: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """Lifted parameters, buffers and constants as get_attr nodes under their qualified
    names; outputs ``(user outputs, {parameter: gradient})``; inputs as the model takes
    them (a dict of tensors, flattened by the code as ``ep.module()``'s does)."""
    gm = torch.fx.GraphModule(nn.Module(), joint.graph_module.graph, "joint")  # the joint is ours to change
    graph = gm.graph
    sig = joint.graph_signature
    placeholders = {n.name: n for n in graph.find_nodes(op="placeholder")}
    for spec in sig.input_specs:
        if spec.kind not in _LIFTED:
            continue
        value = joint.state_dict.get(spec.target, joint.constants.get(spec.target))
        assign_attr(value, gm, spec.target)
        node = placeholders[spec.arg.name]
        with graph.inserting_before(node):
            attr = graph.get_attr(spec.target)
        attr.meta = dict(node.meta)
        node.replace_all_uses_with(attr)
        graph.erase_node(node)
    output = graph.output_node()
    values = dict(zip([s.arg.name for s in sig.output_specs], output.args[0]))
    user = [values[s.arg.name] for s in sig.output_specs if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
    grads = {s.target: values[s.arg.name] for s in sig.output_specs if s.kind == OutputKind.GRADIENT_TO_PARAMETER}
    loss = next(values[s.arg.name] for s in sig.output_specs if s.kind == OutputKind.LOSS_OUTPUT)
    output.args = ((user[0] if len(user) == 1 else tuple(user), grads),)
    output.meta["fxviz_loss"] = loss
    graph.eliminate_dead_code()
    next_to_first_user(graph)
    takes_as_exported(graph, joint)
    gm.recompile()
    return gm


def _from_first_trace(traced: torch.fx.Graph, joint: torch.fx.Graph,
                      backward: set[torch.fx.Node]) -> dict[torch.fx.Node, str]:
    """``nn_module_stack`` and ``stack_trace`` of AOT autograd's first trace onto the joint's
    forward ops, paired by a diff of the op sequences (the same ops in the same order; the
    program's dead code removed); returns the forward module of each paired backward op
    (:func:`_backward_of`). A forward op with no partner takes the stack of the op before
    it; an item of an op's outputs, its op's."""
    of = _backward_of(traced)
    sources = [n for n in traced.nodes if n.op == "call_function"]
    nodes = [n for n in joint.nodes if n.op == "call_function"]
    matcher = difflib.SequenceMatcher(None, [str(n.target) for n in sources], [str(n.target) for n in nodes],
                                      autojunk=False)
    known: dict[torch.fx.Node, str] = {}
    for block in matcher.get_matching_blocks():
        for source, node in zip(sources[block.a:block.a + block.size], nodes[block.b:block.b + block.size]):
            if node not in backward:
                for key in ("nn_module_stack", "stack_trace"):
                    if key in source.meta:
                        node.meta[key] = source.meta[key]
            elif source in of:
                known[node] = of[source]
    forward = [n for n in nodes if n not in backward]
    for before, node in zip(forward, forward[1:]):
        if not node.meta.get("nn_module_stack") and before.meta.get("nn_module_stack"):
            node.meta["nn_module_stack"] = before.meta["nn_module_stack"]
    for node in joint.find_nodes(op="call_function", target=operator.getitem):
        if node not in backward and node.args[0].meta.get("nn_module_stack"):
            node.meta["nn_module_stack"] = node.args[0].meta["nn_module_stack"]
    return known


def _backward_of(traced: torch.fx.Graph) -> dict[torch.fx.Node, str]:
    """The forward module of each backward op of AOT autograd's trace, by ``seq_nr``: that
    of the first forward op with its number, the op that made the autograd node (ops that make
    none, a getitem, share the number before them). A sum of a tensor's gradients (torch numbers
    it after the loss) is the module whose backward made the gradient it adds last, as the
    autograd engine, running that backward, adds it (a residual block's first conv)."""
    first: dict[int, str] = {}
    of: dict[torch.fx.Node, str] = {}
    for node in traced.nodes:
        if node.op != "call_function" or "seq_nr" not in node.meta:
            continue
        if not node.meta.get("autograd_backward"):
            first.setdefault(node.meta["seq_nr"], path_from_stack(node))
        elif node.meta.get("is_gradient_acc"):
            added = [a for a in node.all_input_nodes if a in of]
            if added:
                of[node] = of[added[-1]]  # inputs in order of the graph: the last made, last
        elif node.meta["seq_nr"] in first:
            of[node] = first[node.meta["seq_nr"]]
    return of


def _backward_nodes(loss: torch.fx.Node, graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The backward: what depends on the loss (its gradient's seed and all after it),
    and what only feeds that (constants, transposed weights, the labels' masks), except
    the other outputs of a forward op (BatchNorm's saved statistics)."""
    before, todo = set(), [loss]
    while todo:
        node = todo.pop()
        if node not in before:
            before.add(node)
            todo.extend(node.all_input_nodes)
    backward: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "call_function" and node is not loss and any(a in backward or a is loss for a in node.all_input_nodes):
            backward.add(node)
    for node in reversed(graph.nodes):
        if (node.op == "call_function" and node not in before and node not in backward and node.users
                and all(u in backward for u in node.users)
                and not (node.target is operator.getitem and node.args[0] in before)):
            backward.add(node)
    return backward


front_end("export (joint)", needs_module=True, about=(
    "torch.export's joint graph: the ATen operators of the forward, the loss's backward and the gradients"))(
    lambda r: Capture([capture(r.model, r.args, kwargs=r.kwargs)], r.method,
                      reference=reference(keywords_last(r.model, r.keywords))))
