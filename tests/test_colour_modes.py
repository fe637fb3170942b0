"""The table of colour modes (fxviz/draw/colour_modes.py): one entry is a whole mode, which the
renderer colours with, the Explorer measures for and the graph view offers in its menu."""
from __future__ import annotations

import re

import pytest
import torch

import fxviz
from fxviz.draw import colour_modes
from fxviz.draw.colour_modes import MODES, ColourMode, graph_attr, heat, profile_column
from fxviz.draw.render import render

from test_explorer import FAST, ConvBN


@pytest.fixture
def gm():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    return fxviz.annotate(fxviz.trace(ConvBN().eval(), x), (x,))  # FLOPs and bytes per node


def fills(rendering) -> dict[str, str]:
    return dict(re.findall(r'id="fx-(\w+)".*?fillcolor="(#\w+)"', rendering.dot.source))


def test_every_mode_is_complete_and_listed_for_the_view():
    assert list(MODES) == ["op", "time", "flops", "diff", "error", "memory", "kernel"]
    for mode in MODES.values():
        assert mode.needs in colour_modes.NEEDS and mode.label and callable(mode.fill)
        assert mode.data is not None  # how the mode's node values come from what it needs
    assert colour_modes.views()[1] == {"name": "time", "label": "time share", "unit": "% of the step's node time"}
    with pytest.raises(ValueError, match="needs must be one of"):
        ColourMode("x", "x", heat, needs="weather")


def test_render_reads_the_table_and_names_the_modes_when_asked_for_an_unknown_one(gm):
    assert fills(render(gm, color_by="op"))["conv1"] == colour_modes.OP_COLORS["call_module"]
    assert render(gm, color_by="flops").legend[-1]["label"].startswith("flops ")
    with pytest.raises(ValueError, match="needs values=.*profile's share"):
        render(gm, color_by="time")
    with pytest.raises(ValueError, match="No colour mode 'tmie'; the modes are: op, time, flops, diff, error, memory, kernel"):
        render(gm, color_by="tmie")
    # values given to a mode are coloured as the mode colours them: memory in bytes
    assert render(gm, color_by="memory", values={"conv1": 3.0}).legend[-1]["label"] == "memory 3 B"


def test_a_mode_added_to_the_table_is_offered_drawn_and_measured_end_to_end(gm, monkeypatch):
    """Two new modes, one entry each: one from the graph alone, one from the profile."""
    pytest.importorskip("anywidget")
    from fxviz.widgets import explore
    from fxviz.widgets.graph_view import GraphView

    monkeypatch.setitem(MODES, "bytes", ColourMode("bytes", "bytes moved", heat, graph_attr("bytes"),
                                                   unit="bytes read and written"))
    monkeypatch.setitem(MODES, "p75", ColourMode("p75", "slow quartile", heat, profile_column("p75_us"),
                                                 needs="profile", unit="µs", note="p75 time (µs)"))
    # the renderer
    graph = fxviz.to_networkx(gm)
    heaviest = max(graph, key=lambda n: graph.nodes[n].get("bytes") or 0)
    drawn = render(graph, color_by="bytes")
    assert drawn.legend[-1]["label"] == f"bytes {graph.nodes[heaviest]['bytes']:.3g}"
    assert fills(drawn)[heaviest] == drawn.legend[-1]["color"]
    # the view offers both with their words
    offered = {m["name"]: m for m in GraphView().color_modes}
    assert offered["bytes"] == {"name": "bytes", "label": "bytes moved", "unit": "bytes read and written"}
    assert offered["p75"]["label"] == "slow quartile"
    # the Explorer draws them: the graph mode at once, the profile mode from the profile
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), torch.randn(1, 3, 8, 8), profile="sync", profile_kwargs=FAST)
    try:
        explorer.graph.color_mode = "bytes"
        assert explorer.graph.legend_mode == "bytes" and explorer.graph.legend[0]["label"] == "bytes 0"
        explorer.graph.color_mode = "p75"
        assert explorer.graph.legend_mode == "p75" and "p75 time (µs)" in explorer.graph.status
        table = explorer.profiler.known(explorer.session.current).table
        slowest = table.loc[table["p75_us"].idxmax(), "node"]
        top = explorer.graph.legend[-1]
        assert top["label"] == f"p75 {table['p75_us'].max():.3g}"
        assert fills(render(explorer.session.current.graph, color_by="p75",
                            values=dict(zip(table["node"], table["p75_us"]))))[slowest] == top["color"]
    finally:
        explorer.close()
    # unprofiled, it says why and falls back to op colours
    explorer = explore(ConvBN().eval(), torch.randn(1, 3, 8, 8), profile="off")
    try:
        explorer.graph.color_mode = "p75"
        assert "p75: profiling is off" in explorer.graph.status and explorer.graph.legend_mode == "op"
        explorer.graph.color_mode = "tmie"  # set from Python: said, not raised inside the observer
        assert "'tmie' is not a colour mode (the modes: op, time" in explorer.graph.status
    finally:
        explorer.close()


def test_diff_colours_the_structure_before_any_timing_and_its_legend_says_what_each_colour_means():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    session = fxviz.Session(ConvBN().eval(), x)
    session.apply("fuse_conv_bn")
    cmp = fxviz.compare(session.steps[0], session.steps[1])
    after = fills(render(session.steps[1].gm, color_by="diff", marks=cmp.node_marks()))
    before = fills(render(session.steps[0].gm, color_by="diff", marks=cmp.node_marks("a")))
    colours = colour_modes.MARK_COLORS
    assert after["conv1"] == colours["changed"] and after["relu"] == colours["unchanged"] and "bn1" not in after
    assert before["bn1"] == colours["removed"] and before["conv1"] == colours["changed"]
    assert not cmp.timed
    legend = render(session.steps[1].gm, color_by="diff", marks=cmp.node_marks()).legend
    assert {item["color"]: item["label"] for item in legend}[colours["changed"]] == "changed (op, weights or inputs)"
    assert [item["label"].split()[0] for item in legend] == list(colours)
    assert len(set(colours.values())) == len(colours)  # one colour per meaning


def test_the_explorers_diff_mode_shows_the_structure_while_nothing_is_timed():
    pytest.importorskip("anywidget")
    from fxviz.widgets import explore

    explorer = explore(ConvBN().eval(), torch.randn(1, 3, 8, 8), profile="off")
    explorer.graph.color_mode = "diff"
    explorer.session.apply("fuse_conv_bn")
    assert "diff against step 0: structure only" in explorer.graph.status
    assert colour_modes.MARK_COLORS["changed"] in explorer.graph.svg.lower()
    assert explorer.profiler.compared(*explorer.session.steps) is None  # nothing was measured for it
    explorer.close()


def test_the_kernel_mode_is_offered_only_on_a_graph_with_kernels():
    """A graph inductor did not compile has nothing to colour by kernel: the graph view
    does not list the mode there."""
    import networkx as nx

    plain = nx.DiGraph()
    plain.add_node("relu", op="call_function")
    assert "kernel" not in [v["name"] for v in colour_modes.views(plain)]
    compiled = plain.copy()
    compiled.nodes["relu"]["kernel"] = "triton_poi_fused_relu_0"
    assert "kernel" in [v["name"] for v in colour_modes.views(compiled)]
    assert [v["name"] for v in colour_modes.views()] == list(colour_modes.MODES)  # no graph: every mode


def test_an_explorer_lists_the_kernel_mode_only_for_a_compiled_graph():
    """The Explorer's drawing narrows its graph view's list to what the step's graph has:
    an ordinary model gets no "inductor kernel" entry."""
    from fxviz.widgets import Explorer

    ex = Explorer(fxviz.Session(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.randn(2, 4)),
                  profile="off")
    names = [m["name"] for m in ex.graph.color_modes]
    assert "kernel" not in names and {"op", "time", "error", "memory"} <= set(names)
