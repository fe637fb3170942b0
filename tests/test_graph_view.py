"""GraphView on the kernel side: its synced state, `select`, and messages from the
browser reaching Python observers. No browser here (see test_graph_view_browser.py)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import traitlets

pytest.importorskip("anywidget")

WIDGETS = Path(__file__).resolve().parents[1] / "widgets"

from fxviz.widgets.graph_view import MODULES, GraphView, esm_source  # noqa: E402 (after the skip)

CONTRACT = {"svg", "elements", "legend", "legend_mode", "nodes", "times", "selected", "marked", "collapsed",
            "color_mode", "color_modes", "status"}
NODES = {"x": {"op": "placeholder", "target": "x", "module_path": "", "shape": "1×3", "time": ""},
         "relu": {"op": "call_function", "target": "torch.relu", "module_path": "act",
                  "shape": "1×3", "time": "1 µs"}}


EMPTY = '{"n":0,"keys":[],"columns":[]}'  # no records, as JSON text


def from_browser(widget: GraphView, **state) -> None:
    """Deliver a state update the way the front-end's save_changes() does."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state,
                                             "buffer_paths": []}}, "buffers": []})


def test_contract_traitlets_are_synced_with_their_defaults():
    w = GraphView()
    synced = set(w.trait_names(sync=True))
    assert CONTRACT <= synced
    state = w.get_state()
    assert {k: state[k] for k in CONTRACT} == {
        "svg": "", "elements": {}, "legend": [], "legend_mode": "", "nodes": EMPTY, "times": EMPTY, "selected": "",
        "marked": [], "collapsed": [],
        "color_mode": "op", "color_modes": [
            {"name": "op", "label": "op kind", "unit": ""},
            {"name": "time", "label": "time share", "unit": "% of the step's node time"},
            {"name": "flops", "label": "FLOPs", "unit": "floating-point operations per forward"},
            {"name": "diff", "label": "diff vs previous", "unit": ""},
            {"name": "error", "label": "numeric error", "unit": "relative error, max |b − a| / max |a|"},
            {"name": "memory", "label": "memory alive", "unit": "bytes of activations alive as the node runs"},
            {"name": "kernel", "label": "inductor kernel", "unit": ""}],  # a drawing offers its graph's part
        "status": ""}


def test_front_end_files_are_sent_as_text_without_a_file_watcher():
    w = GraphView()
    assert w._esm == esm_source() and isinstance(GraphView._esm, str)  # a string: no file watcher
    assert "export default { render }" in w._esm
    assert w._css == (WIDGETS / "graph_view.css").read_text(encoding="utf-8")


def test_the_joined_module_imports_nothing_and_exports_what_the_modules_do(tmp_path):
    """anywidget gets one module: no import of the others may remain, and it must
    offer the same exports as graph_view.js imported as files (checked with node)."""
    joined = esm_source()
    assert not re.search(r'^\s*(import|export)\b[^;]*\bfrom\s+"\./', joined, re.MULTILINE)
    for name in MODULES:
        assert (WIDGETS / name).exists()
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    bundle = tmp_path / "joined.mjs"
    bundle.write_text(joined, encoding="utf-8")
    keys = "m => console.log(JSON.stringify([Object.keys(m).sort(), typeof m.default.render]))"
    out = [subprocess.run([node, "--input-type=module", "-e", f"import({str(path.as_uri())!r}).then({keys})"],
                          capture_output=True, text=True, check=True).stdout
           for path in (bundle, WIDGETS / "graph_view.js")]
    assert out[0] == out[1] and '"function"' in out[0] and "zoomAt" in out[0]


def test_the_report_host_is_one_script_that_parses(tmp_path):
    """The report inlines its host as one module script: the modules joined, no import
    of each other left (checked with node when it is installed)."""
    from fxviz.present.assets import REPORT_HOST, join

    joined = join(REPORT_HOST)
    assert not re.search(r'^\s*(import|export)\b[^;]*\bfrom\s+"\./', joined, re.MULTILINE)
    assert "class HostModel" in joined and "async function main" in joined
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "host.mjs"
    script.write_text(joined, encoding="utf-8")
    subprocess.run([node, "--check", str(script)], check=True)


def test_node_records_travel_column_by_column_and_the_browser_reads_them_back(decode_in_node):
    """What the view sends of each node is a few columns (inputs as places back, users
    not at all), much smaller than a record per node; gv_graph.js's nodesOf (under node)
    gives back the records the kernel holds, users included."""
    import json

    from fxviz.widgets.graph_view import nodes_to_json

    n = 600
    records = {f"n{i}": {"op": "call_function", "target": "torch.tanh", "module_path": f"blocks.{i // 50}",
                         "shape": "1×4", "time": "", "inputs": [f"n{j}" for j in (i - 1, i - 25) if j >= 0],
                         "users": [f"n{j}" for j in (i + 1, i + 25) if j < n]} for i in range(n)}
    sent = nodes_to_json(records)
    assert sent["keys"] == ["name", "op", "target", "module_path", "shape", "time", "inputs"]
    assert sent["columns"][-1][:2] == [[], [1]] and sent["columns"][-1][30] == [1, 25]
    assert len(json.dumps(sent)) < 0.25 * len(json.dumps(records))
    assert decode_in_node("gv_graph.js", "nodesOf", sent) == records
    view = GraphView(nodes=records)  # the widget holds them column by column, sends one JSON text
    assert json.loads(view.get_state()["nodes"]) == sent
    assert decode_in_node("gv_graph.js", "nodesOf", view.get_state()["nodes"]) == records
    assert len(view.nodes) == n and "n30" in view.nodes and view.nodes["n30"] == records["n30"]


def test_select_sets_selected_and_rejects_unknown_names():
    w = GraphView(nodes=NODES)
    w.select("relu")
    assert w.selected == "relu"
    w.select("")
    assert w.selected == ""
    with pytest.raises(ValueError, match=r"no node named 'rleu'.*x, relu"):
        w.select("rleu")
    assert w.selected == ""


def test_browser_changes_reach_python_observers():
    w = GraphView(nodes=NODES)
    seen = []
    w.observe(lambda change: seen.append((change["name"], change["new"])),
              names=["selected", "collapsed", "color_mode"])
    from_browser(w, selected="relu")
    from_browser(w, collapsed=["act"])
    from_browser(w, color_mode="time")
    assert seen == [("selected", "relu"), ("collapsed", ["act"]), ("color_mode", "time")]


def test_list_traitlets_validate_their_items():
    w = GraphView()
    with pytest.raises(traitlets.TraitError, match="collapsed"):
        w.collapsed = [3]


def _selectors(css: str) -> list[str]:
    """Every selector of every rule (commas inside :is(...)/:has(...) kept together;
    at-rule conditions skipped, the rules inside them kept)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    # @keyframes' stops (from, to, 50%) are no selectors (their names: `_keyframe_names`)
    css = re.sub(r"@keyframes\s+[\w-]+\s*\{(?:[^{}]*\{[^{}]*\})*\s*\}", "", css)
    out = []
    for prelude in re.findall(r"([^{}]+)\{", css):
        if prelude.strip().startswith("@"):  # @media/@container: a condition, its rules follow
            continue
        depth, current = 0, ""
        for ch in prelude:
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                out.append(current.strip())
                current = ""
            else:
                current += ch
        out.append(current.strip())
    return out


def test_every_css_rule_is_scoped_by_a_prefixed_class():
    """anywidget CSS is global: a rule not under an fxviz- class would restyle the page
    (Graphviz's own classes, node/edge/cluster, are styled only under .fxviz-gv-canvas)."""
    selectors = _selectors((WIDGETS / "graph_view.css").read_text())
    assert len(selectors) > 30
    assert [s for s in selectors if not s.startswith(".fxviz-")] == []


def test_every_class_the_script_sets_is_prefixed():
    js = esm_source()
    names = re.findall(r'h\("\w+", "([^"]*)"', js)
    names += re.findall(r'classList\.\w+\("([^"]+)"', js)
    names += re.findall(r'querySelectorAll\("\.([\w-]+)"\)', js)
    assert len(names) > 20
    assert all(n == "" or n.startswith("fxviz-") for n in names), names


def test_undo_and_redo_keys_reach_on_action_callbacks():
    w = GraphView()
    seen: list[str] = []
    w.on_action(seen.append)
    for content in ({"action": "undo"}, {"action": "redo"}, {"action": "rm -rf"}, "junk"):
        w._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})
    assert seen == ["undo", "redo"]
