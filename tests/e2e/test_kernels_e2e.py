"""Journey: what inductor made of a model, in JupyterLab at 1600x1000.

A user compiles a conv-bn-relu-linear model with ``fxviz.compiled(..., backend="inductor")``
and opens AOT's forward graph in the compile view. They colour the graph by kernel (the
BatchNorm's arithmetic and the ReLU share one fused kernel's colour, named in the legend),
select the fused ReLU and read its kernel's C++ code in the kernels panel, the ReLU's lines
marked and the nodes fused with it named; then pick the matmul's kernel in the table,
which selects its node, then the fused kernel, whose nodes are outlined together in the
graph, and set eager times beside compiled ones per module. Screenshots:
test-artifacts/e2e-kernels-coloured-{light,dark}.png, e2e-kernels-code-{light,dark}.png,
e2e-kernels-marked-{light,dark}.png.
"""
from __future__ import annotations

import pytest

from labdriver import kernel_json, open_notebook, output_area, poll, run_all, shoot_themes

pytestmark = pytest.mark.e2e

CELL = """\
import json, torch
from torch import nn
import fxviz
from fxviz.widgets.compile_view import CompileExplorer

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))

torch.manual_seed(0)
with torch.no_grad():
    compiled = fxviz.compiled(Net().eval(), torch.randn(8, 3, 16, 16), backend="inductor")
view = CompileExplorer(compiled, part="forward", profile="off")
view"""
FACTS = """print(json.dumps({"relu": next(n for n, a in view.explorer.session.current.graph.nodes(data=True)
                                 if "relu" in str(a["target"])),
                    "kernels": compiled.kernels[["kernel", "kind", "nodes"]].to_dict("records")}))"""


def test_colour_by_kernel_select_a_fused_node_and_read_its_code(desk, lab):
    name = lab.write_notebook("e2e_kernels.ipynb", [CELL])
    open_notebook(desk, lab, name)
    run_all(desk, timeout=400)  # inductor writes and builds C++: tens of seconds
    view = output_area(desk, 0).locator(".fxviz-compile")
    view.locator(".fxviz-graph g.node").first.wait_for(timeout=120_000)
    facts = kernel_json(desk, FACTS)
    relu = facts["relu"]
    fused = next(k for k in facts["kernels"] if relu in k["nodes"])
    assert fused["kind"] == "cpp" and len(fused["nodes"]) >= 3

    panel = view.locator(".fxviz-kernels")
    rows = panel.locator(".fxviz-kernels-table tr.fxviz-tv-row")
    assert rows.count() == len(facts["kernels"])
    assert "kernels" in panel.locator(".fxviz-kernels-summary").inner_text()

    ex = view.locator(".fxviz-explorer")
    ex.locator(".fxviz-gv-select").select_option("kernel")
    legend = ex.locator(".fxviz-gv-legend-label")
    poll("the kernel legend", lambda: fused["kernel"] in legend.all_inner_texts(), timeout=60)
    box = ex.locator(f".fxviz-graph g.node#fx-{relu} polygon, .fxviz-graph g.node#fx-{relu} path").first
    others = [n for n in fused["nodes"] if n != relu and ex.locator(f".fxviz-graph g.node#fx-{n}").count()]
    assert others, "the nodes fused with the ReLU are drawn"
    fill = box.get_attribute("fill")
    partner = ex.locator(f".fxviz-graph g.node#fx-{others[0]} polygon, .fxviz-graph g.node#fx-{others[0]} path")
    assert fill and fill == partner.first.get_attribute("fill"), "fused nodes share their kernel's colour"
    shoot_themes(desk, ex, "e2e-kernels-coloured")

    ex.locator(f".fxviz-graph g.node#fx-{relu}").click()
    code = panel.locator(".fxviz-kernel-code")
    code.locator(".fxviz-kernel-title", has_text=fused["kernel"]).wait_for(timeout=30_000)
    assert code.locator(".hll").count() >= 1, "the ReLU's lines are marked"
    assert f"fused with {relu}" in code.locator(".fxviz-kernel-fused").inner_text()
    assert 'extern "C"' in code.inner_text()
    code.locator(".hll").first.evaluate("line => line.scrollIntoView({block: 'center'})")  # the ReLU's lines in view
    shoot_themes(desk, panel, "e2e-kernels-code")

    matmul = next(k for k in facts["kernels"] if k["kind"] == "extern" and "addmm" in k["kernel"])
    rows.filter(has_text=matmul["kernel"]).first.click()
    poll("the matmul's node selected", lambda: kernel_json(desk, "print(json.dumps(view.explorer.graph.selected))")
         == matmul["nodes"][0], timeout=30)

    outlined = ex.locator(".fxviz-graph g.node.fxviz-marked")
    drawn = {f"fx-{n}" for n in fused["nodes"] if ex.locator(f".fxviz-graph g.node#fx-{n}").count()}
    rows.filter(has_text=fused["kernel"]).first.click()  # the fused kernel: all its nodes outlined together
    poll("the fused kernel's nodes outlined", lambda: set(outlined.evaluate_all("gs => gs.map(g => g.id)")) == drawn,
         timeout=30)
    assert len(drawn) >= 3 and f"fx-{fused['nodes'][0]}" in drawn
    assert "fxviz-selected" in ex.locator(f".fxviz-graph g.node#fx-{fused['nodes'][0]}").get_attribute("class")
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")  # the row's click scrolled the page to the table
    shoot_themes(desk, ex, "e2e-kernels-marked")
    panel.locator(".fxviz-kernels-compare").click()
    modules = panel.locator(".fxviz-kernels-modules table")
    modules.wait_for(timeout=120_000)
    assert {"conv", "bn", "fc"} <= set(modules.locator("tbody tr td:first-child").all_inner_texts())
