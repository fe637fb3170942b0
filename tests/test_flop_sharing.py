"""FLOPs of equal modules are counted once and shared; what makes modules unequal
(a setting, a hook) keeps them apart; the counter's own shape mapping counts as torch's."""
import torch
from torch.utils.flop_counter import FlopCounterMode

import fxviz
import fxviz._torch_internals
import fxviz.annotation.shapes
from fxviz._torch_internals import FlopCounter, flops as flops_module
from fxviz._torch_internals.flops import module_flops


class _Counting(FlopCounter):
    """FlopCounter that notes how often it was entered."""

    entered = 0

    def __enter__(self):
        type(self).entered += 1
        return super().__enter__()


def _flops(model: torch.nn.Module, x: torch.Tensor, monkeypatch) -> tuple[dict, int]:
    """FLOPs per module called, and how many counts were made (under the counter, or by a
    Linear's or a convolution's formula)."""
    _Counting.entered = 0
    by_formula = []
    monkeypatch.setattr(fxviz._torch_internals, "FlopCounter", _Counting)
    monkeypatch.setattr(flops_module, "module_flops", lambda *a: by_formula.append(a) or module_flops(*a))
    gm = fxviz.annotate(fxviz.trace(model), x)
    counts = _Counting.entered + len(by_formula)
    return {n.target: n.meta["flops"] for n in gm.graph.nodes if n.op == "call_module"}, counts


def test_equal_modules_are_counted_once_and_each_gets_the_count(monkeypatch):
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)], torch.nn.Linear(8, 3))
    flops, entered = _flops(model, torch.randn(2, 8), monkeypatch)
    assert [flops[str(i)] for i in range(5)] == [2 * 2 * 8 * 8] * 4 + [2 * 2 * 8 * 3]
    assert entered == 2  # one Linear(8, 8) and the Linear(8, 3)


def test_modules_with_equal_weights_but_other_settings_are_counted_apart(monkeypatch):
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.b = torch.nn.Conv2d(3, 4, 3, padding=1, stride=2)

        def forward(self, x):
            return self.a(x), self.b(x)

    flops, entered = _flops(Two(), torch.randn(1, 3, 8, 8), monkeypatch)
    per_position = 2 * 4 * 3 * 3 * 3
    assert (flops["a"], flops["b"]) == (per_position * 8 * 8, per_position * 4 * 4)
    assert entered == 2


def test_a_module_with_a_hook_is_counted_on_its_own(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    model[1].register_forward_hook(lambda module, args, out: out @ out.T)  # a 2x8 @ 8x2 matmul more
    flops, entered = _flops(model, torch.randn(2, 8), monkeypatch)
    assert flops["0"] == 2 * 2 * 8 * 8
    assert flops["1"] == 2 * 2 * 8 * 8 + 2 * 2 * 2 * 8
    assert entered == 2


def test_the_counter_counts_what_torchs_counts():
    x = torch.randn(2, 3, 8, 8)
    calls = [lambda: torch.nn.functional.linear(torch.randn(4, 5), torch.randn(6, 5), torch.randn(6)),
             lambda: torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
             lambda: torch.baddbmm(torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
             lambda: torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3), stride=2, padding=1),
             lambda: torch.nn.functional.conv_transpose2d(x, torch.randn(3, 2, 3, 3)),
             lambda: torch.nn.functional.conv1d(torch.randn(1, 2, 9), torch.randn(4, 1, 3), groups=2)]
    for call in calls:
        with FlopCounter(display=False) as ours:
            call()
        with FlopCounterMode(display=False) as theirs:
            call()
        assert ours.get_total_flops() == theirs.get_total_flops() > 0


def test_a_torch_nn_class_that_ran_no_counted_operator_is_not_counted_again_on_inputs_of_its_dimensions(monkeypatch):
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norms = torch.nn.ModuleList(torch.nn.BatchNorm2d(c) for c in (2, 3, 5))
            self.one, self.two = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4, bias=False)

        def forward(self, a, b, c, vector, matrix):
            return [norm(x) for norm, x in zip(self.norms, (a, b, c))], self.one(vector), self.two(matrix)

    gm = fxviz.trace(Mixed().eval())
    _Counting.entered = 0
    monkeypatch.setattr(fxviz._torch_internals, "FlopCounter", _Counting)
    fxviz.annotate(gm, (*(torch.randn(1, c, 4, 4) for c in (2, 3, 5)), torch.randn(4), torch.randn(3, 4)))
    flops = {n.target: n.meta["flops"] for n in gm.graph.nodes if n.op == "call_module"}
    assert [flops[f"norms.{i}"] for i in range(3)] == [None] * 3  # not counted, not 0
    assert flops["two"] == 2 * 3 * 4 * 4  # a matrix input is counted, whatever a vector did before
    assert _Counting.entered == 2  # one BatchNorm2d, the Linear on a vector (the one on a matrix: by its formula)


def test_a_linear_or_convolution_is_counted_by_its_formula_as_the_counter_counts_it(monkeypatch):
    """No dispatch mode for torch.nn's Linear and convolutions; an unbatched input, a hook
    or a subclass (it may run more) goes under the counter."""
    calls = [(torch.nn.Linear(8, 5), torch.randn(2, 3, 8)), (torch.nn.Conv1d(4, 6, 3, dilation=2), torch.randn(2, 4, 20)),
             (torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, padding_mode="reflect"), torch.randn(2, 4, 9, 9)),
             (torch.nn.Conv3d(2, 3, 2), torch.randn(1, 2, 4, 4, 4)),
             (torch.nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1), torch.randn(2, 4, 5, 5)),
             (torch.nn.Conv2d(4, 6, 3), torch.randn(4, 9, 9))]
    for module, x in calls:
        flops, counts = _flops(torch.nn.Sequential(module), x, monkeypatch)
        with FlopCounterMode(display=False) as theirs:
            module(x)
        assert flops["0"] == theirs.get_total_flops() > 0 and counts == 1
        assert _Counting.entered == (x.dim() == 3 and type(module) is torch.nn.Conv2d)  # unbatched: the counter's
    hooked = torch.nn.Linear(8, 8)
    hooked.register_forward_pre_hook(lambda module, args: (args[0] @ torch.ones(8, 8),))
    flops, _ = _flops(torch.nn.Sequential(hooked), torch.randn(2, 8), monkeypatch)
    assert flops["0"] == 2 * (2 * 2 * 8 * 8) and _Counting.entered == 1

    class Std(torch.nn.Conv2d):  # as timm's StdConv2d: more operators than its convolution
        def forward(self, x):
            return super().forward(x) + (x.flatten(2) @ x.flatten(2).transpose(1, 2)).sum()

    class Leaves(torch.fx.Tracer):
        def is_leaf_module(self, module, name):
            return isinstance(module, Std) or super().is_leaf_module(module, name)

    model, x = torch.nn.Sequential(Std(4, 4, 3)), torch.randn(1, 4, 6, 6)
    gm = torch.fx.GraphModule(model, Leaves().trace(model))
    monkeypatch.setattr(fxviz._torch_internals, "FlopCounter", _Counting)
    _Counting.entered = 0
    fxviz.annotate(gm, x)
    with FlopCounterMode(display=False) as theirs:
        model(x)
    assert [n.meta["flops"] for n in gm.graph.nodes if n.op == "call_module"] == [theirs.get_total_flops()]
    assert _Counting.entered == 1
