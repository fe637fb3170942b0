"""Drawing never fails at the default settings: every drawing the Explorer makes (first
view, expand, reveal, expand a level, expand all) keeps within the box budget and the
layout work it allows, and a layout that runs out of time falls back to a coarser
drawing that says so. Small graphs with a small budget stand for the big ones."""
import contextlib
import re
import subprocess
from types import SimpleNamespace

import networkx as nx
import pytest
import torch
import torch.fx
from torch import nn

import fxviz
import fxviz.draw.render
from fxviz.draw.layout_plan import ASKED, WORK_PER_BOX, plan_layout
from fxviz.draw.layout_tree import build_tree
from fxviz.draw.render import LayoutTimeout, render

BUDGET = 60


def nested_graph(n_blocks: int = 80) -> nx.DiGraph:
    """``blocks.i.attn`` and ``blocks.i.mlp`` of six ops each, with a residual add per
    block (bench/scale.py's synthetic graph, small), then a head."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["module_path"] = ""
    for i in range(n_blocks):
        start = x
        for part in ("attn", "mlp"):
            for j in range(6):
                x = graph.call_function(torch.tanh if j % 2 else torch.sigmoid, (x,))
                x.meta["module_path"] = f"blocks.{i}.{part}"
        x = graph.call_function(torch.add, (x, start))
        x.meta["module_path"] = f"blocks.{i}"
    x = graph.call_function(torch.neg, (x,))
    x.meta["module_path"] = "head"
    graph.output(x).meta["module_path"] = None
    return fxviz.to_networkx(torch.fx.GraphModule(nn.Module(), graph))


class View(SimpleNamespace):
    def hold_sync(self):
        return contextlib.nullcontext()


@pytest.fixture
def drawing(monkeypatch):
    """A GraphDrawing on a fake view of nested_graph, at a budget of ``BUDGET`` boxes."""
    pytest.importorskip("anywidget")
    from fxviz.widgets.graph_drawing import GraphDrawing

    monkeypatch.setattr(fxviz.draw.render, "MAX_NODES", BUDGET)
    view = View(collapsed=[], svg="", elements={}, legend=[], legend_mode="op", status="", selected="", show_weights=False,
                color_modes=[{"name": "op", "label": "op kind", "unit": ""}])
    errors: list[str] = []
    result = GraphDrawing(view, errors.append)
    result.step, result.errors = SimpleNamespace(graph=nested_graph(), index=0), errors
    assert result.draw(result.step, {}, "")
    return result


def boxes(view) -> int:
    return sum(e["kind"] in ("node", "collapsed", "stub") for e in view.elements.values())


def click(drawing, collapsed: list[str]) -> None:
    """What the browser does: set ``collapsed``, which the Explorer follows."""
    drawing.view.collapsed = collapsed
    drawing.follow_click(collapsed, lambda reveal: drawing.draw(drawing.step, {}, "", reveal, keep_on_error=True))


def clusters(view) -> set[str]:
    return {e["name"] for e in view.elements.values() if e["kind"] == "cluster"}


def test_every_explorer_operation_keeps_within_the_budget(drawing):
    view, graph = drawing.view, drawing.step.graph
    assert BUDGET // 3 <= boxes(view) <= BUDGET  # what opens by itself: the budget
    for target in list(view.collapsed)[:3]:  # expand one box after another: what was asked, ASKED times it
        click(drawing, [p for p in view.collapsed if p != target])
        assert target in clusters(view) and boxes(view) <= ASKED * BUDGET
    hidden = [n for n in graph if f"fx-{n}" not in view.elements]
    for name in (hidden[0], hidden[len(hidden) // 2], hidden[-1]):  # reveals all over the graph
        drawing.reveal(name, lambda n: drawing.draw(drawing.step, {}, "", n))
        assert f"fx-{name}" in view.elements and boxes(view) <= ASKED * BUDGET
    # Expand a level (gv_graph.js expandOneLevel): each collapsed module's submodules.
    level = sorted({f"{top}.{a['module_path'][len(top) + 1:].split('.')[0]}" for _, a in graph.nodes(data=True)
                    for top in view.collapsed if (a["module_path"] or "").startswith(top + ".")})
    click(drawing, level)
    assert boxes(view) <= ASKED * BUDGET
    click(drawing, [])  # expand all: opens what fits and says what it left collapsed
    assert BUDGET < boxes(view) <= ASKED * BUDGET and view.collapsed
    assert re.search(r"Expand all left \d+ boxes collapsed \(\d+ of 1,043 nodes drawn\)", view.status)
    assert not drawing.errors


def test_the_box_clicked_last_opens_and_older_ones_close_for_it(drawing):
    view, clicks = drawing.view, 0
    while "left collapsed" not in view.status:  # open the first collapsed box, again and again
        target, before = view.collapsed[0], clusters(view)
        click(drawing, view.collapsed[1:])
        assert target in clusters(view) and boxes(view) <= ASKED * BUDGET  # however many were opened before
        clicks += 1
        assert clicks < 100
    closed = before - clusters(view)  # an older box closed for the last one
    assert closed and closed <= set(view.collapsed) and target not in closed
    assert f"{len(closed)} box" in view.status and "left collapsed to keep the layout quick" in view.status


@pytest.mark.parametrize("expand", [[], ["blocks.3.attn"], ["tanh_500", "blocks.0", "blocks.70.mlp"]])
def test_plans_bound_boxes_and_layout_work(expand):
    graph = nested_graph()
    options = {"collapse": set(), "expand": expand, "auto": True, "long_edge": 40}
    must = plan_layout(graph, max_nodes=1, **options)  # the revealed and clicked chains alone
    for budget in (20, BUDGET, 200):
        plan = plan_layout(graph, max_nodes=budget, **options)
        assert plan.box_count <= max(budget * (ASKED if len(expand) > 1 else 1), must.box_count)
        assert plan.work <= max(WORK_PER_BOX * budget, must.work)
        assert plan.box_count >= min(budget // 3, must.box_count)  # it still fills what it may
        assert {n for n in expand if n in graph} <= {u[1] for u in plan.unit_of.values() if u[0] == "node"}


def slow_dot_above(monkeypatch, limit: int) -> list[tuple[int, float]]:
    """A dot that runs out of time on DOT sources longer than ``limit`` characters;
    returns the sizes it was asked to lay out, each with its timeout."""
    real, asked = fxviz.draw.dot.run, []

    def run(source, *, timeout):
        asked.append((len(source.encode()), timeout))
        if len(source.encode()) > limit:
            raise subprocess.TimeoutExpired("dot", timeout)
        return real(source, timeout=timeout)

    monkeypatch.setattr(fxviz.draw.dot, "run", run)
    return asked


def test_a_layout_that_runs_out_of_time_falls_back_to_a_coarser_drawing(monkeypatch):
    graph = nested_graph()
    full = render(graph)
    asked = slow_dot_above(monkeypatch, len(full.dot.source.encode()) - 1)
    drawn = full.drawn()
    assert drawn.box_count < full.box_count and drawn.svg.startswith("<svg")
    assert "took longer than 10 s" in drawn.note and "fewer are drawn" in drawn.note
    assert len(asked) >= 2  # the full drawing, then coarser ones
    # each coarser try gets half the time of the one before (at least 1 s): the wait is bounded
    timeouts = [timeout for _, timeout in asked]
    assert timeouts[:2] == [10.0, 5.0] and min(timeouts) >= 1.0
    with pytest.raises(LayoutTimeout, match="longer than 10 s"):  # an explicit budget is what was asked for
        render(graph, max_nodes=250).drawn().svg


def test_when_no_drawing_fits_in_time_the_error_names_the_one_asked_for(monkeypatch):
    """A short layout_timeout is never stretched by the fallback (each try gets at most
    the one before's), and when every try runs out, the error is about the drawing asked for."""
    full = render(nested_graph(), layout_timeout=0.2)
    asked = slow_dot_above(monkeypatch, 0)  # every layout runs out of time
    drawn = full.drawn()
    assert drawn is full and len(asked) >= 3 and max(timeout for _, timeout in asked) == 0.2
    with pytest.raises(LayoutTimeout, match=f"Laying out {full.box_count} boxes took longer than 0.2 s"):
        drawn.svg


def test_the_explorer_shows_the_coarser_drawing_and_says_why(drawing, monkeypatch):
    view = drawing.view
    before = boxes(view)
    slow_dot_above(monkeypatch, len(drawing.source.encode()) - 1)  # a busy machine: this drawing runs out
    drawing.source = ""  # draw the same again, as a new step would
    assert drawing.draw(drawing.step, {}, "")
    assert view.svg.startswith("<svg") and "fewer are drawn" in view.status
    assert 0 < boxes(view) < before and not drawing.errors


def dense_graph(n_modules: int, width: int) -> nx.DiGraph:
    """``n_modules`` modules ``m.i`` of ``width`` nodes, each reading every earlier one
    of its module (a dense block: few boxes, many crossing edges)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["module_path"] = ""
    for i in range(n_modules):
        earlier = [x]
        for _ in range(width):
            node = graph.call_function(torch.stack, (list(earlier),))
            node.meta["module_path"] = f"m.{i}"
            earlier.append(node)
        x = earlier[-1]
    graph.output(x).meta["module_path"] = None
    return fxviz.to_networkx(torch.fx.GraphModule(nn.Module(), graph))


def test_dense_boxes_are_bounded_by_layout_work_not_only_boxes():
    graph = dense_graph(3, 20)
    plan = plan_layout(graph, collapse=set(), expand=["m.0", "m.1", "m.2"], auto=True, max_nodes=200, long_edge=40)
    assert plan.work <= WORK_PER_BOX * 200 and "m.0" in plan.opened  # the first asked always opens
    assert plan.closed == ["m.1", "m.2"]  # 62 boxes would fit, their 630 crossing edges would not
    loose = plan_layout(graph, collapse=set(), expand=["m.0", "m.1", "m.2"], auto=True, max_nodes=1000, long_edge=40)
    assert loose.opened == ["m", "m.0", "m.1", "m.2"] and not loose.closed


def test_a_box_too_dense_to_open_quickly_has_its_children_grouped():
    graph = dense_graph(1, 48)  # 48 nodes joined by 1,128 edges: dot needs over 10 s for them
    tree = build_tree(graph)
    assert [tree.boxes[key].label for _, key in tree.boxes["m.0"].items] == ["nodes 1–16", "nodes 17–32", "nodes 33–48"]
    options = {"collapse": {"m.0"}, "auto": True, "max_nodes": BUDGET, "long_edge": 40}
    plan = plan_layout(graph, expand=["stack_20"], **options)  # a reveal opens one group of 16
    assert plan.unit_of["stack_20"] == ("node", "stack_20") and plan.box_count <= 16 + 4
    assert plan.work <= WORK_PER_BOX * fxviz.draw.render.MAX_NODES  # within what the default drawing allows


def test_a_report_view_that_runs_out_of_time_is_drawn_coarser_with_its_own_elements(monkeypatch):
    from fxviz.report.views import Views

    views = Views()
    views.add(render(nested_graph()))
    full = views.variants[0]
    slow_dot_above(monkeypatch, len(full.dot.source.encode()) - 1)
    [svg] = views.svgs(workers=1)
    drawn = views.variants[0]
    assert svg.startswith("<svg") and drawn.box_count < full.box_count and "fewer are drawn" in drawn.note
    assert drawn.elements and all(f'id="{key.replace("-", "&#45;")}"' in svg for key in drawn.elements)
