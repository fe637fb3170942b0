"""Two steps side by side: in the Explorer (two graph views under the main row, driven
as a user would through the Timing tab's button) and headless (``Comparison.side_by_side()``,
HTML that shows without a kernel)."""
from __future__ import annotations

import html
import re

import pytest
import torch
from torch import nn

from fxviz.draw.colour_modes import MARK_COLORS
from fxviz.errors import InputError
from fxviz.passes import registry
from fxviz.session import Session
from fxviz.diff.side_by_side import MEANINGS
from fxviz.widgets import explore

SCRIPT = "<script>alert(1)</script>"
SCRIPT_NODE = "_script_alert_1_script_"  # the node FX names after the module


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn1(self.conv1(x)))


class Hostile(nn.Module):
    """A module named like a script."""

    def __init__(self):
        super().__init__()
        self.add_module(SCRIPT, nn.Linear(3, 3))

    def forward(self, x):
        return getattr(self, SCRIPT)(x).relu()


def image():
    torch.manual_seed(0)
    return torch.randn(1, 3, 8, 8)


@pytest.fixture
def fused():
    """An Explorer on conv -> bn -> relu after fuse_conv_bn, the side-by-side view opened
    from the Timing tab (its pickers: the previous step against the current one)."""
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), image(), profile="off")
    explorer.passes.select.value = "fuse_conv_bn"
    explorer.passes.apply.click()
    assert explorer.session.index == 1 and explorer.side_by_side.layout.display == "none"
    explorer.timing.side_by_side_button.click()
    yield explorer
    explorer.close()


def fills(svg: str) -> dict[str, str]:
    """FX node name -> the fill of its drawn box (render's ids: ``fx-<name>``, Graphviz
    writing the dash as ``&#45;``; a prefix before them allowed)."""
    return dict(re.findall(r'<g id="[\w-]*fx&#45;([^"]+)" class="node">.*?fill="([^"]+)"', svg, flags=re.S))


def test_the_earlier_step_shows_what_was_removed_and_the_later_what_changed(fused):
    panel = fused.side_by_side
    assert panel.layout.display == "" and panel in fused.children and panel.error.value == ""
    assert html.unescape(re.sub(r"<[^>]+>", "", panel.summary.value)) == "fuse_conv_bn: 1 changed, 1 removed, 0 added"
    a, b = panel.views["a"], panel.views["b"]
    assert fills(a.svg) == {"x": MARK_COLORS["unchanged"], "conv1": MARK_COLORS["changed"],
                            "bn1": MARK_COLORS["removed"], "relu": MARK_COLORS["unchanged"],
                            "output": MARK_COLORS["unchanged"]}
    assert fills(b.svg) == {"x": MARK_COLORS["unchanged"], "conv1": MARK_COLORS["changed"],
                            "relu": MARK_COLORS["unchanged"], "output": MARK_COLORS["unchanged"]}
    assert {e["name"] for e in a.elements.values()} == {"x", "conv1", "bn1", "relu", "output"}
    assert "bn1" not in {e["name"] for e in b.elements.values()}
    # each legend names the marks its side shows, and which side a removed node is missing from
    assert [item["label"] for item in a.legend] == [MEANINGS[m] for m in ("removed", "changed", "unchanged")]
    assert [item["label"] for item in b.legend] == [MEANINGS[m] for m in ("changed", "unchanged")]
    assert a.legend[0]["label"] == "removed (not in the step on the right)"
    assert a.color_mode == b.color_mode == "diff" and a.color_modes == [
        {"name": "diff", "label": "diff of the two steps", "unit": ""}]  # the one mode these views draw
    assert "step 0" in panel.labels["a"].value and "step 1 (fuse_conv_bn)" in panel.labels["b"].value
    assert a.status == "5 nodes · step 0 · against step 1" and set(b.nodes) == {"x", "conv1", "relu", "output"}


def test_a_node_selected_on_one_side_is_selected_through_its_counterpart_on_the_other(fused):
    a, b = fused.side_by_side.views["a"], fused.side_by_side.views["b"]
    b.selected = "conv1"  # the fused conv: the same node before the pass
    assert a.selected == "conv1" and fused.graph.selected == "conv1"
    a.selected = "bn1"  # the BatchNorm it absorbed: the conv after the pass, and in the main view (step 1)
    assert (a.selected, b.selected, fused.graph.selected) == ("bn1", "conv1", "conv1")
    assert "conv1" in fused.details.body.value  # the main view's panels follow it
    a.selected = ""
    assert b.selected == "" and fused.graph.selected == "conv1"  # nothing to follow in the main view


def test_the_main_view_follows_the_side_it_shows(fused):
    fused.undo_button.click()  # the main view shows step 0, which has bn1
    a = fused.side_by_side.views["a"]
    a.selected = "bn1"
    assert fused.graph.selected == "bn1" and fused.side_by_side.views["b"].selected == "conv1"


def test_close_hides_the_view_and_lets_go_of_the_steps(fused):
    panel = fused.side_by_side
    panel.close_button.click()
    assert panel.layout.display == "none" and panel._comparison is None
    assert all(view.svg == "" and len(view.nodes) == 0 for view in panel.views.values())
    panel.views["a"].selected = "bn1"  # a stale click on a closed view: ignored, not an error
    assert panel.views["b"].selected == "" and panel.error.value == ""
    fused.timing.side_by_side_button.click()  # opened again, from scratch
    assert panel.layout.display == "" and "bn1" in fills(panel.views["a"].svg)


def test_collapsing_a_box_on_one_side_redraws_only_that_side():
    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.ReLU())

        def forward(self, x):
            return self.block(x)

    torch.manual_seed(0)
    explorer = explore(Blocks().eval(), image(), profile="off")
    explorer.session.apply("fuse_conv_bn")
    explorer.timing.side_by_side_button.click()
    a, b = explorer.side_by_side.views["a"], explorer.side_by_side.views["b"]
    b_svg = b.svg
    a.collapsed = ["block"]  # a click on the box's collapse control
    assert [e["name"] for e in a.elements.values() if e["kind"] == "collapsed"] == ["block"]
    assert b.svg == b_svg and a.legend  # its legend kept
    a.selected = "block_1"  # a hit in the collapsed box: the box opens around it
    assert "fx-block_1" in a.elements and b.selected == "block_0"
    explorer.close()


def test_steps_timed_in_the_timing_tab_are_shown_with_their_timed_marks():
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), image(), profile="sync", profile_kwargs={"budget_s": 0.05, "warmup": 1,
                                                                                   "repeats": 3})
    explorer.session.apply("fuse_conv_bn")
    explorer.timing.compare_button.click()  # the A/B run of steps 0 and 1
    timed = explorer.profiler.compared(*explorer.session.steps).comparison
    assert timed.timed and explorer.timing.picked() is timed
    explorer.timing.side_by_side_button.click()
    a, b = explorer.side_by_side.views["a"], explorer.side_by_side.views["b"]
    # structure where only one step has the node, faster / slower / unchanged (the noise) where both have it
    for view, marks in ((a, timed.node_marks("a")), (b, timed.node_marks("b"))):
        assert [item["label"] for item in view.legend] == [MEANINGS[m] for m in MARK_COLORS if m in marks.values()]
        assert fills(view.svg) == {node: MARK_COLORS[mark] for node, mark in marks.items()}
    assert timed.node_marks("a")["bn1"] == "removed"
    explorer.close()


@pytest.fixture
def own_registry(monkeypatch):
    """Passes registered by a test disappear after it."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def test_headless_side_by_side_is_two_svgs_with_every_user_string_escaped(own_registry):
    def twice(gm):
        """Adds a second relu after the first (a node added)."""
        (relu,) = [n for n in gm.graph.nodes if n.target == "relu"]
        with gm.graph.inserting_after(relu):
            again = gm.graph.call_method("relu", (relu,))
        relu.replace_all_uses_with(again, delete_user_cb=lambda user: user is not again)

    registry.register(twice, name="twice")
    torch.manual_seed(0)
    session = Session(Hostile(), (torch.randn(2, 3),))
    session.apply("twice")
    shown = session.compare(0, 1).side_by_side()
    page = shown._repr_html_()
    assert page.count("<svg") == 2 and page.count("</svg>") == 2
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # the output now reads relu_1: changed
    assert "twice: 1 changed, 0 removed, 1 added" in page and repr(shown) == "SideBySide(twice: 1 changed, 0 removed, 1 added)"
    assert re.findall(r"<td><b>(.*?)</b>", page) == ["step 0 (trace)", "step 1 (twice)"]
    assert page.count('id="sbs-a-fx&#45;relu"') == page.count('id="sbs-b-fx&#45;relu"') == 1  # unique on the page
    assert html.escape(MEANINGS["added"]) in page and 'id="fx' not in page
    assert fills(page.split('id="sbs-b-fxgraph"')[1]) == {"x": MARK_COLORS["unchanged"], SCRIPT_NODE: MARK_COLORS[
        "unchanged"], "relu": MARK_COLORS["unchanged"], "relu_1": MARK_COLORS["added"], "output": MARK_COLORS["changed"]}


def test_headless_side_by_side_takes_render_options_but_not_another_colouring():
    session = Session(ConvBN().eval(), (image(),))
    session.apply("fuse_conv_bn")
    cmp = session.compare(0, 1)
    assert cmp.side_by_side(rankdir="LR").drawings[0].dot.graph_attr["rankdir"] == "LR"
    with pytest.raises(InputError, match=r"not color_by.*colours both graphs by their diff marks"):
        cmp.side_by_side(color_by="op")


def test_a_closed_explorer_frees_the_side_by_side_view_and_its_steps():
    import gc
    import weakref

    from ipywidgets.widgets.widget import _instances  # every open widget, by comm id

    before = set(_instances)
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), image(), profile="off")
    explorer.session.apply("fuse_conv_bn")
    explorer.timing.side_by_side_button.click()
    explorer.side_by_side.views["a"].selected = "bn1"
    gone = [weakref.ref(o) for o in (explorer, explorer.session, explorer.session.steps[0].gm,
                                     *explorer.side_by_side.views.values())]
    explorer.close()
    del explorer
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)
    assert set(_instances) <= before  # layouts included: none is left open


def test_an_explorer_whose_side_by_side_view_was_never_opened_closes_every_widget():
    from ipywidgets.widgets.widget import _instances  # every open widget, by comm id

    before = set(_instances)
    explorer = explore(ConvBN().eval(), image(), profile="off")
    assert explorer.side_by_side.children == ()  # hidden: its views are not on the page
    explorer.close()
    assert set(_instances) <= before
