"""torch.export's joint graph of a model whose output is a loss: its forward and its
backward (``torch.export.experimental._export_forward_backward``, core ATen), as one
runnable graph returning ``(outputs, {parameter name: gradient})``.

The joint graph keeps neither ``nn_module_stack`` nor a forward/backward link, so: the
forward part is aligned op by op (difflib) with the forward program decomposed by the
same table, which does keep them; the backward part (what depends on the loss) likewise
with the same step traced by make_fx, whose backward ops carry autograd's sequence
numbers; a node left unpaired falls back to the reads-what-it-saved rule of
:func:`fxviz.capture.backward.attribute_backward`. Running-statistics updates (BatchNorm
buffers) are outputs of the joint graph; the graph here returns only the outputs and
gradients, so running it changes no buffer.
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
from fxviz._torch_internals import assign_attr, core_aten_decompositions, export_forward_backward
from fxviz.capture._common import Capture, finish, first_line, front_end
from fxviz.capture.places import where
from fxviz.capture.backward import attribute_backward
from fxviz.capture.export import next_to_first_user, without_partial_graph
from fxviz.capture.keywords import keywords_last
from fxviz.checks.check import Gradients
from fxviz.errors import TraceError

_LIFTED = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def capture(model: nn.Module, inputs: tuple, loss_index: int = 0) -> torch.fx.GraphModule:
    """Export ``model`` (non-strict) and its backward from output ``loss_index`` (a scalar)."""

    try:
        with without_partial_graph():
            ep = torch.export.export(model, inputs, strict=False)
        joint = export_forward_backward(ep, joint_loss_index=loss_index)
        forward = ep.run_decompositions(core_aten_decompositions())  # the joint's table, with module stacks
    except Exception as exc:
        unused = _unused(model, inputs, loss_index) if _NO_GRADIENT in str(exc) else []
        if unused:  # raised in export's generated code: no line of the model to point at
            raise TraceError(f"torch.export's joint graph failed: output {loss_index} (the loss) does not depend on "
                             f"{_some(unused)}, and the joint graph needs a gradient for every parameter\n"
                             f"  What to do: set requires_grad=False on {(them := 'it' if len(unused) == 1 else 'them')} (or "
                             f"make the loss use {them}), or open a training step function (the loss, then "
                             "torch.autograd.grad(..., allow_unused=True)) with tracer='auto'.") from exc
        raise TraceError(f"torch.export's joint graph failed{where(exc)}\n  {first_line(exc)}\n"
                         f"  What to do: {_advice(exc, loss_index)}") from exc
    gm = _runnable(joint)
    backward = _backward_nodes(gm.graph.output_node().meta.pop("fxviz_loss"), gm.graph)
    _align_modules(forward.graph, gm.graph, backward)
    finish(gm, "export (joint)", model)
    for node in gm.graph.find_nodes(op="get_attr"):
        node.meta["module_path"] = str(node.target).rpartition(".")[0]
        node.meta["qualified_name"] = str(node.target)
    attribute_backward(gm, backward=backward, known=_backward_modules(model, inputs, gm, backward))
    return gm


#: torch's words when a parameter gets no gradient from the loss (Decision Transformer's
#: GPT-2 token table, fed embeddings): raised from generated code, naming none of them.
_NO_GRADIENT = "did not receive a gradient"


def _unused(model: nn.Module, inputs: tuple, loss_index: int) -> list[str]:
    """The parameters with no gradient from output ``loss_index``, by one eager step
    (the model left as it was); empty when the step itself fails."""
    try:
        with untouched(model):
            _, grads = reference(model, loss_index)(*inputs)
    except Exception:  # the generic message stands: torch's own words and the advice
        return []
    return [name for name, p in model.named_parameters() if p.requires_grad and name not in grads]


def _some(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} parameter{'s' * (len(names) > 1)}: " + ", ".join(names[:shown]) + more


def _advice(exc: Exception, loss_index: int) -> str:
    """A branch on a tensor's value (in training: wav2vec2's random layer drop) is no
    matter of the loss: make_fx stops at it too, dynamo cuts the step there."""
    if "data-dependent" in str(exc):
        return ("the model branches on a tensor's value here (in training, a random layer drop or a sampled "
                "mask), which one joint graph cannot hold: open a training step function (the loss, then "
                "torch.autograd.grad) with tracer='auto', which cuts it into dynamo's graphs at this line; or "
                "write the branch as torch.cond in the model.")
    return (f"make output {loss_index} of the model a scalar loss that every parameter contributes to (export's "
            "joint graph refuses unused parameters), or trace a training step function with tracer='make_fx'.")


def _backward_modules(model: nn.Module, inputs: tuple, gm: torch.fx.GraphModule,
                      backward: set[torch.fx.Node]) -> dict[torch.fx.Node, str]:
    """The forward module of each backward node, from the same step traced with make_fx
    (whose backward ops carry autograd's sequence numbers) under the joint's decomposition
    table: both run autograd's backward in the same order, so a diff of their op
    sequences pairs them. Empty when make_fx cannot trace the step."""

    from fxviz.capture import make_fx

    try:
        traced = make_fx.capture(reference(model), inputs, model, core_aten_decompositions())
    except TraceError:
        return {}
    source = [n for n in traced.graph.nodes if n.op == "call_function" and "backward_of" in n.meta]
    nodes = [n for n in gm.graph.nodes if n in backward]
    matcher = difflib.SequenceMatcher(None, [str(n.target) for n in source], [str(n.target) for n in nodes],
                                      autojunk=False)
    return {nodes[block.b + k]: source[block.a + k].meta["backward_of"]
            for block in matcher.get_matching_blocks() for k in range(block.size)}


def reference(model: nn.Module, loss_index: int = 0) -> Any:
    """The eager step the joint graph reproduces: ``(outputs, {name: gradient})``."""
    params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def step(*args: Any) -> Any:  # closes over `model`: the check restores its buffers after each run
        outputs = model(*args)
        loss = outputs[loss_index] if isinstance(outputs, (tuple, list)) else outputs
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
        return outputs, Gradients({name: g for (name, _), g in zip(params, grads) if g is not None})

    step.__name__ = type(model).__name__
    return step


def _runnable(joint: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """Lifted parameters, buffers and constants as get_attr nodes under their qualified
    names; outputs ``(user outputs, {parameter: gradient})``."""
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
    gm.recompile()
    return gm


def _align_modules(forward: torch.fx.Graph, joint: torch.fx.Graph, backward: set[torch.fx.Node]) -> None:
    """``nn_module_stack`` from the decomposed forward onto the joint's forward ops: the
    same ops in the same order, so a diff of the op sequences pairs them; an op with no
    partner takes the stack of the op before it. The items of an op's outputs are left out
    of the diff and take their op's: the joint keeps more of them (a layer norm's statistics,
    saved for the backward), which shifted the pairs of repeated blocks by one block."""
    def ops(graph: torch.fx.Graph) -> list[torch.fx.Node]:
        return [n for n in graph.nodes if n.op == "call_function" and n not in backward
                and n.target is not operator.getitem]

    sources, nodes = ops(forward), ops(joint)
    matcher = difflib.SequenceMatcher(None, [str(n.target) for n in sources], [str(n.target) for n in nodes],
                                      autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            source, node = sources[block.a + k], nodes[block.b + k]
            for key in ("nn_module_stack", "stack_trace"):
                if key in source.meta:
                    node.meta[key] = source.meta[key]
    for before, node in zip(nodes, nodes[1:]):
        if "nn_module_stack" not in node.meta and "nn_module_stack" in before.meta:
            node.meta["nn_module_stack"] = before.meta["nn_module_stack"]
    for node in joint.find_nodes(op="call_function", target=operator.getitem):
        if node not in backward and "nn_module_stack" in node.args[0].meta:
            node.meta["nn_module_stack"] = node.args[0].meta["nn_module_stack"]


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
    lambda r: _joint(keywords_last(r.model, r.keywords), r))


def _joint(model: nn.Module, r: Any) -> Capture:
    return Capture([capture(model, r.inputs)], r.method, reference=reference(model))
