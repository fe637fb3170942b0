"""Where a step goes wrong, and memory, as a person finds them in JupyterLab at 1600x1000
(issue 30): a user's pass slips an error in after one conv; the step's badge says
"mismatch" and its "show where" selects the first node past the check's tolerance,
whose Details say how much error it introduced and how much it carried in; the graph
coloured by error, then by memory (legends with their units); the Memory tab's chart,
its peak selectable. Screenshots: test-artifacts/e2e-numerics-*.png, light and dark.
"""
from __future__ import annotations

import re

import pytest

from labdriver import action_done, assert_no_js_error, kernel_json, open_notebook, output_area, run_all, shoot_themes

pytestmark = pytest.mark.e2e

SETUP = """\
import json, operator, torch
from torch import nn
import fxviz

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(32, 10)

    def forward(self, x):
        x = self.bn1(self.conv1(x)).relu()
        x = self.bn2(self.conv2(x)).relu()
        return self.fc(self.pool(x).flatten(1))

@fxviz.passes.register
def slip_after_conv1(gm, scale: float = 1.01):
    "A pass with a bug: conv1's users read conv1 * scale."
    conv = next(n for n in gm.graph.nodes if n.name == "conv1")
    with gm.graph.inserting_after(conv):
        wrong = gm.graph.call_function(operator.mul, (conv, scale))
    conv.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
    gm.recompile()
    return gm

torch.manual_seed(0)
ex = fxviz.explore(Net().eval(), torch.randn(1, 3, 32, 32), profile="off")
ex"""
TRAINING = """\
mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
def train_step(x, y):
    loss = nn.functional.mse_loss(mlp(x), y)
    loss.backward()
    return loss

@fxviz.passes.register
def slip_after_relu(gm, scale: float = 1.01):
    "A pass with a bug: the first ReLU's users read it times scale."
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    with gm.graph.inserting_after(relu):
        wrong = gm.graph.call_function(operator.mul, (relu, scale))
    relu.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
    gm.recompile()
    return gm

ex_step = fxviz.explore(train_step, torch.randn(4, 8), torch.randn(4, 1), profile="off")
ex_step.session.apply("slip_after_relu")
ex_step"""


@pytest.fixture(scope="module")
def explorer(desk_page, lab):
    name = lab.write_notebook("e2e_numerics.ipynb", [SETUP, TRAINING])
    open_notebook(desk_page, lab, name)
    run_all(desk_page, timeout=180)
    ex = output_area(desk_page, 0).locator(".fxviz-explorer")
    ex.locator(".fxviz-graph g.node#fx-conv1").wait_for(timeout=60_000)
    return ex


def _open_tab(ex, title: str) -> None:
    ex.locator(".fxviz-tabs .lm-TabBar-tab", has_text=title).click()
    ex.locator(".fxviz-tabs .lm-TabBar-tab.lm-mod-current", has_text=title).wait_for()


def _colour_by(ex, mode: str, title: str) -> list[str]:
    """Choose a colour mode; wait for its legend's heading; its labels."""
    ex.locator(".fxviz-gv-select").select_option(mode)
    ex.locator(".fxviz-gv-legend-title", has_text=title).wait_for(timeout=60_000)
    return ex.locator(".fxviz-gv-legend-label").all_inner_texts()


def test_the_mismatch_badge_leads_to_where_the_error_starts(desk, explorer):
    ex = explorer
    assert not ex.locator("button.fxviz-show-where").is_visible()  # step 0 matches itself
    _open_tab(ex, "Passes")
    ex.locator(".fxviz-pass-select select").select_option(label="slip_after_conv1")
    ex.locator("button.fxviz-apply").click()
    ex.locator(".fxviz-step", has_text="step 1 of 1 · slip_after_conv1").wait_for(timeout=60_000)
    action_done(ex)
    ex.locator(".fxviz-header .fxviz-badge .fxviz-badge-mismatch").wait_for(timeout=60_000)
    ex.locator("button.fxviz-show-where").click()
    ex.locator(".fxviz-graph g.node#fx-bn1.fxviz-selected").wait_for(timeout=60_000)
    _open_tab(ex, "Details")
    error = ex.locator(".fxviz-details .fxviz-details-error")
    error.wait_for()
    shown = error.inner_text()
    facts = kernel_json(ex.page, "rows = ex.session.compare(0, 1).numerics.set_index('node'); "
                                 "print(json.dumps({k: float(rows.at['bn1', k]) for k in ('max_rel', 'introduced')}))")
    assert "Error vs step 0" in shown and "the first node beyond the check's tolerance" in shown, shown
    assert f"{facts['introduced']:.3g} (run on step 0's values of its inputs)" in shown, (shown, facts)
    assert "carried in" in shown and "input mul added by the pass" in shown, shown
    assert "the error comes in through mul, which the pass added" in shown, shown
    assert "tolerance against step 0: bn1 (Details" in ex.locator(".fxviz-status").inner_text()
    # The node table's error column: bn1's row holds its relative error.
    header = ex.locator(".fxviz-node-table th", has_text="error vs step 0")
    header.wait_for()
    row = ex.locator(".fxviz-node-table tr.fxviz-tv-selected td").last
    assert float(row.inner_text()) == pytest.approx(facts["max_rel"], rel=0.05)
    shoot_themes(ex.page, ex, "e2e-numerics-show-where")
    _open_tab(ex, "Passes")  # the step history: the slipped step's badge, with its own way there
    history = ex.locator(".fxviz-history")
    assert history.locator("button.fxviz-history-where").count() == 1
    assert history.locator(".fxviz-badge-mismatch").count() == 1
    shoot_themes(ex.page, ex.locator(".fxviz-tabs"), "e2e-numerics-history")
    _open_tab(ex, "Details")


def test_colour_by_error_then_memory_with_units_and_the_memory_tab(desk, explorer):
    ex = explorer
    labels = _colour_by(ex, "error", "relative error")
    assert labels[0] == "not compared (no counterpart)" and float(labels[-1]) > 1e-3, labels  # mul; the worst
    against = ex.locator(".fxviz-error-against select")  # the step the errors are against, shown with them
    against.wait_for()
    assert [t.replace("\xa0", " ") for t in against.locator("option").all_inner_texts()] == ["previous (step 0)"]
    ex.locator(".fxviz-graph g.node#fx-conv2").click()
    ex.locator(".fxviz-details .fxviz-details-error", has_text="beyond the check's tolerance").wait_for()
    shoot_themes(ex.page, ex, "e2e-numerics-colour-error")

    labels = _colour_by(ex, "memory", "bytes")
    assert len(labels) >= 2 and all(re.fullmatch(r"[\d.]+ (B|kB|MB)", t) for t in labels), labels
    _open_tab(ex, "Memory")
    chart = ex.locator(".fxviz-memory-chart svg")
    chart.wait_for(timeout=60_000)
    peak = kernel_json(ex.page, "print(json.dumps(ex.session.current.memory.attrs['peak_node']))")
    summary = ex.locator(".fxviz-memory-summary").inner_text()
    assert f"at {peak}" in summary and "Against step 0: peak" in summary, summary
    ex.locator("button.fxviz-memory-peak").click()
    ex.locator(f".fxviz-graph g.node#fx-{peak}.fxviz-selected").wait_for()
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")  # its header at the top: the whole of it in the picture
    shoot_themes(ex.page, ex, "e2e-numerics-memory")
    _open_tab(ex, "Details")
    assert "alive after it" in ex.locator(".fxviz-details .fxviz-details-memory").inner_text()
    assert_no_js_error(ex.page)


def test_a_training_step_says_whose_gradient_diverges_first(desk, explorer):
    ex = output_area(explorer.page, 1).locator(".fxviz-explorer")
    ex.scroll_into_view_if_needed()
    ex.locator(".fxviz-header .fxviz-badge .fxviz-badge-mismatch").wait_for(timeout=60_000)
    ex.locator("button.fxviz-show-where").click()
    ex.locator(".fxviz-status", has_text="Gradients: 4 of 4 beyond the check's tolerance").wait_for(timeout=60_000)
    ex.locator(".fxviz-graph g.node#fx-output").click()
    table = ex.locator(".fxviz-details .fxviz-details-gradients")
    table.wait_for()
    first = kernel_json(ex.page, "g = ex_step.step_error.rows(ex_step.session.current).attrs['gradients']; "
                                 "print(json.dumps(str(g[g['diverged']].iloc[0]['parameter'])))")
    assert f"{first} (first to diverge)" in table.inner_text()
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")
    shoot_themes(ex.page, ex, "e2e-numerics-gradients")
