"""The Passes tab offers what applies to the graph at hand and says why the rest do not:
every built-in pass on a torch-IR graph, ATen graphs (export, make_fx) and training graphs."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.passes import registry
from fxviz.widgets.panel_passes import PassPanel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.act, self.fc = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Linear(4, 2)

    def forward(self, x):  # something for every pass: a module to lower, an add to replace
        return self.fc(self.act(self.bn(self.conv(x))).mean((2, 3)) + 1)


NET = Net().eval()


def train_step(x):
    return torch.autograd.grad(NET(x).sum(), list(NET.parameters()))


class Loss(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        return self.net(x).pow(2).mean()


TORCH_ONLY, ATEN_ONLY, INFERENCE_ONLY = {"lower_modules", "inline_module"}, {"run_decompositions"}, {"fuse_conv_bn"}
CASES = {  # graph -> the built-in passes that must say why they do not apply
    "symbolic": (lambda: (NET, "symbolic"), ATEN_ONLY),
    "export": (lambda: (NET, "export"), TORCH_ONLY),
    "make_fx": (lambda: (NET, "make_fx"), TORCH_ONLY),
    "dynamo": (lambda: (NET, "dynamo"), ATEN_ONLY),  # torch functions, no module calls: see below
    "make_fx training step": (lambda: (train_step, "make_fx"), TORCH_ONLY | INFERENCE_ONLY),
    "export (joint)": (lambda: (Loss(), "export (joint)"), TORCH_ONLY | INFERENCE_ONLY),
}
BUILT_IN = ("fuse_conv_bn", "lower_modules", "replace_op", "inline_module", "eliminate_dead_code", "channels_last",
            "fake_quantize", "run_decompositions")


@pytest.mark.parametrize("case", CASES)
def test_each_pass_is_offered_or_says_why_not(case):
    """A pass refused for the graph's kind raises PassError with the panel's reason; one with
    nothing to act on is not offered either, and applying it says the same NothingToDo."""
    build, refused = CASES[case]
    model, tracer = build()
    session = fxviz.Session(model, (torch.randn(2, 3, 8, 8),), tracer=tracer, n_random_inputs=0)
    panel = PassPanel(goto=lambda index: None)
    panel.show(session, "")
    for name in BUILT_IN:
        panel.select.value = name
        why = registry.get(name).why_not(session.current.gm)
        assert panel.apply.disabled == (why is not None)
        if why:
            assert f"does not apply: {why}" in panel.doc.value
        nodes = [n.name for n in session.current.gm.graph.find_nodes(op="call_module")[:1]] or None
        try:
            session.apply(name, nodes=nodes if name == "inline_module" else None)
        except registry.NothingToDo as exc:  # the pass's own words, where no parameter changes them
            spec = registry.get(name)
            if why is None:  # a joint graph's BatchNorm is not core ATen: only exporting tells it stays
                assert (case, name) == ("export (joint)", "run_decompositions"), str(exc)
                continue
            assert name not in refused and (str(exc) == why or any(p.choices for p in spec.params)), why
        except fxviz.PassError as exc:
            assert name in refused and "this graph" in str(exc) and str(exc) == f"{why}.", (name, why)
        else:
            assert why is None, (name, why)
            session.undo()
        assert session.index == 0
    if INFERENCE_ONLY <= refused:
        assert "computes gradients" in registry.get("fuse_conv_bn").why_not(session.current.gm)
    if ATEN_ONLY <= refused:
        assert "tracer='export' or 'make_fx'" in registry.get("run_decompositions").why_not(session.current.gm)


@pytest.mark.parametrize("case", ["make_fx training step", "export (joint)"])
def test_passes_that_apply_to_a_training_graph_keep_its_gradients(case):
    model, tracer = CASES[case][0]()
    session = fxviz.Session(model, (torch.randn(2, 3, 8, 8),), tracer=tracer)
    for name in ("channels_last", "run_decompositions", "eliminate_dead_code"):
        try:
            step = session.apply(name)
        except registry.NothingToDo:
            continue
        assert step.check.status == "match", (name, step.check.message)


class NoGradRegion(nn.Module):
    """A no_grad block in forward, as in Hugging Face's rotary embeddings: export wraps it
    in a higher-order operator (wrap_with_set_grad_enabled)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            scale = torch.cos(x).sum()
        return self.lin(x) * scale


def test_an_export_graph_with_a_higher_order_operator_is_aten_level():
    """It was called torch-level, so run_decompositions refused an export graph ('works on
    tracer=export graphs; this graph is torch-level')."""
    session = fxviz.Session(NoGradRegion(), torch.randn(2, 4), tracer="export")
    assert "wrap_with_set_grad_enabled" in {str(n.target) for n in session.current.gm.graph.nodes}
    step = session.apply("run_decompositions")
    assert step.check.status == "match"
    assert {"aten.cos.default", "aten.addmm.default"} <= {str(n.target) for n in step.gm.graph.nodes}


def test_a_dynamo_graph_is_not_offered_passes_that_act_on_module_calls():
    """inline_module was offered on dynamo's graphs, which hold no call_module to select."""
    session = fxviz.Session(NET, (torch.randn(2, 3, 8, 8),), tracer="dynamo", n_random_inputs=0)
    assert not session.current.gm.graph.find_nodes(op="call_module")
    why = registry.get("inline_module").why_not(session.current.gm)
    assert why.startswith("this graph calls no modules")
    assert "no call_module node of a type it lowers" in registry.get("lower_modules").why_not(session.current.gm)
    with pytest.raises(registry.NothingToDo, match="this graph calls no modules"):
        session.apply("inline_module")


def test_the_panel_asks_a_pass_whether_it_applies_once_per_graph(monkeypatch):
    """Asked after every action (tens of ms on a 30k-node graph), answered once per step's graph."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    asked = []

    def double(gm):
        """Double the output."""
        output = gm.graph.find_nodes(op="output")[0]
        with gm.graph.inserting_before(output):
            output.args = (gm.graph.call_function(torch.mul, (output.args[0], 2)),)

    registry.register(double, nothing_to_do=lambda gm: asked.append(gm) or None)
    session = fxviz.Session(NET, (torch.randn(2, 3, 8, 8),), tracer="symbolic", n_random_inputs=0)
    panel = PassPanel(goto=lambda index: None)
    panel.show(session, "")
    for name in ("double", "fuse_conv_bn", "double"):
        panel.select.value = name
    with panel.held():
        pass
    panel.show(session, "")
    assert asked == [session.current.gm]
    session.apply("double")
    panel.show(session, "")
    assert asked == [session.steps[0].gm, session.steps[1].gm] and not panel.apply.disabled
