"""The Jupyter layer of fxviz: the Explorer workbench and its graph view.

Imported only on demand (``fxviz.explore``, defined here), so ``import fxviz`` needs no ipywidgets.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fxviz.errors import UsageError
from fxviz.session import Session, split_options

from .explorer import Explorer
from .graph_view import GraphView
from .table_view import TableView

__all__ = ["Explorer", "GraphView", "TableView", "explore"]


def explore(model_or_session: Any, *example_inputs: Any, profile: str = "background",
            profile_kwargs: Mapping[str, Any] | None = None, **session_kwargs: Any) -> Explorer:
    """The Explorer on ``Session(model, example_inputs, **session_kwargs)``, or on an
    existing Session. A keyword that is no option of Session's goes to the model
    (``explore(t5, ids, decoder_input_ids=dec)``; ``kwargs={...}`` where a name clashes).
    ``profile``: "background" (a worker thread, with a progress bar),
    "sync" (inline; for tests) or "off" (only on request; the check still runs, in the kernel); in a kernel,
    checking and profiling start once the cell is done, after the first drawing; timings are
    ``step.profile(**profile_kwargs)`` (default ``budget_s=1.0``)."""
    if isinstance(model_or_session, Session):
        if example_inputs or session_kwargs:
            raise UsageError("explore(session) takes no example inputs or session options: the session has them.")
        session = model_or_session
    elif not example_inputs:
        raise UsageError("explore(model, *example_inputs) needs example inputs, "
                        "e.g. explore(model, torch.randn(1, 3, 224, 224)).")
    else:
        from fxviz.capture import called_as

        with called_as("explore"):  # errors name the call the user wrote
            compile_only = ("backward",) if session_kwargs.get("tracer") == "dynamo" else ()
            session_kwargs, model_kwargs = split_options(model_or_session, example_inputs, session_kwargs,
                                                         own=("profile", "profile_kwargs", *compile_only))
            if session_kwargs.get("tracer") == "dynamo":  # every graph, listed above the Explorer
                from .compile_view import explore_compiled

                return explore_compiled(model_or_session, example_inputs, session_kwargs, model_kwargs,
                                        profile=profile, profile_kwargs=profile_kwargs)
            session = Session(model_or_session, example_inputs, kwargs=model_kwargs, **session_kwargs)
    if session.capture.method == "dynamo" and (len(session.capture.graphs) > 1 or session.capture.note):
        from .compile_view import CompileExplorer

        return CompileExplorer.around(session, profile=profile, profile_kwargs=profile_kwargs)
    return Explorer(session, profile=profile, profile_kwargs=profile_kwargs)
