"""A report's focused views of a module called more than once: each call is a box of its own
(layout_paths), so each is a focus, and a focus opens that call alone: expanding the second
call's box on the page shows the second call's insides, every other call collapsed."""
from __future__ import annotations

import base64
import gzip
import json
import re

import torch
from torch import nn

import fxviz
from fxviz.draw.layout_tree import build_tree
from fxviz.report.page import report_html
from fxviz.report.views import Views, focused, module_paths, step_views
from test_layout_calls import Loop


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.inner(x) + x)


class TwoCalls(nn.Module):
    """One block called twice, with an op of the model's own between the calls."""

    def __init__(self):
        super().__init__()
        self.stem, self.block, self.head = nn.Linear(8, 8), Block(), nn.Linear(8, 2)

    def forward(self, x):
        x = torch.tanh(self.block(self.stem(x))) * 2
        return self.head(self.block(x))


def _page_views(session: fxviz.Session) -> dict[str, dict]:
    """Focus -> the drawing the page shows for it, of the first step."""
    page = report_html(session)
    data = json.loads(re.search(r'id="fxviz-report-data">(.*?)</script>', page, re.S).group(1))
    blob = lambda i: json.loads(gzip.decompress(base64.b64decode(data["blobs"][i])))  # noqa: E731
    return {focus: blob(index) for focus, index in data["steps"][0]["views"].items()}


def _nodes(drawing: dict) -> set[str]:
    return {e["name"] for e in drawing["elements"].values() if e["kind"] == "node"}


def test_expanding_the_second_call_on_the_page_shows_that_calls_insides_only():
    session = fxviz.Session(TwoCalls().eval(), (torch.randn(2, 8),), tracer="export")
    tree = build_tree(session.current.graph)
    first, second = ({n for n, box in tree.box_of.items() if call in tree.chain(box)} for call in ("block", "block@1"))
    views = _page_views(session)
    assert {"", "block", "block@1", "block.inner", "block@1.inner"} <= set(views)
    assert {"block", "block@1"} <= set(views[""]["collapsed"])  # the top level: both calls collapsed
    opened = views["block@1"]  # what a click on the second call's box shows
    assert "block@1" not in opened["collapsed"] and {"block", "block@1.inner"} <= set(opened["collapsed"])
    assert _nodes(opened) & second and not _nodes(opened) & first
    inner = views["block@1.inner"]
    assert first.isdisjoint(_nodes(inner)) and {n for n in second if tree.box_of[n] == "block@1.inner"} <= _nodes(inner)


def test_a_loops_iteration_box_opens_with_its_calls_collapsed():
    graph = fxviz.to_networkx(fxviz.trace(Loop(20).eval(), torch.randn(4, 8), tracer="export"))
    tree = build_tree(graph)
    step = next(key for key, box in tree.boxes.items() if box.label.startswith("iteration 1 of 20"))
    calls = [key for kind, key in tree.boxes[step].items if kind == "box"][:2]
    assert [tree.boxes[c].label for c in calls] == ["corr #2 · Corr", "update #1 · Update"]
    paths = module_paths(graph)
    assert set(calls) <= paths
    assert set(calls) <= set(focused(graph, step, paths).collapsed)  # the iteration open, its calls closed
    inside = focused(graph, calls[0], paths)  # a call inside: its iteration stays open around it
    assert step not in inside.collapsed and calls[0] not in inside.collapsed and calls[1] in inside.collapsed
    views = Views()
    assert {step, *calls} <= set(step_views(graph, views, 40))


def _step_data(session: fxviz.Session) -> dict:
    page = report_html(session)
    return json.loads(re.search(r'id="fxviz-report-data">(.*?)</script>', page, re.S).group(1))["steps"][0]


def test_the_page_finds_a_calls_node_in_that_calls_box_and_a_call_in_its_iteration():
    session = fxviz.Session(TwoCalls().eval(), (torch.randn(2, 8),), tracer="export")
    graph, tree = session.current.graph, build_tree(session.current.graph)
    boxes = _step_data(session)["boxes"]
    second = {n for n, box in tree.box_of.items() if "block@1" in tree.chain(box)}
    assert second and {boxes["node"][n] for n in second} <= {"block@1", "block@1.inner"}  # what reveal() opens
    assert all(tree.box_of[n] != (graph.nodes[n].get("module_path") or "") for n in boxes["node"])  # only those
    assert boxes["label"]["block@1"].startswith("block #2")  # the status line's words for the focus
    looped = fxviz.Session(Loop(20).eval(), (torch.randn(4, 8),), tracer="export")
    tree = build_tree(looped.current.graph)
    parents = _step_data(looped)["boxes"]["parent"]
    iteration = next(key for key, box in tree.boxes.items() if box.label.startswith("iteration 1 of 20"))
    calls = [key for kind, key in tree.boxes[iteration].items if kind == "box"]
    assert calls and all(parents[c] == iteration for c in calls)  # collapsing one focuses its iteration
