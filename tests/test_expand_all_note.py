""""Expand all" is never silent: when the box budget keeps boxes collapsed, the status
line says how many, how many nodes are drawn, why, and what to do."""
from __future__ import annotations

import re
from types import SimpleNamespace

import torch
from torch import nn

import fxviz
from fxviz.widgets.graph_drawing import GraphDrawing
from fxviz.widgets.graph_view import GraphView


def _step(blocks: int) -> SimpleNamespace:
    """A step of a model of `blocks` blocks of six modules (six nodes each)."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(4, 4), nn.ReLU())])
                            for _ in range(blocks)])
    return SimpleNamespace(graph=fxviz.to_networkx(fxviz.trace(model, (torch.randn(1, 4),))), index=0)


SMALL = {"max_nodes": 20}  # a small box budget: a small graph goes over it


def _click(drawing: GraphDrawing, view: GraphView, step: SimpleNamespace, collapsed: list[str]) -> None:
    """What the Explorer does on a click in the view: it asks for `collapsed`."""
    view.collapsed = collapsed
    drawing.follow_click(collapsed, lambda reveal: drawing.draw(step, SMALL, "", reveal, keep_on_error=True))


def _expand_all(drawing: GraphDrawing, view: GraphView, step: SimpleNamespace) -> None:
    _click(drawing, view, step, [])


def _counts(view: GraphView) -> tuple[int, int]:
    kinds = [e["kind"] for e in view.elements.values()]
    return kinds.count("collapsed"), kinds.count("node")


def _says_what_it_left(view: GraphView, step: SimpleNamespace) -> None:
    boxes, drawn = _counts(view)
    assert boxes > 0 and drawn < len(step.graph)
    said = re.search(r"Expand all left (\d+) boxes collapsed \(([\d,]+) of ([\d,]+) nodes drawn\)", view.status)
    assert said and said.groups() == (str(boxes), f"{drawn:,}", f"{len(step.graph):,}"), view.status
    assert "click a box to open it" in view.status and "slow" in view.status


def test_expand_all_over_the_budget_says_what_it_left_closed_and_what_to_do():
    step, view = _step(30), GraphView()  # 182 nodes, over the budget even when asked open
    drawing = GraphDrawing(view, say=pytest_fail)
    drawing.draw(step, SMALL, "")
    assert "Expand all" not in view.status  # the first view says nothing of it
    _expand_all(drawing, view, step)
    _says_what_it_left(view, step)
    assert sorted(view.collapsed) == sorted(drawing.collapsed) and view.collapsed
    # Pressed again: the boxes it left closed open next (others close to keep the budget); said again.
    first = view.svg
    _expand_all(drawing, view, step)
    assert view.svg != first
    _says_what_it_left(view, step)
    # Any other drawing (a box collapsed by hand) no longer carries the note.
    opened = next(e["name"] for e in view.elements.values() if e["kind"] == "cluster")
    _click(drawing, view, step, [*view.collapsed, opened])
    assert opened in view.collapsed
    assert "Expand all" not in view.status


def test_expand_all_that_opens_everything_adds_nothing():
    step, view = _step(3), GraphView()
    drawing = GraphDrawing(view, say=pytest_fail)
    drawing.draw(step, SMALL, "")
    _click(drawing, view, step, ["0", "1"])
    assert _counts(view)[0] == 2
    _expand_all(drawing, view, step)
    assert _counts(view) == (0, len(step.graph)) and view.status == f"{len(step.graph)} nodes · step 0"


def pytest_fail(message: str) -> None:
    raise AssertionError(f"unexpected error line: {message}")
