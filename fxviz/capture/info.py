"""What a capture knows of each graph it made: a typed record on ``gm.meta``, so it follows
the graph wherever torch copies its meta (``copy.deepcopy``, a Session's fork, a pass's output).

Front-ends write it (:func:`set_graph_info`); everything else reads it with
:func:`graph_info`, which gives the defaults for a graph no front-end made.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx

from fxviz.errors import UsageError

_KEY = "fxviz"


@dataclass
class GraphInfo:
    """One captured graph's record. The defaults are those of a graph made whole by one
    method on the model's own inputs (a user's own GraphModule)."""

    #: The method's name ("export", "make_fx", ...), or the torch.fx Tracer class's.
    tracer: str = ""
    #: Class name per module path.
    module_types: dict[str, str] = field(default_factory=dict)
    #: Module paths that symbolic tracing's fallback made leaves.
    leaves_added: list[str] = field(default_factory=list)
    #: How make_fx traced it when not on the real inputs (a sentence; "").
    how: str = ""
    #: ``tracer="auto"``'s ``(method, reason)`` pairs, as on the Capture.
    attempts: list[tuple[str, str]] = field(default_factory=list)
    #: Where it stands among dynamo's graphs cut at graph breaks.
    graph_index: int = 0
    graph_count: int = 1
    #: Every break of the capture (``{reason, detail, user_line}``) and the one that ended it.
    graph_breaks: list[dict[str, Any]] = field(default_factory=list)
    graph_break: dict[str, Any] | None = None
    #: The inputs it ran on when not the model's (one graph of several): it is checked on them.
    graph_inputs: tuple | None = None
    guards: tuple[str, ...] = ()
    guard_tree: str = ""
    #: AOT's graphs of a dynamo graph, or why AOT could not trace it.
    aot_forward: torch.fx.GraphModule | None = None
    aot_backward: torch.fx.GraphModule | None = None
    aot_error: str | None = None
    #: A training graph's: how backward nodes got their modules ("seq_nr", "seq_nr (aligned)",
    #: "heuristic"), and the index paths of the outputs that are gradients.
    backward_attribution: str = ""
    gradient_outputs: list[tuple[int, ...]] = field(default_factory=list)
    #: Whether it runs on real tensors (None: not known yet; a Session finds out).
    real_tensors: bool | None = None


def graph_info(gm: torch.fx.GraphModule) -> GraphInfo:
    """``gm``'s record, or the defaults (not stored: a user's graph is not written to)."""
    found = gm.meta.get(_KEY) if isinstance(gm, torch.fx.GraphModule) else None
    return found if isinstance(found, GraphInfo) else GraphInfo()


def set_graph_info(gm: torch.fx.GraphModule, info: GraphInfo) -> GraphInfo:
    """Store ``info`` as ``gm``'s record (a front-end's graph, a fork given its own) and return it."""
    gm.meta[_KEY] = info
    return info


def own_graph_info(gm: torch.fx.GraphModule) -> GraphInfo:
    """``gm``'s stored record, stored first if absent: for fxviz's own graphs, to write to."""
    found = gm.meta.get(_KEY)
    return found if isinstance(found, GraphInfo) else set_graph_info(gm, GraphInfo())


def require_graph_module(gm: Any, what: str = "Profiling") -> None:
    """A UsageError, saying what to do, for anything but a GraphModule where ``what`` reads one."""
    if not isinstance(gm, torch.fx.GraphModule):
        raise UsageError(f"{what} needs a torch.fx.GraphModule, got {type(gm).__name__}. "
                         "Trace the model first: gm = fxviz.trace(model).")
