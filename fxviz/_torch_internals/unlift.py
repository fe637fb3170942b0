"""An ExportedProgram's graph with its weights as attributes, as ``ep.module()`` makes it,
minus what costs the first view seconds: ``ep.module()`` deep-copies the graph and
generates and compiles its code four times (1.3 s on a 24-layer Qwen2 of 1,900 nodes);
this copies the graph once and makes the code when the module is first called.
torch has no public way to unlift a program but ``ep.module()``."""
from __future__ import annotations

import torch
import torch.fx
from torch.fx.node import map_arg
from torch.export.graph_signature import InputKind, OutputKind

from torch.fx._lazy_graph_module import _LazyGraphModule

from fxviz._torch_internals import code_on_first_use

_WEIGHTS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def unlifted(ep: torch.export.ExportedProgram) -> torch.fx.GraphModule | None:
    """``ep.module()``'s graph (its weights read by ``get_attr`` nodes named as torch names
    them, each keeping its placeholder's meta) over a module holding the program's weights,
    without the input guards; code made on first call. None where the program has more
    than inputs, weights and outputs (effect tokens, custom objects, mutated buffers or
    inputs: ``ep.module()`` writes those back, which this does not; nested graphs of
    ``torch.cond`` and the like, whose constants ``ep.module()`` moves into them)."""
    from torch.export._unlift import _get_codegen  # imports dynamo: not before a program

    signature = ep.graph_signature
    if any(spec.kind not in (InputKind.USER_INPUT, *_WEIGHTS) for spec in signature.input_specs) or \
            any(spec.kind != OutputKind.USER_OUTPUT for spec in signature.output_specs) or \
            next(iter(ep.graph.find_nodes(op="get_attr")), None) is not None:
        return None
    graph = _copied(ep.graph)
    for node, spec in zip(graph.find_nodes(op="placeholder"), signature.input_specs):
        if spec.kind in _WEIGHTS:
            _read_as_attribute(graph, node, spec.target)
    call = ep.module_call_graph[0].signature
    graph._codegen = _get_codegen(ep.call_spec.in_spec, ep.call_spec.out_spec,
                                  call.forward_arg_names if call else None)
    gm = code_on_first_use(torch.nn.Module(), torch.fx.Graph(), "GraphModule")
    _add_weights(gm, ep)  # on the module itself: GraphModule(root, graph) would copy each from root
    gm.graph = graph
    gm.meta.update(ep.graph_module.meta)
    return gm


def _copied(source: torch.fx.Graph) -> torch.fx.Graph:
    """``source``'s nodes in a new graph, as ``Graph.graph_copy`` copies them (names, types,
    a shallow copy of each meta), in 40 % of the time (8 against 19-20 ms of CPU at 1,900
    nodes): ``create_node`` walks every call's arguments looking for raw SymInts to warn of,
    which torch did when it made ``source``; ``node.args = ...`` and ``node.meta = ...``
    re-key the graph's lookup table (``Node.__setattr__``), whose keys (op, target) neither
    is part of. Each node is made as ``create_node`` makes it, with its arguments at once."""
    graph = torch.fx.Graph()
    names, table, set_meta = graph._graph_namespace, graph._find_nodes_lookup_table, object.__setattr__
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in source.nodes:
        name = names.create_name(node.name, None)
        new = torch.fx.Node(graph, name, node.op, node.target, map_arg(node.args, copies.__getitem__),
                            map_arg(node.kwargs, copies.__getitem__), node.type)
        names.associate_name_with_obj(name, new)
        graph._insert(new)
        table.insert(new)
        set_meta(new, "meta", node.meta.copy())
        copies[node] = new
    graph._len = len(copies)
    return graph


def _read_as_attribute(graph: torch.fx.Graph, node: torch.fx.Node, target: str) -> None:
    """Placeholder ``node`` made ``graph.get_attr(target)``, users and meta kept, named as
    ``get_attr`` names it: what inserting a get_attr after it, moving its uses there and
    erasing it make (the users of every node in the same order too), without making a node."""
    table = graph._find_nodes_lookup_table
    table.remove(node)  # keyed by op: re-added as a get_attr
    name = graph._graph_namespace.create_name(graph._target_to_str(target), None)
    for attribute, value in (("op", "get_attr"), ("target", target), ("name", name), ("type", None)):
        object.__setattr__(node, attribute, value)
    graph._graph_namespace._rename_object(node, name)
    table.insert(node)
    for user in list(node.users):  # as moving a use does: each user becomes the last user of its other inputs
        user._update_args_kwargs(user.args, user.kwargs)


def _add_weights(root: torch.nn.Module, ep: torch.export.ExportedProgram) -> None:
    """The program's weights added to ``root`` (a module without them) under their qualified
    names, as ``ep.module()`` adds them (torch's ``_register_attrs_to_new_gm``), in time
    linear in their number: torch's looks for call-name variants (``layers@1``) of each
    weight's modules among all their siblings (0.7 of the 1.6 s to unlift a 192-layer
    Qwen2), which a program's own weight names never have; any name that might is left to torch."""
    from torch.export._unlift import _register_attrs_to_new_gm

    signature = ep.graph_signature
    constants = [*signature.lifted_custom_objs, *signature.lifted_tensor_constants]
    if any("@" in name for name in (*signature.buffers, *signature.parameters, *constants)):
        _register_attrs_to_new_gm(root, signature, ep.state_dict, ep.constants)
        return
    modules = {"": root}

    def owner(name: str) -> tuple[torch.nn.Module, str]:
        path, _, field = name.rpartition(".")
        if path not in modules:
            parent, item = owner(path)
            if not hasattr(parent, item):
                setattr(parent, item, torch.nn.Module())
            modules[path] = getattr(parent, item)
        return modules[path], field

    non_persistent = set(signature.non_persistent_buffers)
    for name in signature.buffers:
        module, field = owner(name)
        value = ep.constants[name] if name in non_persistent else ep.state_dict[name]
        module.register_buffer(field, value, persistent=name not in non_persistent)
    for name in signature.parameters:
        module, field = owner(name)
        module.register_parameter(field, ep.state_dict[name])
    for name in constants:
        module, field = owner(name)
        setattr(module, field, ep.constants[name])


def code_text(gm: torch.fx.GraphModule) -> str:
    """``gm.code`` without compiling it where it is not made yet (a module unlifted here or
    forked to be edited, whose code is made on first call): a page that shows the code
    needs its text, and compiling it was half of it (0.2 of 0.35 s at 3.7k nodes)."""
    if isinstance(gm, _LazyGraphModule) and gm._needs_recompile():
        return gm.graph.python_code(root_module="self").src
    return gm.code
