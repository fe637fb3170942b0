import operator

import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import TraceError
from fxviz.capture.info import graph_info


def paths(gm):
    return {n.name: n.meta.get("module_path") for n in gm.graph.nodes}


def test_resnet18_has_71_nodes_and_the_tutorial_module_paths(resnet18):
    gm = fxviz.trace(resnet18)
    p = paths(gm)
    assert len(p) == 71
    assert p["conv1"] == "conv1"
    assert p["add"] == "layer1.0"
    assert p["layer2_0_downsample_0"] == "layer2.0.downsample.0"
    assert p["flatten"] == ""
    assert p["output"] is None
    assert "module_path" in gm.graph.output_node().meta


def test_trace_shares_tensors_and_keeps_class_names(resnet18):
    gm = fxviz.trace(resnet18)
    assert gm.get_submodule("layer1.0.conv1").weight is resnet18.layer1[0].conv1.weight
    assert graph_info(gm).module_types["layer1.0"] == "BasicBlock"


class ReluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.fc(x))


def test_lowering_relu_gives_a_functional_call_with_inplace_false():
    gm = fxviz.trace(ReluNet(), lower=[nn.ReLU])
    (relu,) = [n for n in gm.graph.nodes if n.name.startswith("relu")]
    assert relu.op == "call_function"
    assert relu.target is torch.nn.functional.relu
    assert relu.kwargs["inplace"] is False
    assert relu.meta["module_path"] == "act"


def test_lowering_by_type_name_and_leaf_by_path(resnet18):
    gm = fxviz.trace(resnet18, lower=["ReLU"], leaf_modules=["layer1.0"])
    ops = {n.name: n.op for n in gm.graph.nodes}
    assert ops["layer1_0"] == "call_module"
    assert ops["relu"] == "call_function"


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.branch = Branchy()

    def forward(self, x):
        return self.branch(self.lin(x)) + 1


def test_untraceable_model_names_module_line_and_fixes():
    model = Outer()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(TraceError, match=r"(?s)module .branch. \(Branchy\).*test_trace.py:\d+.*x.sum\(\) > 0") as info:
        fxviz.trace(model)
    message = str(info.value)
    assert "leaf_modules=['branch']" in message and "concrete_args" in message and "torch.fx.wrap" in message
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_fallback_makes_failing_submodule_a_leaf_and_reports_it():
    model = Outer()
    gm = fxviz.trace(model, fallback=True)
    assert graph_info(gm).leaves_added == ["branch"]
    assert [n.op for n in gm.graph.nodes if n.name == "branch"] == ["call_module"]
    x = torch.randn(2, 3)
    torch.testing.assert_close(gm(x), model(x))


def test_untraceable_top_level_suggests_make_fx():
    with pytest.raises(TraceError, match="(?s)top-level module.*make_fx"):
        fxviz.trace(Branchy(), fallback=True)


def test_make_fx_traces_functions_and_torch_func_transforms():
    from torch.func import hessian, jacrev, vmap

    x = torch.randn(3)
    jac = fxviz.trace(lambda t: jacrev(torch.sin)(t), x, tracer="make_fx")
    torch.testing.assert_close(jac(x), torch.diag(torch.cos(x)))
    hess = fxviz.trace(lambda t: hessian(lambda u: u.pow(3).sum())(t), x, tracer="make_fx")
    torch.testing.assert_close(hess(x), torch.diag(6 * x))
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    batched = fxviz.trace(vmap(torch.dot), (a, b), tracer="make_fx")
    torch.testing.assert_close(batched(a, b), (a * b).sum(1))
    assert all(str(n.target).startswith("aten.") for n in batched.graph.nodes if n.op == "call_function")


def test_make_fx_records_module_paths_for_modules_and_training_steps(resnet18):
    x = torch.randn(1, 3, 32, 32)
    gm = fxviz.trace(resnet18, x, tracer="make_fx")
    conv_paths = {n.meta["module_path"] for n in gm.graph.nodes if "convolution" in str(n.target)}
    assert "layer2.0.downsample.0" in conv_paths

    def step(inp):
        return torch.autograd.grad(resnet18(inp).sum(), [resnet18.fc.weight])

    train = fxviz.trace(step, x, tracer="make_fx", module=resnet18)
    assert "fc" in {n.meta["module_path"] for n in train.graph.nodes}
    (grad,) = train(x)
    torch.testing.assert_close(grad, step(x)[0])


def test_bad_tracer_and_missing_inputs_are_clear_errors():
    with pytest.raises(TraceError, match="Unknown tracer"):
        fxviz.trace(ReluNet(), tracer="jit")
    with pytest.raises(TraceError, match="pass example_inputs"):
        fxviz.trace(ReluNet(), tracer="make_fx")
    with pytest.raises(TraceError, match="needs an nn.Module"):
        fxviz.trace(operator.neg)


def test_custom_tracer_subclass_is_honoured():
    class TaggingTracer(torch.fx.Tracer):
        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.tag = "seen"
            return node

    gm = fxviz.trace(ReluNet(), tracer=TaggingTracer)
    assert all(getattr(n, "tag", None) == "seen" for n in gm.graph.nodes)
    assert {n.meta.get("module_path") for n in gm.graph.nodes if n.op != "output"} == {"", "fc", "act"}


def test_tracing_adds_nothing_to_the_model():
    class MakesConstants(nn.Module):
        def forward(self, x):
            return x + torch.tensor([1.0, 2.0, 3.0])

    model = MakesConstants()
    before = set(vars(model))
    gm = fxviz.trace(model)
    assert set(vars(model)) == before
    torch.testing.assert_close(gm(torch.zeros(3)), torch.tensor([1.0, 2.0, 3.0]))


def test_the_collector_is_paused_while_tracing_and_back_after_a_failure():
    """Tracing 30k nodes spent a third of its time in collections that rescan the nodes
    made so far; after the capture, failed or not, the collector runs again."""
    import gc

    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(gc.isenabled())
            if len(seen) > 1:
                raise ValueError("fails on the second trace")
            return x + 1

    assert gc.isenabled()
    fxviz.trace(Probe(), torch.randn(2), tracer="symbolic")
    with pytest.raises(TraceError, match="Probe itself fails"):
        fxviz.trace(Probe(), torch.randn(2), tracer="symbolic")
    # the third call: the failed capture runs the model as is, to tell its own failure from the tracer's
    assert seen == [False, False, False] and gc.isenabled()


def test_pauses_of_the_collector_from_two_threads_end_with_the_last_one():
    """The kernel's thread captures while the worker's times a profile: the collector is
    back on only when both are done, and stays off if the user had turned it off."""
    import gc
    import threading

    from fxviz.background._gc import gc_paused

    entered, leave = threading.Event(), threading.Event()

    def worker():
        with gc_paused():
            entered.set()
            leave.wait()

    thread = threading.Thread(target=worker)
    with gc_paused():
        thread.start()
        entered.wait()
    assert not gc.isenabled()  # the kernel's pause ended, the worker's goes on
    leave.set()
    thread.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_torch_compiled_model_or_function_opens_as_what_it_wraps():
    """torch.compile's wrapper would run dynamo inside the capture (it failed with a
    RecursionError, reported as the model failing on its inputs)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    x = torch.randn(1, 3, 8, 8)
    gm = fxviz.trace(torch.compile(model), x)
    assert type(gm).__name__ == "Sequential" and paths(gm)["_0"] == "0"
    session = fxviz.Session(torch.compile(model), x)
    assert session.capture.method == "symbolic" and session.current.check.status == "match"
    step = fxviz.Session(torch.compile(lambda x: model(x).sum()), x)
    assert step.capture.method == "make_fx" and step.current.check.status == "match"
    assert "0" in {d["module_path"] for _, d in step.current.graph.nodes(data=True)}
