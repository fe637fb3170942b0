"""What a new user sees first on the models people bring most (issue 28), in JupyterLab
at 1600x1000: a timm model with functional norm layers, a Hugging Face decoder opened by
torch.export, an encoder-decoder called with keywords, a training step and densenet201.

Each first view: no parameter boxes, the inputs on screen (named as the forward names
them), the model's own boxes; Collapse all shows the model's top-level modules by name;
Expand all opens everything or says in the status line what it left closed; the
overview (minimap) shows where you are on a graph larger than the pane; the Weights
button draws the parameters when asked. Screenshots: test-artifacts/e2e-sight-*.png,
light and dark.
"""
from __future__ import annotations

import pytest

from labdriver import assert_no_js_error, kernel_json, open_notebook, output_area, poll, run_all, shoot_themes

pytestmark = pytest.mark.e2e

SETUP = """\
import json, torch, timm, torchvision, transformers, fxviz
torch.manual_seed(0)
def facts(ex):
    g = ex.session.current.graph
    print(json.dumps({"weights": [n for n, a in g.nodes(data=True) if a["weight"]],
                      "inputs": [n for n, a in g.nodes(data=True) if a["op"] == "placeholder" and not a["weight"]],
                      "about": g.nodes["output"].get("about", ""), "method": ex.session.capture.method}))"""
MODELS = {
    "timm": """\
regnet = timm.create_model("regnetx_002", pretrained=False).eval()  # norm layers call F.batch_norm
ex_timm = fxviz.explore(regnet, torch.randn(1, 3, 64, 64), profile="off")
ex_timm""",
    "qwen": """\
qwen = transformers.AutoModel.from_config(transformers.Qwen2Config(
    hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
    vocab_size=128)).eval()
ex_qwen = fxviz.explore(qwen, torch.randint(0, 128, (1, 8)), tracer="export", profile="off")
ex_qwen""",
    "t5": """\
t5 = transformers.T5Model(transformers.T5Config(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
                                                vocab_size=128)).eval()
ex_t5 = fxviz.explore(t5, torch.randint(0, 128, (1, 8)), decoder_input_ids=torch.randint(0, 128, (1, 4)),
                      profile="off")
ex_t5""",
    "step": """\
mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
def train_step(x, y):
    loss = torch.nn.functional.mse_loss(mlp(x), y)
    loss.backward()
    return loss
ex_step = fxviz.explore(train_step, torch.randn(4, 8), torch.randn(4, 1), profile="off")
ex_step""",
    "dense": """\
dense = torchvision.models.densenet201(weights=None).eval()
ex_dense = fxviz.explore(dense, torch.randn(1, 3, 64, 64), profile="off")
ex_dense""",
}
# JS: ids of the drawn FX nodes whose box lies inside the graph's viewport.
IN_VIEW = """(el) => {
  const vp = el.querySelector('.fxviz-gv-viewport').getBoundingClientRect();
  return [...el.querySelectorAll("g.node[id^='fx-']")].filter(g => {
    const r = g.getBoundingClientRect();
    return r.right > vp.left && r.left < vp.right && r.bottom > vp.top && r.top < vp.bottom;
  }).map(g => g.id.slice(3));
}"""


@pytest.fixture(scope="module")
def notebook(desk_page, lab):
    name = lab.write_notebook("e2e_sight.ipynb", [SETUP, *MODELS.values()])
    open_notebook(desk_page, lab, name)
    run_all(desk_page, timeout=400)
    return desk_page


def _explorer(page, key: str):
    ex = output_area(page, 1 + list(MODELS).index(key)).locator(".fxviz-explorer")
    ex.locator(".fxviz-graph g.node").first.wait_for(timeout=60_000)
    ex.scroll_into_view_if_needed()
    return ex


def _click(ex, action: str) -> None:
    """A toolbar button, then wait for the drawing it asks for."""
    svg = ex.locator(".fxviz-graph .fxviz-gv-canvas svg")
    before = svg.evaluate("s => s.outerHTML.length")
    ex.locator(f".fxviz-graph .fxviz-gv-btn[data-action='{action}']").click()
    poll(f"{action} redrawn", lambda: svg.evaluate("s => s.outerHTML.length") != before)


def _collapsed_labels(ex) -> list[str]:
    return ex.locator(".fxviz-graph g.node[id^='fxco-'] text").evaluate_all(
        "ts => ts.filter(t => t.getAttribute('font-weight') === 'bold').map(t => t.textContent)")


@pytest.mark.parametrize("key", list(MODELS))
def test_first_view_shows_the_model_not_its_plumbing(desk, notebook, key):
    ex = _explorer(notebook, key)
    facts = kernel_json(notebook, f"facts(ex_{key})")
    drawn = set(ex.locator(".fxviz-graph").evaluate(IN_VIEW))
    all_drawn = set(ex.locator(".fxviz-graph g.node[id^='fx-']").evaluate_all("gs => gs.map(g => g.id.slice(3))"))
    assert facts["weights"] or key == "dense", facts  # densenet's layers are module calls: no weight nodes
    assert not set(facts["weights"]) & all_drawn, "parameters drawn as boxes"
    assert set(facts["inputs"]) & drawn, f"no input of {facts['inputs']} on screen (drawn: {sorted(drawn)[:12]})"
    if key == "qwen":
        assert facts["inputs"] == ["input_ids"] and facts["method"] == "export"
        assert any(label.startswith("setup · ") for label in _collapsed_labels(ex))  # masks folded away
    if key == "t5":
        assert facts["inputs"] == ["input_ids", "decoder_input_ids"]
    if key == "step":
        assert facts["about"] == "loss, gradients ×4"
        assert "loss, gradients ×4" in ex.locator(".fxviz-graph g.node#fx-output").text_content()
    shoot_themes(notebook, ex, f"e2e-sight-{key}-first")
    assert_no_js_error(notebook)


@pytest.mark.parametrize("key", ["timm", "qwen", "dense"])
def test_collapse_all_names_modules_and_expand_all_says_what_it_left(desk, notebook, key):
    ex = _explorer(notebook, key)
    _click(ex, "collapse-all")
    labels = _collapsed_labels(ex)
    assert labels and not [x for x in labels if x.startswith("nodes ")], labels
    expected = {"timm": "s1 · RegStage", "qwen": "layers · ModuleList", "dense": "features · Sequential"}[key]
    assert expected in labels
    _click(ex, "expand-all")
    status = ex.locator(".fxviz-graph .fxviz-gv-status").inner_text()
    left = ex.locator(".fxviz-graph g.node[id^='fxco-']").count()
    assert (left == 0) or ("Expand all left" in status and "collapsed" in status), (left, status)
    if key == "dense":  # far larger than the pane: the overview says where you are
        minimap = ex.locator(".fxviz-graph .fxviz-gv-minimap")
        minimap.wait_for(state="visible")
        shoot_themes(notebook, ex, "e2e-sight-dense-expanded")


def test_the_weights_button_draws_the_parameters(desk, notebook):
    ex = _explorer(notebook, "timm")
    facts = kernel_json(notebook, "facts(ex_timm)")
    table = ex.locator(".fxviz-node-table")
    rows = lambda: set(table.locator("tr.fxviz-tv-row td:nth-child(2)").all_inner_texts())  # noqa: E731 - names in view
    note = table.locator(".fxviz-tv-hidden")
    # the table lists the weights' rows only with the graph's: under its rows, how many it leaves out
    assert note.is_visible() and note.inner_text().startswith(f"{len(facts['weights'])} weights not listed")
    assert not rows() & set(facts["weights"])
    shoot_themes(notebook, table, "e2e-sight-table-weights-hidden")
    _click(ex, "collapse-all")
    ex.locator(".fxviz-graph .fxviz-gv-btn[data-action='weights'][aria-pressed='false']").wait_for()
    ex.locator(".fxviz-graph .fxviz-gv-btn[data-action='weights']").click()
    ex.locator(".fxviz-graph .fxviz-gv-btn[data-action='weights'][aria-pressed='true']").wait_for()
    _click(ex, "expand-all")
    drawn = set(ex.locator(".fxviz-graph g.node[id^='fx-']").evaluate_all("gs => gs.map(g => g.id.slice(3))"))
    assert set(facts["weights"]) & drawn
    note.wait_for(state="hidden")  # empty: every row listed
    assert rows() & set(facts["weights"])  # regnet's first weights are read by its first ops, in view
    ex.locator(".fxviz-graph .fxviz-gv-btn[data-action='weights']").click()  # back as it was
    ex.locator(".fxviz-graph .fxviz-gv-btn[data-action='weights'][aria-pressed='false']").wait_for()
    note.wait_for(state="visible")


def test_after_fusion_the_two_steps_side_by_side_mark_what_changed(desk, notebook):
    ex = _explorer(notebook, "timm")
    ex.locator(".fxviz-tabs .lm-TabBar-tab", has_text="Passes").click()
    ex.locator(".fxviz-pass-select select").select_option(label="fuse_conv_bn")
    ex.locator("button.fxviz-apply").click()
    ex.locator(".fxviz-step", has_text="step 1 of 1 · fuse_conv_bn").wait_for(timeout=120_000)
    ex.locator(".fxviz-tabs .lm-TabBar-tab", has_text="Timing").click()
    ex.locator("button.fxviz-side-by-side-open").click()
    view = ex.locator(".fxviz-side-by-side")
    summary = view.locator(".fxviz-sbs-summary")
    summary.wait_for()
    text = summary.inner_text()
    assert text.startswith("fuse_conv_bn:") and " changed" in text and " removed" in text, text
    for side in ("a", "b"):
        view.locator(f".fxviz-sbs-{side} g.node").first.wait_for(timeout=60_000)
    legend = view.locator(".fxviz-sbs-a").inner_text()
    assert "removed" in legend and "changed" in legend
    shoot_themes(notebook, view, "e2e-sight-side-by-side")
    view.locator(".fxviz-sbs-close").click()
    view.wait_for(state="hidden")
