"""Session: steps, undo/redo/goto, transactional apply, copy-on-write, replay."""
import copy
import inspect

import networkx as nx
import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from torch import nn

from fxviz import Session
from fxviz.errors import PassError
from fxviz.passes import NothingToDo, register, unregister


def with_bn_stats(model: nn.Module) -> nn.Module:
    """Eval mode with non-trivial BatchNorm statistics, so that a wrong fold shows."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    return model.eval()


def conv_net(seed: int = 0) -> nn.Module:
    """conv -> BN -> ReLU -> pool -> linear."""
    torch.manual_seed(seed)
    return with_bn_stats(nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)
    ))


def x_image() -> torch.Tensor:
    return torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def bit_identical(model: nn.Module, saved: dict[str, torch.Tensor]) -> bool:
    state = model.state_dict()
    return state.keys() == saved.keys() and all(torch.equal(state[k], saved[k]) for k in saved)


def test_step_0_is_the_trace_checked_against_the_model():
    session = Session(conv_net(), x_image())
    step = session.current
    assert (session.index, step.index, step.pass_name, step.nodes) == (0, 0, "trace", ())
    assert step.params["tracer"] == "symbolic"
    assert step.check.status == "match" and step.check.n_inputs == 3
    assert isinstance(step.example_inputs, tuple) and step.example_inputs[0].shape == (2, 3, 8, 8)
    assert "def forward" in step.code and step.preserves_semantics


def test_apply_adds_a_step_with_its_check_and_parameters():
    session = Session(conv_net(), (x_image(),))
    step = session.apply("lower_modules", types=("ReLU", "Flatten"))
    assert session.current is step and step.index == 1
    assert dict(step.params) == {"types": ("ReLU", "Flatten")}
    assert step.check.status == "match"
    assert "torch.nn.functional.relu" in step.code and "torch.nn.functional.relu" not in session.steps[0].code


def test_applying_after_undo_drops_the_redo_tail():
    session = Session(conv_net(), x_image())
    session.apply("fuse_conv_bn")
    session.apply("lower_modules")
    session.undo()
    session.undo()
    assert session.can_redo and session.index == 0
    step = session.apply("fake_quantize")
    assert [s.pass_name for s in session.steps] == ["trace", "fake_quantize"]
    assert step.index == 1 and not session.can_redo


def test_undo_redo_and_goto_refuse_to_leave_the_history():
    session = Session(conv_net(), x_image())
    with pytest.raises(IndexError, match="Nothing to undo: the session is at step 0"):
        session.undo()
    with pytest.raises(IndexError, match="Nothing to redo"):
        session.redo()
    with pytest.raises(IndexError, match="There is no step 3; this session has steps 0 to 0"):
        session.goto(3)
    session.apply("fuse_conv_bn")
    assert session.goto(-2).index == 0 and session.redo().index == 1


class Residual(nn.Module):
    """A conv block with a skip connection: something for every built-in pass."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.skip = nn.Conv2d(3, 4, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.body(x) + self.skip(x)), 1))


# Every built-in pass, with parameters that fit Residual; later ones may find nothing
# left to do (or a node already gone) on some branches.
ACTIONS = [
    ("fuse_conv_bn", {}), ("lower_modules", {"types": ("ReLU",)}), ("lower_modules", {"types": ("AdaptiveAvgPool2d",)}),
    ("channels_last", {}), ("fake_quantize", {"bits": 6}), ("replace_op", {"old": "add", "new": "sub"}),
    ("inline_module", {"nodes": ["fc"]}), ("eliminate_dead_code", {}),
]


class History(RuleBasedStateMachine):
    """Any sequence of passes, undo, redo and goto behaves like an editor's history (a
    list and a cursor), checks stay honest, and the model is never changed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = with_bn_stats(Residual())
        self.saved = snapshot(self.model)
        self.session = Session(self.model, torch.randn(2, 3, 6, 6), n_random_inputs=1)
        self.expected = [("trace", True)]  # (pass name, outputs should match) per step
        self.cursor = 0

    @rule(action=st.sampled_from(ACTIONS))
    def apply(self, action):
        name, params = action
        before = self.session.steps
        try:
            self.session.apply(name, **params)
        except PassError:  # NothingToDo included: nothing changes
            assert self.session.steps == before
            return
        matches = self.expected[self.cursor][1] and name not in ("fake_quantize", "replace_op")
        self.expected[self.cursor + 1 :] = [(name, matches)]
        self.cursor += 1

    @precondition(lambda self: self.cursor > 0)
    @rule()
    def undo(self):
        self.session.undo()
        self.cursor -= 1

    @precondition(lambda self: self.cursor < len(self.expected) - 1)
    @rule()
    def redo(self):
        self.session.redo()
        self.cursor += 1

    @rule(data=st.data())
    def goto(self, data):
        self.cursor = data.draw(st.integers(0, len(self.expected) - 1))
        self.session.goto(self.cursor)

    @invariant()
    def matches_the_editor_model(self):
        steps = self.session.steps
        expected = [(name, "match" if matches else "expected to differ") for name, matches in self.expected]
        assert [(s.pass_name, s.check.status) for s in steps] == expected
        assert [s.index for s in steps] == list(range(len(steps)))
        assert self.session.index == self.cursor and len(self.session.history) == self.cursor
        assert bit_identical(self.model, self.saved)


TestHistory = History.TestCase
TestHistory.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)


def test_a_failing_pass_leaves_the_session_exactly_as_it_was():
    session = Session(conv_net(), x_image())
    session.apply("fuse_conv_bn")
    before = (session.steps, session.index, session.current.code)

    def breaks_on_relu(gm):
        for node in gm.graph.nodes:
            if node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.ReLU):
                node.target = "missing"
                raise RuntimeError("half done")

    with pytest.raises(PassError, match="Pass 'breaks_on_relu' failed at node '_2': RuntimeError: half done"):
        session.apply(breaks_on_relu)
    assert (session.steps, session.index, session.current.code) == before
    assert all(n.target != "missing" for n in session.current.gm.graph.nodes)


def test_a_graph_that_cannot_run_is_refused_naming_the_node():
    def wrong_shape(gm):
        relu = gm.graph.find_nodes(op="call_module", target="2")[0]
        with gm.graph.inserting_after(relu):
            bad = gm.graph.call_function(torch.mm, (relu, relu))
        relu.replace_all_uses_with(bad, delete_user_cb=lambda user: user is not bad)

    session = Session(conv_net(), x_image())
    message = r"after pass 'wrong_shape' cannot run on the example inputs at node 'mm': .*The session is unchanged"
    with pytest.raises(PassError, match=message):
        session.apply(wrong_shape)
    assert len(session.steps) == 1


def test_a_step_makes_its_code_once_and_a_graph_without_code_is_refused(monkeypatch):
    """The copy a pass edits makes no code of its own (seconds at 100k nodes): applying a
    pass generates the code once, for the edited graph; and since that happens during
    apply, a graph whose code cannot be made is refused then, the session unchanged."""
    session = Session(conv_net(), x_image())
    made = []
    real = torch.fx.Graph.python_code
    monkeypatch.setattr(torch.fx.Graph, "python_code", lambda self, *a, **k: made.append(self) or real(self, *a, **k))
    step = session.apply("fuse_conv_bn")
    assert made == [step.gm.graph] and "bn" not in step.code
    # A GraphModule like any other: copies start with its code, and TorchScript takes it.
    assert list(inspect.signature(copy.deepcopy(step.gm).forward).parameters) == ["input"]
    assert torch.jit.script(step.gm)(x_image()).shape == (2, 2)

    class NoCode(torch.fx.CodeGen):
        def gen_fn_def(self, free_vars, maybe_return_annotation):
            raise RuntimeError("no code for this graph")

    def no_code(gm):
        gm.graph.set_codegen(NoCode())

    with pytest.raises(PassError, match="Pass 'no_code' produced an invalid graph: no code for this graph"):
        session.apply(no_code)
    assert session.index == 1 and len(session.steps) == 2


def test_nothing_to_do_creates_no_step():
    session = Session(nn.Sequential(nn.Linear(2, 2)).eval(), torch.randn(1, 2))
    with pytest.raises(NothingToDo, match="no BatchNorm in this graph"):
        session.apply("fuse_conv_bn")
    assert len(session.steps) == 1


@pytest.mark.parametrize("write", [
    lambda w: w.mul_(2),
    lambda w: w.data.mul_(2),  # .data has its own version counter: only storage identity sees it
    lambda w: w[0].zero_(),  # a view
])
def test_a_pass_writing_into_a_shared_tensor_is_refused_before_it_writes(write):
    def scale_in_place(gm):
        with torch.no_grad():
            write(gm.get_submodule("0").weight)
        return gm

    model = nn.Sequential(nn.Linear(2, 2))
    saved = snapshot(model)
    session = Session(model, torch.randn(1, 2))
    with pytest.raises(PassError, match=r"Pass 'scale_in_place' failed.*write in place into '0.weight'"):
        session.apply(scale_in_place)
    assert len(session.steps) == 1
    assert bit_identical(model, saved)


def test_training_mode_models_cannot_be_fused_and_keep_their_buffers():
    model = conv_net().train()
    saved = snapshot(model)
    session = Session(model, x_image())
    assert session.current.check.status == "match"
    with pytest.raises(PassError, match="needs eval mode"):
        session.apply("fuse_conv_bn")
    session.apply("lower_modules")
    assert bit_identical(model, saved)


def test_the_model_is_bit_identical_after_any_sequence_of_passes(resnet18, small_image):
    saved = snapshot(resnet18)
    session = Session(resnet18, small_image[..., :32, :32], n_random_inputs=0)
    session.apply("fuse_conv_bn")
    session.apply("lower_modules", types=("ReLU", "MaxPool2d"))
    session.apply("channels_last")
    session.undo()
    session.apply("fake_quantize", bits=4)
    session.apply("replace_op", old="add", new="sub")
    session.apply("inline_module", nodes=["avgpool"])
    session.goto(1)
    assert bit_identical(resnet18, saved)
    assert [s.check.status for s in session.steps] == ["match", "match", "match", "expected to differ",
                                                       "expected to differ", "expected to differ"]


class CachesItsBias(nn.Module):
    """timm's efficientvit_m0: in eval mode the attention bias is cached per device, in a
    dict the forward fills in; a branch symbolic tracing cannot take sends auto to export."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(3))
        self.cache = {}

    def forward(self, x):
        if x.shape[0] > 1:  # symbolic fails here (its sizes are proxies); export does not
            x = x * 2
        if str(x.device) not in self.cache:
            self.cache[str(x.device)] = self.bias * 1
        return x + self.cache[str(x.device)]


def test_a_cache_the_forward_fills_in_stays_the_users_own():
    model = CachesItsBias().eval()
    session = Session(model, torch.randn(2, 3))
    assert session.capture.method == "export" and session.current.check.status == "match"
    assert model.cache == {}  # export's fake tensors went into a dict of the model itself
    torch.testing.assert_close(model(torch.ones(2, 3)), 2 + model.bias.detach().expand(2, 3))


def test_steps_share_every_tensor_a_pass_did_not_replace():
    model = conv_net()
    session = Session(model, x_image())
    lowered = session.apply("lower_modules")
    fused = session.apply("fuse_conv_bn")
    step0 = session.steps[0].gm
    assert lowered.gm.get_submodule("0") is not step0.get_submodule("0")  # own module objects
    assert lowered.gm.get_submodule("0").weight is model[0].weight  # shared tensors
    assert fused.gm.get_submodule("5").weight is model[5].weight
    assert fused.gm.get_submodule("0").weight is not model[0].weight  # replaced by the fusion


def test_semantics_changing_steps_and_their_successors_are_expected_to_differ():
    session = Session(conv_net(), x_image())
    changed = session.apply("fake_quantize")
    after = session.apply("lower_modules")
    assert not changed.preserves_semantics and after.preserves_semantics
    assert changed.check.status == after.check.status == "expected to differ"
    assert changed.check.max_abs > 0


def test_a_channels_last_step_carries_its_own_example_inputs():
    session = Session(conv_net(), x_image())
    step = session.apply("channels_last")
    assert step.example_inputs[0].is_contiguous(memory_format=torch.channels_last)
    assert session.steps[0].example_inputs[0].is_contiguous()
    assert step.check.status == "match"
    assert session.apply("fuse_conv_bn").example_inputs[0] is step.example_inputs[0]


def test_history_replays_on_another_model():
    session = Session(conv_net(seed=0), x_image())
    session.apply("lower_modules", types=("ReLU",))
    session.apply("fuse_conv_bn", nodes=["_0"])
    assert [(a.pass_name, dict(a.params), a.nodes) for a in session.history] == [
        ("lower_modules", {"types": ("ReLU",)}, ()), ("fuse_conv_bn", {}, ("_0",))
    ]
    other = conv_net(seed=1)
    replayed = session.replay(other)
    assert [s.pass_name for s in replayed.steps] == ["trace", "lower_modules", "fuse_conv_bn"]
    assert replayed.current.code == session.current.code
    assert replayed.current.check.status == "match"
    assert not torch.equal(replayed.current.gm(x_image()), session.current.gm(x_image()))


def test_a_registered_user_pass_behaves_like_a_built_in():
    @register(name="double_output", preserves_semantics=False)
    def double_output(gm):
        output = gm.graph.find_nodes(op="output")[0]
        with gm.graph.inserting_before(output):
            output.args = (gm.graph.call_function(torch.mul, (output.args[0], 2.0)),)

    try:
        session = Session(conv_net(), x_image())
        step = session.apply("double_output")
        assert step.check.status == "expected to differ"
        assert torch.allclose(step.gm(x_image()), 2 * session.steps[0].gm(x_image()))
        assert session.replay(conv_net(seed=2)).current.pass_name == "double_output"
    finally:
        unregister("double_output")


def test_subscribers_hear_every_change_but_not_a_failed_apply():
    session = Session(conv_net(), x_image())
    seen = []
    unsubscribe = session.subscribe(lambda s: seen.append(s.index))
    session.apply("fuse_conv_bn")
    session.undo()
    session.redo()
    session.goto(0)
    with pytest.raises(NothingToDo):
        session.apply("eliminate_dead_code")
    unsubscribe()
    session.goto(1)
    assert seen == [1, 0, 1, 0]


def test_step_graph_is_annotated_without_touching_the_steps_graph():
    session = Session(conv_net(), x_image())
    step = session.apply("fuse_conv_bn")
    graph = step.graph
    assert isinstance(graph, nx.DiGraph) and graph is step.graph
    assert list(graph.nodes) == [n.name for n in step.gm.graph.nodes]
    assert graph.nodes["_0"]["shape"] is not None
    assert all("tensor_meta" not in n.meta for n in step.gm.graph.nodes)


def test_step_profile_is_computed_once_per_arguments():
    session = Session(conv_net(), x_image())
    step = session.current
    table = step.profile(warmup=1, repeats=3)
    assert step.profile(warmup=1, repeats=3) is table
    assert list(table["node"]) == [n.name for n in step.gm.graph.nodes]


def test_compare_gives_the_comparison_of_two_steps():
    session = Session(conv_net(), x_image())
    session.apply("fuse_conv_bn")
    diff = session.compare(0, 1).graph_diff.set_index("node")["status"]
    assert (diff["_1"], diff["_0"]) == ("removed", "changed")  # the BN went, the conv got its weights


class _CountingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


def test_the_check_runs_on_first_use_and_drawing_needs_one_run():
    model = _CountingModel()
    session = Session(model, torch.randn(2, 4))
    step = session.current
    assert not step.check_done
    assert step.graph.nodes["fc"]["shape"] == (2, 4)  # drawn from the one annotated run
    assert step.check.status == "match" and step.check.n_inputs == 3
    assert step.check_done and "check pending" not in repr(step)


def _only_ones(t):
    if not torch.all(t == 1):
        raise RuntimeError("this graph only accepts ones")
    return t


def test_a_graph_that_fails_only_on_random_inputs_is_a_mismatch():
    def gate_input(gm, *, nodes=None):
        x = next(n for n in gm.graph.nodes if n.op == "placeholder")
        with gm.graph.inserting_after(x):
            gate = gm.graph.call_function(_only_ones, (x,))
        x.replace_all_uses_with(gate, delete_user_cb=lambda user: user is not gate)
        return gm

    session = Session(nn.Linear(4, 4), torch.ones(2, 4))
    step = session.apply(gate_input)  # runs on the example inputs, so the step exists
    assert step.check.status == "mismatch"
    assert "fails on a random input" in step.check.message and "only accepts ones" in step.check.message


def test_step_profiles_carry_the_flops_of_the_annotated_graph():
    session = Session(nn.Linear(4, 5), torch.randn(3, 4))
    table = session.current.profile(warmup=1, repeats=3).set_index("node")
    assert table.at["linear", "flops"] == 2 * 3 * 4 * 5
    assert table.at["linear", "gflops"] > 0


def test_the_check_compares_the_model_as_it_is_when_checked():
    model = nn.Linear(4, 4)
    session = Session(model, torch.randn(2, 4))
    with torch.no_grad():
        model.weight.add_(1.0)  # e.g. a training step between tracing and checking
    assert session.current.check.status == "match"


def test_a_session_over_a_plain_function_checks_and_cleans_up():
    from torch.func import hessian

    x = torch.randn(3)
    session = Session(hessian(lambda t: t.sin().sum()), (x,), tracer="make_fx")
    cleaned = session.apply("eliminate_dead_code")
    assert cleaned.check.status == "match"
    assert len(cleaned.gm.graph.nodes) < len(session.steps[0].gm.graph.nodes)
    torch.testing.assert_close(cleaned.gm(x), torch.diag(-x.sin()))


def test_a_steps_graph_is_built_once_on_first_use_even_from_two_threads():
    """Applying passes headless never builds networkx graphs; the first reader (a drawing,
    a profiler thread) builds it once, with the shapes the annotated run noted."""
    import threading

    from collections import OrderedDict

    session = Session(nn.Sequential(OrderedDict(lin=nn.Linear(3, 4), act=nn.ReLU())), (torch.randn(2, 3),))
    step = session.current
    assert "_graph" not in step.__dict__ and "lin" in step._notes
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(step.graph)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in seen}) == 1 and seen[0] is step.graph
    assert step.graph.nodes["lin"]["shape"] == (2, 4) and not step._notes
