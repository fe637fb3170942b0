"""The end-to-end plumbing itself: a notebook opened in headless JupyterLab runs on the
venv's kernel, and clicks in the browser reach that kernel, for ipywidgets, for a plain
anywidget and for fxviz's GraphView (an SVG node click selects that FX node in Python).

If these fail, the Explorer test cannot pass either; they say which layer broke.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from labdriver import (JS_ERROR_TEXT, LabError, assert_no_js_error, open_notebook, output_area,
                       run_all, shoot_themes)

pytestmark = pytest.mark.e2e

WIDGETS_NB = [
    """\
import os, sys
import anywidget, ipywidgets as w, traitlets
print("kernel python:", sys.executable)""",
    """\
label = w.Label("not pressed")
label.add_class("e2e-label")
button = w.Button(description="Press me")
button.add_class("e2e-button")
button.on_click(lambda _: setattr(label, "value", f"pressed; kernel pid {os.getpid()}"))
display(w.VBox([button, label]))""",
    """\
class Counter(anywidget.AnyWidget):
    _esm = '''
    export default { render({ model, el }) {
      const b = document.createElement("button");
      b.className = "e2e-counter";
      const show = () => { b.textContent = "count " + model.get("count"); };
      b.addEventListener("click", () => { model.set("count", model.get("count") + 1); model.save_changes(); });
      model.on("change:count", show);
      show();
      el.append(b);
    } }'''
    count = traitlets.Int(0).tag(sync=True)

counter = Counter()
seen = w.Label("kernel saw count 0")
seen.add_class("e2e-seen")
counter.observe(lambda ch: setattr(seen, "value", f"kernel saw count {ch['new']}"), "count")
display(counter, seen)""",
]


def test_clicks_reach_the_venv_kernel(lab, page):
    name = lab.write_notebook("e2e_widgets.ipynb", WIDGETS_NB)
    open_notebook(page, lab, name)
    run_all(page)

    printed = output_area(page, 0)
    printed.get_by_text("kernel python:").wait_for()
    assert f"kernel python: {sys.executable}" in printed.inner_text()

    label = page.locator(".e2e-label")
    assert label.inner_text() == "not pressed"
    page.locator("button.e2e-button").click()
    page.locator(".e2e-label", has_text="pressed; kernel pid").wait_for()

    page.locator("button.e2e-counter", has_text="count 0").click()
    page.locator("button.e2e-counter", has_text="count 1").wait_for()
    page.locator(".e2e-seen", has_text="kernel saw count 1").wait_for()
    assert_no_js_error(page)


GRAPH_NB = [
    """\
import torch
from torch import nn
import ipywidgets as w
import fxviz
from fxviz.draw.render import render
from fxviz.widgets.graph_view import GraphView

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) + 1

gm = fxviz.trace(Block().eval(), (torch.randn(1, 3, 8, 8),))
r = render(gm)
records = fxviz.to_networkx(gm).nodes(data=True)
nodes = {name: {key: str(rec.get(key) or "") for key in ("op", "target", "module_path", "shape", "time")}
         for name, rec in records}
view = GraphView(svg=r.svg, elements=r.elements, legend=r.legend, nodes=nodes)
picked = w.Label("kernel selected: (none)")
picked.add_class("e2e-picked")
view.observe(lambda ch: setattr(picked, "value", f"kernel selected: {ch['new'] or '(none)'}"), "selected")
display(w.VBox([view, picked]))""",
]


def test_graph_view_click_selects_the_node_in_the_kernel(lab, page):
    name = lab.write_notebook("e2e_graph_view.ipynb", GRAPH_NB)
    open_notebook(page, lab, name)
    run_all(page)

    bn = page.locator("g.node#fx-bn")
    bn.wait_for()
    assert page.locator("g.node#fx-conv").count() == 1
    bn.click()
    page.locator(".e2e-picked", has_text="kernel selected: bn").wait_for()
    page.locator("g.node#fx-bn.fxviz-selected").wait_for()

    page.locator("g.node#fx-relu").click()
    page.locator(".e2e-picked", has_text="kernel selected: relu").wait_for()
    assert page.locator("g.node#fx-bn.fxviz-selected").count() == 0
    assert_no_js_error(page)

    shots = shoot_themes(page, output_area(page, 0), "e2e-graph-view")
    assert all(Path(p).stat().st_size > 0 for p in shots)


BROKEN_NB = [
    """\
import ipywidgets as w, traitlets

class Broken(w.DOMWidget):
    _view_name = traitlets.Unicode("BrokenView").tag(sync=True)
    _view_module = traitlets.Unicode("fxviz-no-such-module").tag(sync=True)
    _view_module_version = traitlets.Unicode("1.0.0").tag(sync=True)

Broken()""",
]


def test_the_javascript_error_guard_catches_a_broken_widget(lab, page):
    """The guard every e2e test relies on does fail on a widget that cannot render."""
    name = lab.write_notebook("e2e_broken_widget.ipynb", BROKEN_NB)
    open_notebook(page, lab, name)
    run_all(page)
    page.get_by_text(JS_ERROR_TEXT).wait_for()
    with pytest.raises(LabError, match="fxviz-no-such-module"):
        assert_no_js_error(page)
    page.goto("about:blank")  # the `page` fixture checks the page again when the test ends
