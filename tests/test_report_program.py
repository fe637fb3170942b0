"""The report of a fresh Session on an ExportedProgram: what it still says after its work
was cut (every node reachable in a drawing, the overview, "not checked yet", one table
encoding shared by the graph view and the node table), and dot at work from the first view drawn."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch
from torch import nn

import fxviz
from fxviz.present.columns import rows_from_json
from fxviz.present.node_table import COLUMNS, TIME_KEYS
from fxviz.report.page import report_html
from fxviz.report.views import ALL, draw_all

from test_report import _blob, _data


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.mlp = nn.LayerNorm(4), nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class _Decoder(nn.Module):
    """A transformer's shape in small: an embedding, three identical layers, a head."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
        self.layers = nn.ModuleList(_Block() for _ in range(3))

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


@pytest.fixture(scope="module")
def program_session():
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    return fxviz.Session(torch.export.export(_Decoder().eval(), (x,)), (x,))


def test_a_fresh_programs_report_says_what_it_knows_and_what_it_has_not_checked(program_session):
    session = program_session
    graph = session.current.graph
    step = _data(report_html(session))["steps"][0]
    assert (step["check"]["status"], step["check"]["slug"]) == ("not checked yet", "pending")
    assert "check=True" in step["check"]["message"] and not session.current.check_done
    overview = dict(step["overview"]["rows"])
    assert overview["captured by"] == "exported program" and overview["nodes"].startswith(f"{len(graph):,}: ")
    assert overview["FLOPs"].endswith(" calls)")  # counted where a formula is, the rest said


def test_every_op_of_a_program_is_drawn_in_one_of_its_views(program_session):
    data = _data(report_html(program_session))
    step = data["steps"][0]
    assert {ALL, "", "layers", "layers.0", "layers.0.mlp"} <= set(step["views"])
    drawn = set()
    for index in set(step["views"].values()):
        variant = _blob(data, index)
        assert variant["svg"].startswith("<svg") and not variant.get("error")
        drawn |= {e["name"] for e in variant["elements"].values() if e["kind"] == "node"}
    weights = {n for n, op in program_session.current.graph.nodes(data="op") if op == "get_attr"}
    assert drawn == set(program_session.current.graph) - weights  # weights: attributes of the ops reading them


def test_the_node_table_and_the_graph_view_share_one_set_of_columns(program_session):
    """The table's rows travel column by column (as the Explorer sends them) with no times
    yet, and the graph view's records are the same columns plus each node's tooltip time."""
    graph = program_session.current.graph
    data = _data(report_html(program_session))
    step = data["steps"][0]
    sent = _blob(data, step["rows"])
    assert sent["n"] == len(graph) and {"name", "shape"} <= set(sent["keys"])  # column-wise, not a dict per row
    rows = rows_from_json(sent)
    assert [r["name"] for r in rows] == list(graph) and [r["index"] for r in rows] == list(range(len(graph)))
    assert set(rows[0]) == {c["key"] for c in COLUMNS} and all(r[k] is None for r in rows for k in TIME_KEYS)
    records = rows_from_json(step["nodes"])
    assert [{k: r[k] for k in ("name", "op", "target", "module_path", "shape")} for r in rows] == \
        [{k: r[k] for k in ("name", "op", "target", "module_path", "shape")} for r in records]
    assert {r["time"] for r in records} == {""}  # not profiled: no tooltip time
    linear = next(r for r in rows if r["module_path"] == "layers.0.mlp.0" and r["op"] == "call_function")
    assert linear["flops"] == graph.nodes[linear["name"]]["flops"] > 0 and linear["shape"] == "2×8"


class _Recording(ThreadPoolExecutor):
    """A pool that notes each layout it is given in ``events``."""

    def __init__(self, events: list[str]):
        super().__init__(1)
        self.events = events

    def submit(self, fn, /, *args, **kwargs) -> Future:
        self.events.append("layout")
        return super().submit(fn, *args, **kwargs)


def test_dot_lays_out_each_view_from_the_moment_it_is_drawn(program_session, monkeypatch):
    """dot's layouts are most of a report's time: each starts once its view is drawn, not
    after the report has drawn them all."""
    import fxviz.report.views as views_module

    events: list[str] = []
    drawing = views_module.render
    monkeypatch.setattr(views_module, "render", lambda *a, **kw: events.append("draw") or drawing(*a, **kw))
    with _Recording(events) as pool:
        views = draw_all([program_session.current.graph], None, pool)
        svgs = views.svgs()
    assert len(views.variants) > 5 and events == ["draw", "layout"] * len(views.variants)  # every view differs
    assert all(svg.startswith("<svg") for svg in svgs)


def test_the_first_views_layout_is_the_reports_star_view(program_session, monkeypatch):
    """A fresh report after the first view (``render(graph).drawn()``) has the views of one
    written without it, and dot did not lay out the first view again for its "*" view."""
    import fxviz.draw.render as render_module
    from fxviz.draw.render import render

    program = torch.export.export(_Decoder().eval(), program_session.current.example_inputs)
    without, shown = (fxviz.Session(program, program_session.current.example_inputs) for _ in range(2))
    first = render(shown.current.graph).drawn().svg
    real, laid_out = render_module.layout_svg, []
    monkeypatch.setattr(render_module, "layout_svg", lambda source, **kw: laid_out.append(source) or real(source, **kw))
    data = [_data(report_html(session)) for session in (without, shown)]
    views = [{focus: _blob(d, i)["svg"] for focus, i in d["steps"][0]["views"].items()} for d in data]
    assert views[0] == views[1] and views[1][ALL] == first
    assert len(laid_out) == 2 * len(set(data[0]["steps"][0]["views"].values())) - 1  # not the "*" view again
    assert render(shown.current.graph, collapse=[]).laid_out is not render(shown.current.graph).laid_out
