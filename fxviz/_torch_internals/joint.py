"""torch.export's joint forward+backward program (``_export_forward_backward``, private:
torch has no public way to make one), and the first trace AOT autograd made of it."""
from __future__ import annotations

import threading
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import ExportGraphSignature, InputKind

from fxviz._torch_internals import core_aten_decompositions
from fxviz.errors import TraceError


def export_forward_backward(program: Any, *, joint_loss_index: int) -> tuple[Any, torch.fx.GraphModule]:
    """torch.export's joint forward+backward program of a model whose output
    ``joint_loss_index`` is a loss: ``torch.export.experimental._export_forward_backward``
    (no public equivalent), with :func:`core_aten_decompositions` for its fixed table, each
    tied parameter under one name (:func:`_one_name_per_tensor`); and
    the joint graph as AOT autograd first traced it. torch traces that graph again to flatten
    its inputs and outputs, calling its code rather than its nodes, so the program's ops lose
    what the first trace recorded: each forward op's ``nn_module_stack`` and ``stack_trace``
    (from the exported program's node it came from) and ``seq_nr`` (a backward op: that of
    the forward op it differentiates). The same ops in the same order, so a diff of the two
    op sequences carries them over: no further trace of the model needed. That second trace
    records no module stacks (it has none to record, only ``self``) and so no stack traces:
    each node's was torch's generated code (``<eval_with_key>``), a quarter of the joint's time."""
    from torch._functorch import aot_autograd
    from torch.export import experimental
    from torch.export.exported_program import _decompose_exported_program

    traced: list[torch.fx.GraphModule] = []
    export_function, make_fx, caller = aot_autograd._aot_export_function, aot_autograd.make_fx, threading.get_ident()

    def keep(*args: Any, **kwargs: Any) -> Any:
        result = export_function(*args, **kwargs)
        if threading.get_ident() == caller:
            traced.append(result[0])
        return result

    def flatten(*args: Any, **kwargs: Any) -> Any:  # its only use: the second trace
        if threading.get_ident() == caller:
            kwargs["record_module_stack"] = False
        return make_fx(*args, **kwargs)

    program = _one_name_per_tensor(program)
    with _AOT_EXPORT_KEPT:
        aot_autograd._aot_export_function, aot_autograd.make_fx = keep, flatten
        try:
            program = _decompose_exported_program(program, cia_to_decomp={}, python_decomp_table=core_aten_decompositions(),
                                                  joint_loss_index=joint_loss_index, decompose_custom_triton_ops=False)
        finally:
            aot_autograd._aot_export_function, aot_autograd.make_fx = export_function, make_fx
    if not traced:
        raise TraceError(f"torch {torch.__version__} made the joint graph without AOT autograd's "
                         "_aot_export_function: fxviz/_torch_internals/joint.py needs updating for it.\n"
                         "  What to do: meanwhile open a training step function (the loss, then "
                         "torch.autograd.grad) with tracer='make_fx'.")
    gm, signature = experimental._copy_graph_module_and_signature(program)
    experimental._remove_detach_pass(gm, signature)
    return program._update(gm, signature), traced[-1]  # the outermost: a nested call returns first


#: One joint export at a time keeps the first trace: the hooks are module globals of torch's.
_AOT_EXPORT_KEPT = threading.Lock()


def _one_name_per_tensor(program: Any) -> Any:
    """``program`` with each parameter held under several names (tied weights: an embedding
    and the output projection, PLBart's ``shared`` and its encoder's and decoder's token
    tables) read under the first, as ``named_parameters()`` lists it: torch.export lists
    every name as a parameter of its own and reads the tensor through one, and its joint
    graph refuses the others, which get no gradient. A copy without the others' placeholders
    and specs (their uses read the first), so the gradient is the tensor's whole one, under
    the name eager autograd gives it; ``program`` itself where no tensor has two names."""
    from torch.export import experimental

    first: dict[int, str] = {}
    aliases: dict[str, str] = {}  # placeholder -> the first one of its tensor
    for spec in program.graph_signature.input_specs:
        if spec.kind is InputKind.PARAMETER:
            kept = first.setdefault(id(program.state_dict[spec.target]), spec.arg.name)
            if kept != spec.arg.name:
                aliases[spec.arg.name] = kept
    if not aliases:
        return program
    gm, signature = experimental._copy_graph_module_and_signature(program)
    placeholders = {node.name: node for node in gm.graph.find_nodes(op="placeholder")}
    for alias, kept in aliases.items():
        placeholders[alias].replace_all_uses_with(placeholders[kept])
        gm.graph.erase_node(placeholders[alias])
    gm.recompile()
    specs = [spec for spec in signature.input_specs if spec.arg.name not in aliases]
    dropped = {spec.target for spec in signature.input_specs if spec.arg.name in aliases}
    state = {name: value for name, value in program.state_dict.items() if name not in dropped}
    return program._update(gm, ExportGraphSignature(specs, signature.output_specs), state_dict=state)
