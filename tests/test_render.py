import re
import subprocess
import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import RenderError
from fxviz.draw.render import render

SCRIPT = "<script>alert(1)</script>"
DOT_BREAKER = '"]; a -> b; //'
SVG_NS = "{http://www.w3.org/2000/svg}"


class Doubler(nn.Module):
    def forward(self, x):
        return x * 2 + 1  # two nodes: a one-node module draws no cluster


class Hostile(nn.Module):
    """Module names chosen to break out of DOT, SVG and HTML. The DOT breaker is traced
    through (a leaf with that name would break torch.fx's own code generation)."""

    def __init__(self):
        super().__init__()
        self.add_module(SCRIPT, nn.Linear(3, 3))
        self.add_module(DOT_BREAKER, Doubler())

    def forward(self, x):
        return getattr(self, DOT_BREAKER)(getattr(self, SCRIPT)(x))


def svg_texts(svg):
    root = ET.fromstring(svg)  # also proves the SVG is well-formed
    return " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))


def test_hostile_names_render_as_text():
    gm = fxviz.annotate(fxviz.trace(Hostile()), torch.randn(2, 3))
    rendering = render(gm)
    assert "a -> b" not in rendering.dot.source.replace("&quot;", "")  # no injected edge
    svg = rendering.svg
    assert "<script" not in svg
    texts = svg_texts(svg)
    assert SCRIPT in texts  # shown literally, as text
    assert DOT_BREAKER + ' · Doubler' in texts  # the cluster label of the traced-through module
    assert all(re.fullmatch(r"fx-\w+|fxcl-\d+|fxco-\d+|fxst-\d+", i) for i in rendering.elements)


def test_a_name_torch_fx_cannot_compile_is_a_trace_error():
    class Quoted(nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module(DOT_BREAKER, nn.ReLU())

        def forward(self, x):
            return getattr(self, DOT_BREAKER)(x)

    with pytest.raises(fxviz.TraceError, match="rename it"):
        fxviz.trace(Quoted())


def test_nodes_have_stable_ids_mapped_to_fx_names(my_module):
    rendering = render(fxviz.trace(my_module), show_weights=True)  # the tutorial's get_attr as a node
    root = ET.fromstring(rendering.svg)
    ids = {g.get("id") for g in root.iter(f"{SVG_NS}g") if g.get("class") == "node"}
    assert ids == {f"fx-{n}" for n in ["x", "linear_weight", "add", "linear", "relu", "sum_1", "topk", "output"]}
    assert rendering.elements["fx-sum_1"] == {"kind": "node", "name": "sum_1"}
    assert render(fxviz.trace(my_module), show_weights=True).dot.source == rendering.dot.source  # deterministic


def test_weights_are_attributes_of_the_ops_that_read_them(my_module):
    """Netron and Model Explorer show a parameter on the op that reads it, not as a box."""
    graph = fxviz.to_networkx(fxviz.trace(my_module))
    rendering = render(graph, highlight=["linear_weight"])
    assert "fx-linear_weight" not in rendering.elements and "fx-add" in rendering.elements
    assert graph.nodes["linear_weight"]["weight"] and not graph.nodes["add"]["weight"]
    assert graph.nodes["add"]["weights"] == (("linear.weight", "5×4", "float32", 80),)  # 5×4 float32: 80 bytes
    assert [w[0] for w in graph.nodes["linear"]["weights"]] == ["linear.weight", "linear.bias"]  # the module's own
    assert 'penwidth=2.5' in next(line for line in rendering.dot.source.splitlines() if 'id="fx-add"' in line)
    assert render(graph, expand=["linear_weight"]).elements == rendering.elements  # revealing it reveals its op


def test_resnet18_reads_as_nested_module_clusters(resnet18):
    rendering = render(fxviz.trace(resnet18))
    clusters = {e["name"] for e in rendering.elements.values() if e["kind"] == "cluster"}
    assert {"layer1", "layer1.0", "layer2.0.downsample", "layer4.1"} <= clusters
    assert "layer1 · Sequential" in svg_texts(rendering.svg)


def test_collapsing_a_module_draws_one_summary_node(resnet18):
    rendering = render(fxviz.trace(resnet18), collapse=["layer1"], auto_collapse=False)
    summaries = [e for e in rendering.elements.values() if e["kind"] == "collapsed"]
    assert summaries == [{"kind": "collapsed", "name": "layer1", "count": 14}]
    assert "fx-layer1_0_conv1" not in rendering.elements
    assert "fx-layer2_0_conv1" in rendering.elements


def test_auto_collapse_keeps_large_graphs_under_the_box_budget(resnet18):
    rendering = render(fxviz.trace(resnet18), max_nodes=30)
    assert set(rendering.collapsed) == {f"layer{i}.{j}" for i in range(1, 5) for j in range(2)}
    assert len(rendering.elements) - sum(e["kind"] == "cluster" for e in rendering.elements.values()) <= 30
    expanded = render(fxviz.trace(resnet18), max_nodes=30, expand=["layer3.1"])
    assert "layer3.1" not in expanded.collapsed and "fx-layer3_1_conv1" in expanded.elements


def test_flat_aten_graph_is_segmented_and_long_edges_become_stubs():
    # No nn.Module for capture to find: a graph with no module paths at all.
    weights = [torch.randn(8, 8, requires_grad=True) for _ in range(40)]

    def step(x):
        h = x
        for w in weights:
            h = torch.tanh(h @ w + 1)
        return torch.autograd.grad(h.sum(), weights)

    gm = fxviz.trace(step, torch.randn(2, 8), tracer="make_fx")
    assert len(gm.graph.nodes) > 300
    rendering = render(gm, max_nodes=60)
    kinds = [e["kind"] for e in rendering.elements.values()]
    assert kinds.count("collapsed") >= 4
    assert kinds.count("stub") >= 1
    assert ET.fromstring(rendering.svg) is not None


def test_heat_colouring_by_values_with_legend(my_module):
    gm = fxviz.trace(my_module)
    rendering = render(gm, color_by="time", values={"linear": 80.0, "add": 20.0})
    assert [item["label"] for item in rendering.legend][-1] == "time 80"
    fills = dict(re.findall(r'id="fx-(\w+)".*?fillcolor="(#\w+)"', rendering.dot.source))
    assert fills["linear"] == rendering.legend[-1]["color"]
    assert fills["x"] == rendering.legend[0]["color"]


def test_diff_marks_and_highlight(my_module):
    gm = fxviz.trace(my_module)
    rendering = render(gm, color_by="diff", marks={"add": "added", "linear": "slower"}, highlight=["relu"])
    source = rendering.dot.source
    assert re.search(r'id="fx-add".*fillcolor="#86efac"', source)
    assert re.search(r'id="fx-linear".*fillcolor="#fca5a5"', source)
    assert re.search(r'id="fx-relu".*penwidth=2.5', source)
    with pytest.raises(ValueError, match="needs marks"):
        render(gm, color_by="diff")


def test_missing_dot_says_how_to_install(my_module, monkeypatch):
    monkeypatch.setattr("fxviz.draw.dot.shutil.which", lambda name: None)
    with pytest.raises(RenderError, match="apt-get install graphviz"):
        render(fxviz.trace(my_module)).svg


def test_slow_layout_is_stopped_with_advice(my_module, monkeypatch):
    def too_slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(cmd="dot", timeout=kwargs["timeout"])

    monkeypatch.setattr("fxviz.draw.dot.run", too_slow)
    with pytest.raises(RenderError, match="longer than 0.5 s.*collapse"):
        render(fxviz.trace(my_module), layout_timeout=0.5).svg


def test_a_module_called_from_several_places_gets_no_box(resnet18):
    # Lowered, torchvision's shared `relu` of each block runs at two distant places.
    gm = fxviz.trace(resnet18, lower=[nn.ReLU])
    clusters = {e["name"] for e in render(gm).elements.values() if e["kind"] == "cluster"}
    assert "layer1.0" in clusters
    assert not any(path.endswith(".relu") for path in clusters)


def test_renderings_lay_out_at_the_same_time_each_once(my_module, monkeypatch):
    """A report lays out its views in parallel threads: one rendering's layout must not
    wait for another's (both reach the barrier only if neither waits for the other), and
    threads asking for one rendering at once lay it out once."""
    import threading

    import fxviz.draw.render as render_module

    barrier, calls = threading.Barrier(2), []  # a layout that waits for the other's: a hang, pytest-timeout's

    def layout(source, **_):
        calls.append(source)
        barrier.wait()
        return "<svg/>"

    def in_threads(renderings):
        results = []
        threads = [threading.Thread(target=lambda r=r: results.append(r.svg)) for r in renderings]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    monkeypatch.setattr(render_module, "layout_svg", layout)
    gm = fxviz.trace(my_module)
    assert in_threads([render(gm), render(gm)]) == ["<svg/>"] * 2 and len(calls) == 2
    one = render(gm)
    barrier = threading.Barrier(1)  # the second thread waits for the first's layout, then reuses it
    assert in_threads([one, one]) == ["<svg/>"] * 2 and len(calls) == 3


def test_a_training_steps_output_says_what_it_holds():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))

    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    graph = fxviz.Session(step, (torch.randn(2, 4), torch.randn(2, 1))).current.graph
    assert graph.nodes["output"]["about"] == "loss, gradients ×4"
    label = re.search(r'id="fx-output" label=<(.*?)> fill', render(graph).dot.source)[1]
    assert "loss, gradients ×4" in label and "scalar" not in label
