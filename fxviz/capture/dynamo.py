"""The graphs torch.compile's dynamo hands a backend: the last resort for models with
data-dependent Python, which open as several graphs split at their graph breaks."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from fxviz._torch_internals import dynamo_optimize
from fxviz.capture._common import Capture, finish, first_line, where
from fxviz.errors import TraceError


def capture(fn: Callable[..., Any], inputs: tuple) -> Capture:
    """Run ``fn(*inputs)`` under ``torch.compile`` with a recording backend: every graph
    (with the inputs it was first called with), its guards, and each graph break's reason
    and user line."""
    graphs: list[torch.fx.GraphModule] = []
    guards: list[str] = []

    def record(gm: torch.fx.GraphModule, _example_inputs: list) -> Callable[..., Any]:
        reason = getattr(gm, "compile_subgraph_reason", None)
        graphs.append(gm)
        gm.meta["fxviz_break"] = None if reason is None or not reason.graph_break else {
            "reason": str(reason.reason).strip().splitlines()[0],
            "user_line": _user_line(reason.user_stack),
        }

        def run(*args: Any) -> Any:
            gm.meta.setdefault("fxviz_inputs", args)
            return gm.forward(*args)

        return run

    torch.compiler.reset()
    try:
        compiled = dynamo_optimize(record, guard_export_fn=lambda gs: guards.extend(str(g) for g in gs))(fn)
        with torch.no_grad():
            compiled(*inputs)
    except Exception as exc:
        raise TraceError(f"dynamo could not capture the model{where(exc)}\n  {first_line(exc)}") from exc
    finally:
        torch.compiler.reset()
    graphs = [g for g in graphs if "fxviz_inputs" in g.meta]
    if not graphs:
        raise TraceError("dynamo captured no graph: the model runs no tensor operations dynamo can record.")
    breaks = [g.meta["fxviz_break"] for g in graphs if g.meta.get("fxviz_break")]
    root = fn if isinstance(fn, torch.nn.Module) else None
    for index, gm in enumerate(graphs):
        for node, value in zip(gm.graph.find_nodes(op="placeholder"), gm.meta["fxviz_inputs"]):
            if not isinstance(value, torch.nn.Parameter):  # an input, not a lifted parameter
                node.meta["module_path"] = ""
        finish(gm, "dynamo", root, graph_index=index, graph_count=len(graphs), graph_breaks=breaks,
               graph_inputs=tuple(gm.meta["fxviz_inputs"]), guards=guards)
    return Capture(graphs, "dynamo", graph_breaks=breaks)


def _user_line(stack: Any) -> str | None:
    frames = list(stack or ())
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
