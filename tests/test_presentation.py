"""One presentation of a node: the Explorer's Details tab and the HTML report say the
same strings of the same node (fxviz.present.presentation), the report's timing table too."""
from __future__ import annotations

import base64
import gzip
import html
import json
import re

import pandas as pd
import pytest
import torch

import fxviz
from fxviz.present.columns import rows_from_json
from fxviz.background.measure import Timings
from fxviz.present.presentation import NOT_COUNTED, check_text, node_rows, node_times, timing_cells
from fxviz.report.page import report_html
from fxviz.step import Step

from test_report import _details


def _fake_profile(graph) -> pd.DataFrame:
    """A profile's table with made-up times: conv1 12.34 µs (p25 11.96, p75 13.71), 40.26 %."""
    names = list(graph)
    median = [12.34 if n == "conv1" else 1.0 + i / 8 for i, n in enumerate(names)]
    table = pd.DataFrame({
        "node": names, "op": [graph.nodes[n]["op"] for n in names], "target": [str(graph.nodes[n]["target"]) for n in names],
        "median_us": median, "p25_us": [m - 0.38 for m in median], "p75_us": [m + 1.37 for m in median],
        "share": [40.26 if n == "conv1" else 0.5 for n in names],
    })
    table.attrs.update(device="cpu", repeats=3, plain_forward_us=99.0)
    return table


@pytest.fixture(scope="module")
def timed(resnet18):
    session = fxviz.Session(resnet18, (torch.randn(1, 3, 32, 32),))
    return session, _fake_profile(session.current.graph)


def _report(session, table, monkeypatch) -> dict:
    monkeypatch.setattr(Step, "measured_profile", property(lambda self: table))
    page = report_html(session, max_views=1)
    return json.loads(re.search(r'id="fxviz-report-data">(.*?)</script>', page, re.S).group(1))


def _blob(data: dict, index: int):
    return json.loads(gzip.decompress(base64.b64decode(data["blobs"][index])))


def _details_rows(graph, name, timings) -> list[list[str]]:
    """The Explorer's Details tab's rows for ``name``, read back from its HTML."""
    pytest.importorskip("ipywidgets")
    from fxviz.widgets.panel_details import DetailsPanel

    panel = DetailsPanel(select=lambda _: None)
    try:
        panel.show(graph, name, timings)
        cells = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", panel.body.value.split("fxviz-details-weights")[0])
    finally:
        panel.close()
    return [[html.unescape(k), html.unescape(v)] for k, v in cells]


def test_the_explorers_details_and_the_report_say_the_same_of_a_node(timed, monkeypatch):
    session, table = timed
    graph = session.current.graph
    data = _report(session, table, monkeypatch)
    details = _details(data, data["steps"][0]["details"])
    for name in ("conv1", "x", "fc"):
        assert _details_rows(graph, name, Timings(table=table)) == details[name]["rows"]
    rows = dict(details["conv1"]["rows"])
    assert rows["time"] == "12.3 µs (p25–p75 12.0–13.7)" and rows["share"] == "40.3 % of the step's node time"
    assert rows["FLOPs"] == f"{int(graph.nodes['conv1']['flops']):,}" and rows["shape"] == "1×64×16×16"
    assert dict(details["x"]["rows"])["FLOPs"] == NOT_COUNTED  # an input: nothing counted
    tooltips = {r["name"]: r["time"] for r in rows_from_json(data["steps"][0]["nodes"])}
    assert tooltips["conv1"] == "12.3 µs (40.3 %)"
    # the report's timing table: the Timing tab's strings, not numbers for the page to format
    timing = data["steps"][0]["timing"]
    first = dict(zip(timing["columns"], timing["rows"][0]))
    assert first == {"node": "conv1", "op": "call_module", "target": str(graph.nodes["conv1"]["target"]), "median_us": "12.3",
                     "p25_us": "12.0", "p75_us": "13.7", "share": "40.3"}


def test_a_node_without_a_time_says_why(timed):
    session, _ = timed
    graph = session.current.graph
    assert dict(node_rows(graph, "conv1"))["time"] == "not profiled yet"
    assert dict(node_rows(graph, "conv1", {}, untimed="profiling failed: out of memory"))["time"] == \
        "profiling failed: out of memory"
    failed = _details_rows(graph, "conv1", Timings(error="profiling failed: out of memory"))
    assert dict(failed)["time"] == "profiling failed: out of memory" and "share" not in dict(failed)


def test_cells_and_times_read_the_same_everywhere(timed):
    _, table = timed
    assert [timing_cells(v) for v in ("relu", 12.34, float("nan"), None)] == ["relu", "12.3", NOT_COUNTED, NOT_COUNTED]
    assert node_times(table)["conv1"] == (12.34, pytest.approx(11.96), pytest.approx(13.71), 40.26)
    assert node_times(None) == {}


def test_a_check_reads_as_the_explorers_badge_says_it():
    from fxviz.checks.check import CheckResult

    wrong = CheckResult(status="mismatch", max_abs=0.012345, max_rel=0.5, atol=1e-5, rtol=1e-5, n_inputs=3,
                        message="beyond tolerance")
    assert check_text(wrong) == "mismatch (max abs 0.0123, max rel 0.5)"
    assert check_text(CheckResult(status="match", max_abs=0.0, max_rel=0.0, atol=1e-5, rtol=1e-5, n_inputs=3,
                                  message="")) == "match"
    assert check_text(None) == "not checked yet"
