import subprocess
import sys
from typing import Any

import torch
from torch import nn

import fxviz
import fxviz.timing.aten_breakdown
from fxviz.annotation.shapes import annotated_run


def test_channels_last_strides_and_memory_format(resnet18):
    x = torch.randn(10, 3, 16, 16).to(memory_format=torch.channels_last)
    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(resnet18), x))
    assert g.nodes["x"]["stride"] == (768, 1, 48, 3)
    assert g.nodes["x"]["memory_format"] == "channels_last"
    assert g.nodes["conv1"]["memory_format"] == "channels_last"
    assert g.nodes["flatten"]["memory_format"] == "contiguous"


def test_conv_flops_match_the_formula(resnet18, small_image):
    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(resnet18), small_image))
    # conv1: 64 out channels, 3x7x7 kernel, 32x32 output positions, 2 FLOPs per MAC
    assert g.nodes["conv1"]["macs"] == 64 * 3 * 7 * 7 * 32 * 32
    assert g.nodes["conv1"]["flops"] == 2 * g.nodes["conv1"]["macs"]
    assert g.nodes["relu"]["flops"] is None and g.nodes["relu"]["macs"] is None  # not counted is not zero


def test_ops_without_a_flop_formula_are_not_counted_and_bytes_moved_are(resnet18, small_image):
    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(resnet18), small_image))
    for name in ("bn1", "relu", "maxpool", "add", "x", "output"):
        assert g.nodes[name]["flops"] is None, name
    assert g.nodes["fc"]["flops"] == 2 * 512 * 1000 * small_image.shape[0]
    # bn1 reads its 1x64x32x32 input, 4 float vectors of 64 and an int64 counter; writes 1x64x32x32
    batch = small_image.shape[0]
    assert g.nodes["bn1"]["bytes"] == 4 * (2 * batch * 64 * 32 * 32 + 4 * 64) + 8
    # layer1's first add reads two 1x64x16x16 tensors and writes one
    assert g.nodes["add"]["bytes"] == 4 * 3 * batch * 64 * 16 * 16
    assert g.nodes["x"]["bytes"] is None


def test_annotate_restores_training_mode_batchnorm_statistics():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fxviz.annotate(fxviz.trace(model), torch.randn(2, 3, 8, 8))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_failing_node_is_named(my_module):
    import pytest

    with pytest.raises(fxviz.FxvizError, match="node 'add'.*shapes"):
        fxviz.annotate(fxviz.trace(my_module), torch.randn(3, 7))


def test_flops_are_counted_per_distinct_call_not_per_target():
    """FLOPs are counted once per target, input shapes and constant arguments, and
    reused: calls that differ only in a constant (stride) or a shape count apart."""

    class Convs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 3, 3, 3))

        def forward(self, x):
            a = torch.nn.functional.conv2d(x, self.w, padding=1)
            b = torch.nn.functional.conv2d(x, self.w, padding=1, stride=2)
            c = torch.nn.functional.conv2d(x[:, :, :4], self.w, padding=1)
            d = torch.nn.functional.conv2d(x, self.w, padding=1)
            return a.sum() + b.sum() + c.sum() + d.sum()

    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(Convs()), torch.randn(1, 3, 8, 8)))
    per_position = 2 * 4 * 3 * 3 * 3
    assert g.nodes["conv2d"]["flops"] == per_position * 8 * 8
    assert g.nodes["conv2d_1"]["flops"] == per_position * 4 * 4
    assert g.nodes["conv2d_2"]["flops"] == per_position * 4 * 8
    assert g.nodes["conv2d_3"]["flops"] == g.nodes["conv2d"]["flops"]


def test_annotated_run_leaves_the_graph_module_alone(my_module):

    gm = fxviz.trace(my_module)
    before = {n.name: dict(n.meta) for n in gm.graph.nodes}
    x = torch.randn(5, 4)
    outputs, notes = annotated_run(gm, x)
    assert {n.name: dict(n.meta) for n in gm.graph.nodes} == before
    torch.testing.assert_close(tuple(outputs), tuple(gm(x)))
    g = fxviz.to_networkx(gm, notes)
    assert g.nodes["x"]["shape"] == (5, 4) and g.nodes["topk"]["shape"] == ((3,), (3,)) and set(notes) == set(g)


def test_bytes_count_each_tensor_once_through_tuples_and_aliases():
    """A getitem picks one of the tensors its producer made (counted there): it moves none (it
    read the whole tuple, and an exported graph's shapes said otherwise); an op that returns
    its input (contiguous) adds nothing."""

    class Split(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2)
            return a.contiguous() + b

    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(Split()), torch.randn(4, 3)))
    half = 2 * 3 * 4
    assert g.nodes["getitem"]["bytes"] == 0  # a pick of chunk's outputs
    assert g.nodes["chunk"]["bytes"] == 4 * 3 * 4 + 2 * half
    assert g.nodes["add"]["bytes"] == 3 * half


def test_values_are_dropped_after_their_last_use():
    """Peak memory of the annotated run follows the graph's live values, as a forward's does."""
    from fxviz.annotation.shapes import _Annotator

    live = []

    def step(x):  # sees the values the run holds while it runs
        live.append(len(annotator.env))
        return torch.relu(x) + 1

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    for _ in range(6):
        x = graph.call_function(step, (x,))
    graph.output(x)
    annotator = _Annotator(torch.fx.GraphModule(torch.nn.Module(), graph))
    with torch.no_grad():
        annotator.run(torch.randn(3))
    assert live == [1] * 6  # its input only: each earlier value was dropped


def test_an_in_place_op_that_changes_a_shape_is_seen_by_later_nodes():
    """After x.unsqueeze_(0) and x.resize_(...), later calls on x count FLOPs and bytes
    for its new shape, not the shape it was made with."""

    class Reshaped(torch.nn.Module):
        def forward(self, x, w):
            a = torch.mm(x, w)
            x.unsqueeze_(0)
            b = torch.matmul(x, w)
            x.squeeze_(0)
            x.resize_(2, 4)
            c = torch.mm(x, w)
            return a, b, c

    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(Reshaped()), (torch.randn(4, 4), torch.randn(4, 4))))
    assert g.nodes["mm"]["flops"] == 2 * 4 * 4 * 4
    assert g.nodes["mm_1"]["flops"] == 2 * 2 * 4 * 4 and g.nodes["mm_1"]["shape"] == (2, 4)
    assert g.nodes["resize_"]["bytes"] == 4 * 2 * 4  # one tensor, counted once, as the call left it


def test_counting_flops_does_not_import_dynamo_outside_torch_compile():
    """The first Session of a kernel used to import torch._dynamo (0.65 s) through the
    wrapper torch puts on every dispatch mode: a fresh interpreter opens a model, checks,
    profiles and explores it without importing dynamo, with the FLOPs still counted."""
    script = (
        "import sys, torch, fxviz\n"
        "from fxviz.widgets.explorer import Explorer\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())\n"
        "session = fxviz.Session(model, torch.randn(2, 4))\n"
        "flops = dict(session.current.graph.nodes(data='flops'))\n"
        "session.current.check, session.current.profile(budget_s=0.05)\n"
        "Explorer(session, profile='off').close()\n"
        "from fxviz._torch_internals import FlopCounter\n"
        "with FlopCounter(display=False) as counter:\n"
        "    mode = type(counter.mode).__name__\n"
        "print(flops['_0'], flops['_1'], 'torch._dynamo' in sys.modules, mode)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    # 2 x (2·4·3): a multiply-add counts 2
    assert out.stdout.split() == ["48", "None", "False", "_UnwrappedFlopCounterMode"]


def test_flops_are_the_same_when_dynamo_is_imported():
    import torch._dynamo  # noqa: F401  (imported: the mode keeps torch's wrapper)

    from fxviz._torch_internals import FlopCounter

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    _, notes = annotated_run(fxviz.trace(model), (torch.randn(2, 4),))
    assert notes["_0"]["flops"] == 48 and notes["_1"]["flops"] is None
    with FlopCounter(display=False) as counter:  # torch's own dispatch, wrapper included
        mode = type(counter.mode)
        assert mode.__base__.__name__ == "_FlopCounterMode" and "__torch_dispatch__" not in vars(mode)


def test_a_node_whose_output_cannot_be_described_runs_with_its_shape_unknown_and_why():
    """A strided nested tensor has no sizes: its node's shape and bytes are unknown, with
    the reason, and the run goes on (annotation never refuses a graph that runs)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    nested = graph.call_function(torch.nested.as_nested_tensor, ([x, x],))
    graph.output(graph.call_function(torch.nested.to_padded_tensor, (nested, 0.0)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    outputs, notes = annotated_run(gm, (torch.randn(2, 3),))
    assert outputs.shape == (2, 2, 3)
    made = notes["as_nested_tensor"]
    assert "tensor_meta" not in made and made["bytes"] is None
    assert "layout cannot be read" in made["shape_why"] and "unknown size" in made["bytes_why"]
    padded = notes["nested_to_padded_tensor"]  # reads the nested tensor, whose size is unknown
    assert padded["tensor_meta"].shape == (2, 2, 3) and padded["bytes"] is None and "bytes_why" in padded


def _clamped(window: list[int], size: Any) -> list[int]:
    """Fills in the list it is given, as torchvision's swin3d_t does with its window sizes."""
    window[0] = min(window[0], size)
    return window


torch.fx.wrap("_clamped")


class _ClampsItsWindow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.window = [4]

    def forward(self, x):
        return x * _clamped(self.window.copy(), x.shape[-1])[0]  # the list: a constant in the graph


def test_a_function_that_fills_in_a_list_it_is_given_runs_as_the_graph_module_does():
    """FX's Interpreter hands a node's list arguments over as its immutable_list, one object
    for every run; the GraphModule's code makes a fresh list each call."""
    model, x = _ClampsItsWindow(), torch.randn(2, 3)
    session = fxviz.Session(model, x)
    assert session.capture.method == "symbolic"
    outputs, notes = annotated_run(session.current.gm, x)
    torch.testing.assert_close(outputs, x * 3)
    assert notes["mul"]["tensor_meta"].shape == (2, 3) and session.current.check.status == "match"
    table = fxviz.timing.aten_breakdown.profile_aten(session.current.gm, x, warmup=0, repeats=1)
    assert "aten::mul" in set(table["aten_op"])


def test_nodes_with_equal_notes_share_one_dict_and_the_drawing_keeps_their_values():
    """A stack of identical layers keeps a few notes, not one per node; the graph's
    records stay one per node, with each node's own numbers."""
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(8)])
    gm = fxviz.trace(model)
    _, notes = annotated_run(gm, (torch.randn(2, 4),))
    linears = [name for name in notes if name.endswith("_0")]
    assert len(linears) == 8 and len({id(notes[n]) for n in linears}) == 1
    assert len({id(n) for n in notes.values()}) <= 4  # input, linear, relu, output
    graph = fxviz.to_networkx(gm, notes)
    assert len({id(graph.nodes[n]) for n in graph}) == len(graph)
    assert [graph.nodes[n]["bytes"] for n in linears] == [4 * (2 * 4 + 4 * 4 + 4 + 2 * 4)] * 8
    graph.nodes[linears[0]]["flops"] = -1  # a user's edit stays on its node
    assert notes[linears[1]]["flops"] == graph.nodes[linears[1]]["flops"] == 2 * 2 * 4 * 4


class _Box:
    """An output that is neither a tensor nor hashable, as a library's wrapper object is."""

    __hash__ = None

    def __init__(self, tensor: torch.Tensor, freed: list):
        self.tensor, self._freed = tensor, freed

    def __del__(self):
        self._freed.append(1)


_FREED: list = []


def _boxed(x):
    return _Box(x * 2, _FREED)


def _unboxed(box):
    return box.tensor


def _boxes_freed(y):
    return y + len(_FREED)


for _f in (_boxed, _unboxed, _boxes_freed):
    torch.fx.wrap(_f.__name__)


def test_a_value_that_is_not_a_tensor_is_dropped_after_its_last_use():
    """Sharing notes keeps no output alive: the box is gone before the last node runs."""
    class Boxing(torch.nn.Module):
        def forward(self, x):
            return _boxes_freed(_unboxed(_boxed(x)))

    _FREED.clear()
    outputs, _ = annotated_run(torch.fx.symbolic_trace(Boxing()), (torch.zeros(2),))
    assert outputs.tolist() == [1.0, 1.0]


class ReadsShapes(nn.Module):
    def forward(self, x):
        n, s = x.shape[1], x.size(0)  # metadata: no element of x read
        return x.reshape(s, n, -1).sum(-1) * x.dim()


def test_reading_a_tensors_shape_moves_none_of_its_bytes():
    graph = fxviz.Session(ReadsShapes(), torch.randn(4, 8, 16)).current.graph
    moved = {n: a["bytes"] for n, a in graph.nodes(data=True)}
    assert moved["getattr_1"] == moved["size"] == moved["dim"] == 0  # was 2,048: x's bytes
    assert moved["reshape"] == 2 * 4 * 8 * 16 * 4  # a call that takes x still reads it (and writes its view)
