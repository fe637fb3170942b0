"""What inductor made of a compiled graph, kernel by kernel: the nodes of the ATen graph
it was handed (the one ``Compiled.session(i, "forward")`` opens) that each kernel
computes, their modules, the kernel's code and how often it runs (its time: fxviz.compiler.kernel_times).

Every node is computed by one kernel: a node that several kernels touch (a convolution
whose inputs one kernel converts to channels-last before the extern call computes it)
belongs to the extern call, else to the last kernel that touches it; the others list it
under ``also``. Nodes in no kernel are views inductor makes by reinterpreting a buffer.
A node whose provenance a pattern rewrite dropped (online softmax's) is given the kernel of
its users and listed under ``inferred`` as well.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.fx

from fxviz.errors import InputError, MissingDependency

#: what ``kind`` says: Triton or C++ code inductor wrote, a template it filled in
#: (a matmul or convolution it tuned), or a call of a library kernel (ATen, oneDNN, cuBLAS)
KINDS = ("triton", "cpp", "template", "extern")
COLUMNS = ["graph", "part", "kernel", "kind", "nodes", "also", "inferred", "modules", "calls", "time_us", "share",
           "code"]
#: code an ATen operator turns into, to mark the lines of a fused kernel that compute a node
#: (inductor writes no node names into kernels: matched by operator, so approximate)
OP_CODE = {
    "add": r" \+ |\+=", "sub": r" - ", "mul": r" \* ", "div": r" / ", "neg": r"-tmp|neg",
    "relu": r"clamp_min|maximum|max\(", "rsqrt": r"rsqrt|1 / std::sqrt", "sqrt": r"sqrt", "exp": r"exp",
    "tanh": r"tanh", "sigmoid": r"sigmoid|1 / \(1 \+", "gelu": r"erf|tanh", "erf": r"erf", "pow": r"pow|\*",
    "amax": r"max", "maximum": r"max", "minimum": r"min", "sum": r"sum|reduction|acc", "mean": r"sum|acc|/",
    "var_mean": r"welford|sum|acc", "where": r"where|\?", "clone": r"store|load", "copy": r"store|load",
    "log": r"log", "abs": r"abs", "clamp": r"clamp",
}


@contextlib.contextmanager
def inductor_compile(backend: str | None, inputs: tuple) -> Iterator[Callable[..., Any] | None]:
    """For ``backend="inductor"``: inductor's settings while dynamo runs (restored after) and
    the compiler to hand AOT's graphs to; None, changing nothing, for no backend."""
    if backend is None:
        yield None
        return
    if backend != "inductor":
        raise InputError(f"backend={backend!r}: fxviz.compiled knows backend=\"inductor\", or none "
                         "(AOT autograd's graphs alone).")
    from fxviz._torch_internals import inductor

    on_gpu = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    why = None if on_gpu else inductor.missing_compiler()
    if why:
        raise MissingDependency(f"inductor writes CPU kernels in C++ and found no C++ compiler ({why}). "
                                "Install one (apt install g++) or name yours in torch._inductor.config.cpp.cxx.")
    with inductor.settings():
        yield inductor.backend


def inductor_failure(error: BaseException) -> str | None:
    """What inductor said when it could not compile a graph, with the user's line whose
    operator it failed on (when it names one); None when ``error`` is not inductor's."""
    from fxviz._torch_internals.inductor import InductorFailed

    while error is not None and not isinstance(error, InductorFailed):
        error = error.__cause__ or error.__context__
    if error is None:
        return None
    places = re.findall(r'File "(.+?)", line (\d+), in \S+\n\s*(.*)', error.stack)
    if not places:
        return str(error)
    from fxviz.capture.places import package_relative

    file, line, code = places[-1]
    return f"{error}\n  at {package_relative(file)}:{line}: {code.strip()}"


def rows(index: int, part: str, gm: torch.fx.GraphModule, lowered: Any) -> list[dict[str, Any]]:
    """The kernels of graph ``index``'s ``part`` (``gm``: the graph fxviz shows, ``lowered``:
    what inductor made of it), in the order they run, untimed."""
    nodes = {n.name: n for n in gm.graph.nodes}
    order = sorted(lowered.calls, key=lambda key: int(key.rpartition(":")[2]))
    made = {key: _generated(key.rpartition(":")[0], lowered.source) for key in order}
    shown = {key: [n for n in _shown(lowered.calls[key], lowered.origins) if n in nodes] for key in order}
    owner: dict[str, str] = {}
    for key in order:  # the last kernel that touches a node computes it, unless an extern call does
        for name in shown[key]:
            if owner.get(name) is None or made[owner[name]] is not None:
                owner[name] = key
    inferred = _by_users(gm, owner)
    position = {name: i for i, name in enumerate(nodes)}
    found: dict[str, dict[str, Any]] = {}
    label_of: dict[str, str] = {}
    for key in order:
        name = key.rpartition(":")[0]
        code = made[key]
        label = label_of[key] = name if code is not None else f"{name} [{(shown[key] or ['?'])[0]}]"
        row = found.setdefault(label, {"graph": index, "part": part, "kernel": label, "kind": _kind(name, code),
                                       "nodes": [], "also": [], "inferred": [], "calls": 0, "time_us": float("nan"),
                                       "share": float("nan"), "code": code or _call_line(key, lowered.source),
                                       "keys": []})
        row["calls"] += 1
        row["keys"].append(key)
        for node in shown[key]:
            bucket = row["nodes"] if owner[node] == key else row["also"]
            if node not in bucket:
                bucket.append(node)
    for node in inferred:
        found[label_of[owner[node]]]["nodes"].append(node)
        found[label_of[owner[node]]]["inferred"].append(node)
    for row in found.values():
        row["nodes"] = sorted(row["nodes"], key=position.__getitem__)
        row["also"] = [n for n in sorted(row["also"], key=position.__getitem__) if n not in row["nodes"]]
        row["modules"] = sorted({nodes[n].meta.get("module_path") or "" for n in row["nodes"]} - {""})
    return list(found.values())


def mark(graphs: Iterable[Any]) -> None:
    """Name on each node of the AOT graphs inductor compiled (``meta["kernel"]``) the
    kernel that computes it: what the "kernel" colour mode reads."""
    from fxviz._torch_internals.inductor import KEY

    for graph in graphs:
        for gm in (graph.forward, graph.backward):
            if gm is not None and KEY in gm.meta:
                nodes = {n.name: n for n in gm.graph.nodes}
                for row in rows(graph.index, "", gm, gm.meta[KEY]):
                    for name in row["nodes"]:
                        nodes[name].meta["kernel"] = row["kernel"]


#: a line of a generated kernel that computes a temporary (C++ ``auto tmp3 = ...``, Triton ``tmp3 = ...``): its right side
_TMP = re.compile(r"\s*(?:auto\s+)?tmp\d+\s*=(.*)")


def code_lines(code: str, target: Any) -> list[int]:
    """The lines (1-based) of a generated kernel's ``code`` that compute a temporary the way
    ATen operator ``target`` would (see :data:`OP_CODE`); [] when the operator has no pattern."""
    op = getattr(target, "__name__", str(target)).split(".")[0].lstrip("_")
    pattern = OP_CODE.get(op)
    if pattern is None:
        return []
    found = re.compile(pattern)
    computed = (_TMP.match(line) for line in code.splitlines())
    return [i for i, match in enumerate(computed, 1) if match and found.search(match[1])]


def _generated(name: str, source: str) -> str | None:
    """The source of kernel ``name`` as inductor's wrapper module defines it, or None
    when it defines none (an extern call)."""
    found = re.search(rf"^{re.escape(name)} = async_compile\.\w+\(.*?'''\n?(.*?)'''", source, re.M | re.S)
    return found[1] if found else None


def _call_line(key: str, source: str) -> str:
    """The wrapper's line calling extern kernel ``key`` (after its provenance comment)."""
    found = re.search(rf"# \[Provenance debug handles\] {re.escape(key)}\n(.*)", source)
    return found[1].strip() if found else ""


def _kind(name: str, code: str | None) -> str:
    """A template: a Triton template (``triton_tem_``), or a C++ kernel around inductor's micro GEMM."""
    if code is None:
        return "extern"
    if "_tem_" in name or "CppMicroGemm" in code:
        return "template"
    return "triton" if name.startswith("triton") else "cpp"


def _by_users(gm: torch.fx.GraphModule, owner: dict[str, str]) -> list[str]:
    """Give each computing node no kernel names (a pattern rewrite, such as online softmax's,
    drops the provenance of the nodes it replaces) the kernel of its first user that has
    one, users first; returns those nodes. Views stay in no kernel."""
    from fxviz._torch_internals import OpOverload, op_schema

    taken = []
    for node in reversed(gm.graph.nodes):
        if node.name in owner or node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        returns = op_schema(node.target).returns
        if returns and returns[0].alias_info is not None:
            continue
        user = next((u for u in node.users if u.name in owner), None)
        if user is not None:
            owner[node.name] = owner[user.name]
            taken.append(node.name)
    return taken


def _shown(post: list[str], origins: dict[str, list[str]]) -> list[str]:
    """The shown graph's nodes a kernel computes, from the post-grad nodes it was made of."""
    names: list[str] = []
    for name in post:
        for origin in origins.get(name, ()):
            if origin not in names:
                names.append(origin)
    return names

