"""What inductor made of a compiled graph, kernel by kernel: the nodes of the ATen graph
it was handed (the one ``Compiled.session(i, "forward")`` opens) that each kernel
computes, their modules, the kernel's code, how often it runs and its measured time.

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
import statistics
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pandas as pd
import torch
import torch.fx

from fxviz.capture.graph_info import graph_info
from fxviz.errors import InputError, MissingDependency

#: what ``kind`` says: Triton or C++ code inductor wrote, a template it filled in
#: (a matmul or convolution it tuned), or a call of a library kernel (ATen, oneDNN, cuBLAS)
KINDS = ("triton", "cpp", "template", "extern")
COLUMNS = ["graph", "part", "kernel", "kind", "nodes", "also", "inferred", "modules", "calls", "time_us", "share",
           "code"]
#: profiled runs per compiled graph (after one unprofiled warm-up run)
RUNS = 10
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


def time_rows(found: list[dict[str, Any]], lowered: Any, inputs: tuple, runs: int = RUNS) -> float:
    """Time each kernel (``time_us``: µs per run of the graph; on the CPU the median of the
    runs, one of which other work may stall) and its ``share`` of the graph's own time,
    which is returned: the median of the profiler's records of the compiled call on the
    CPU; on a GPU, its median time between CUDA events (kernels are timed from the device's
    kernel records, extern calls by the kernels they launched)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad():  # as AOT runs it (no autograd graph of its own)
        lowered.compiled(_fresh(inputs))  # warm-up: the first run's one-time work is no kernel's time
        with profile(activities=activities) as prof:
            for _ in range(runs):
                lowered.compiled(_fresh(inputs))
            if cuda:
                torch.cuda.synchronize()
    events = list(prof.events())
    regions = [e for e in events if e.name.startswith("## Call CompiledFxGraph")]
    per_run = [_credit(region.cpu_children, found, cuda) for region in regions]
    spent = {key: statistics.median([run.get(key, 0.0) for run in per_run] or [0.0])
             for row in found for key in row["keys"]}
    if cuda:  # Triton kernels are launched from Python: their records are the device's own
        by_name = {row["kernel"]: row for row in found if row["kind"] != "extern"}
        for event in events:
            if event.device_type == torch.autograd.DeviceType.CUDA and event.name in by_name:
                spent[by_name[event.name]["keys"][0]] += event.device_time_total / runs
    if cuda:
        total = _event_time(lowered, inputs, runs)
    else:
        total = statistics.median([r.cpu_time_total for r in regions] or [float("nan")])
    for row in found:
        row["time_us"] = sum(spent[key] for key in row["keys"])
        row["share"] = row["time_us"] / total if total else float("nan")
    return total


def _event_time(lowered: Any, inputs: tuple, runs: int) -> float:
    """The compiled call's median time (µs) between two CUDA events: its kernels and the
    gaps between them where the device waits for the host's launches."""
    times = []
    with torch.no_grad():
        for _ in range(runs):
            fresh = _fresh(inputs)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            lowered.compiled(fresh)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def _credit(children: Iterable[Any], found: list[dict[str, Any]], cuda: bool) -> dict[str, float]:
    """The time of each kernel call in one run of the compiled call (``children``: the
    operators it ran): a generated kernel by its name (C++ kernels are recorded as
    ``graph_<id>_<name>``; on a GPU its device records count instead), an extern call by
    its operator, in order."""
    generated = {row["kernel"]: row["keys"][0] for row in found if row["kind"] != "extern"}
    pending = sorted((key for row in found if row["kind"] == "extern" for key in row["keys"]),
                     key=lambda key: int(key.rpartition(":")[2]))
    spent: dict[str, float] = {}
    for event in children:
        name = re.sub(r"^graph_\d+_", "", event.name)
        if name in generated:
            if not cuda:
                spent[generated[name]] = spent.get(generated[name], 0.0) + event.cpu_time_total
            continue
        op = event.name.rpartition("::")[2]
        key = next((k for k in pending if op in k.rpartition(":")[0].split(".")), None)
        if key is not None:
            pending.remove(key)
            spent[key] = event.device_time_total if cuda else event.cpu_time_total
    return spent


def by_module(kernels: pd.DataFrame, eager: pd.DataFrame, eager_graph: Any, gm: torch.fx.GraphModule) -> pd.DataFrame:
    """``module, eager_us, compiled_us, ratio`` (compiled over eager): eager from ``eager``
    (a profile of ``eager_graph``'s nodes: ``node, median_us``), compiled from ``kernels``
    (rows of ``gm``'s), each kernel's time shared among the modules of the nodes it
    computes by their count (a fused kernel spans modules: its split is an estimate).
    The model's own code outside any submodule is "(model)"."""
    def named(path: Any) -> str:
        return path or "(model)"

    eager_us: dict[str, float] = {}
    for node, us in zip(eager["node"], eager["median_us"]):
        if node in eager_graph and eager_graph.nodes[node]["op"] == "call_function":
            key = named(eager_graph.nodes[node].get("module_path"))
            eager_us[key] = eager_us.get(key, 0.0) + float(us)
    modules = {n.name: named(n.meta.get("module_path")) for n in gm.graph.nodes}
    compiled_us: dict[str, float] = {}
    for row in kernels.itertuples():
        for node in row.nodes:
            compiled_us[modules[node]] = compiled_us.get(modules[node], 0.0) + row.time_us / len(row.nodes)
    names = sorted(set(eager_us) | set(compiled_us), key=lambda m: -compiled_us.get(m, 0.0))
    table = pd.DataFrame({"module": names, "eager_us": [eager_us.get(m, 0.0) for m in names],
                          "compiled_us": [compiled_us.get(m, 0.0) for m in names]})
    table["ratio"] = table["compiled_us"] / table["eager_us"].where(table["eager_us"] > 0)
    return table


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


def timed(gm: torch.fx.GraphModule) -> tuple[list[dict[str, Any]], float] | None:
    """The kernels of ``gm`` (an AOT graph inductor compiled, or a Session's step of it)
    timed, with the graph's own time (µs per run); measured once, then kept with what
    inductor made of it. None for a graph inductor did not compile."""
    from fxviz._torch_internals.inductor import KEY

    lowered = gm.meta.get(KEY)
    if lowered is None:
        return None
    if lowered.timed is None:
        made = rows(graph_info(gm).graph_index, lowered.part, gm, lowered)
        lowered.timed = (made, time_rows(made, lowered, gm.meta["fxviz_inputs"]))
    return lowered.timed


def table(graphs: Iterable[Any]) -> tuple[pd.DataFrame, dict[tuple[int, str], float]]:
    """The kernels of every AOT graph inductor compiled among ``graphs`` (CompiledGraph),
    timed, and each graph's own time (µs per run) by ``(index, part)``."""
    found, totals = [], {}
    for graph in graphs:
        for part in ("forward", "backward"):
            gm = graph.part(part)
            made = timed(gm) if gm is not None else None
            if made is not None:
                found += made[0]
                totals[(graph.index, part)] = made[1]
    return pd.DataFrame([{c: row[c] for c in COLUMNS} for row in found], columns=COLUMNS), totals


def _fresh(inputs: tuple) -> list:
    """The inputs for one run: a compiled graph may write into its buffers (a BatchNorm's
    running statistics), never into the ones the capture recorded."""
    return [t if isinstance(t, torch.nn.Parameter) or not isinstance(t, torch.Tensor) else t.clone() for t in inputs]


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

