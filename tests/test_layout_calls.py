"""Modules called several times, or through a method rather than ``forward`` (RAFT's
refinement loop: ``self.corr_block.index_pyramid(...)`` then ``self.update_block(...)`` per
step; Gemma 3n's ``self.altup.predict(...)``): each call is a box named for its module, and
"Collapse all" draws the modules, not "nodes N–M" segments."""
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture.places import method_path
from fxviz.draw.layout_tree import build_tree
from fxviz.draw.render import render


class Corr(nn.Module):
    """Called only through its methods: module hooks never see it."""

    def build(self, a, b):
        return torch.softmax(a @ b.transpose(-1, -2), -1)

    def lookup(self, table, h):
        return torch.tanh(table @ torch.sigmoid(h))


class Update(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, h, c):
        return self.out(torch.relu(self.gate(torch.cat([h, c], -1))))


class Loop(nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.corr = Corr()
        self.update = Update()
        self.steps = steps

    def forward(self, x):
        f = self.encoder(x)
        table = self.corr.build(f, f)
        h = torch.relu(f)  # between two calls of corr's methods: else, one after the other, they read as one
        for _ in range(self.steps):
            c = self.corr.lookup(table, h)
            h = self.update(h, c) * 0.5 + f  # plain ops between the calls
        return h


def _graph(steps: int):
    x = torch.randn(4, 8)
    ep = torch.export.export(Loop(steps).eval(), (x,), strict=False)
    return fxviz.to_networkx(fxviz.trace(ep, x))


def _collapse_all(graph) -> list[str]:
    """The labels of the boxes "Collapse all" draws (every top-level box closed)."""
    tree = build_tree(graph)
    top = [key for kind, key in tree.boxes[""].items if kind == "box"]
    drawn = render(graph, collapse=top).elements.values()
    return [tree.boxes[e["name"]].label for e in drawn if e["kind"] == "collapsed"]


def test_ops_of_a_submodules_method_carry_that_modules_path():
    graph = _graph(2)
    paths = {attrs["target"]: attrs["module_path"] for _, attrs in graph.nodes(data=True)}
    assert paths["aten.sigmoid.default"] == "corr"  # lookup's, called as self.corr.lookup(...)
    assert paths["aten.softmax.int"] == "corr"  # build's
    assert paths["aten.cat.default"] == "update"


def test_each_call_is_a_box_named_for_its_module_and_collapse_all_draws_no_segment():
    labels = _collapse_all(_graph(3))
    assert labels == ["encoder · Sequential", "corr #1", "corr #2", "update #1 · Update", "corr #3",
                      "update #2 · Update", "corr #4", "update #3 · Update"]


def test_a_long_loop_is_drawn_as_its_iterations_each_holding_its_calls():
    graph = _graph(20)  # 20 steps of 3 items each: more than a box lists, grouped by step
    labels = _collapse_all(graph)
    assert labels[:3] == ["encoder · Sequential", "corr #1", "iteration 1 of 20 · corr, update"]
    assert labels[-1] == "iteration 20 of 20 · corr, update" and len(labels) == 22
    assert not any(label.startswith("nodes ") for label in labels)
    tree = build_tree(graph)
    step = next(box for box in tree.boxes.values() if box.label.startswith("iteration 1 of"))
    inside = [tree.boxes[key].label for kind, key in step.items if kind == "box"]
    assert inside[:2] == ["corr #2", "update #1 · Update"] and inside[2].startswith("nodes ")  # then `* 0.5 + f`
    output = next(name for name, attrs in graph.nodes(data=True) if attrs["op"] == "output")
    assert tree.box_of[output] == ""  # the graph's output stays in view, after the loop
    # alike, the iterations start collapsed, as a run of identical layers does
    first_view = {e["name"] for e in render(graph).elements.values() if e["kind"] == "collapsed"}
    assert sum(tree.boxes[p].label.startswith("iteration ") for p in first_view) == 20


@pytest.mark.parametrize("tracer", ["symbolic", "dynamo", "export", "export (strict)", "make_fx"])
def test_every_tracer_puts_a_methods_ops_in_its_module_named_with_its_class(tracer):
    """Symbolic tracing reads the live stack, the others the stack trace; traced from the model,
    the class of a module only called through methods is known (export's module stacks name
    only modules whose forward ran), and strict export names modules by their paths."""
    model = Loop(2).eval()
    graph = fxviz.to_networkx(fxviz.trace(model, torch.randn(4, 8), tracer=tracer))
    assert _collapse_all(graph) == ["encoder · Sequential", "corr #1 · Corr", "corr #2 · Corr", "update #1 · Update",
                                    "corr #3 · Corr", "update #2 · Update"]
    assert type(model) is Loop and "forward" not in vars(model)  # the model itself is untouched


class Helper:
    """Not a module: its method's ops are its caller's."""

    def scale(self, x):
        return x * 3


class WithHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.corr, self.helper = nn.Linear(8, 8), Corr(), Helper()

    def forward(self, x):
        h = self.helper.scale(self.fc(x))
        return self.corr.lookup(h.t(), h)


@pytest.mark.parametrize("tracer", ["symbolic", "dynamo", "export"])
def test_a_plain_objects_method_and_a_leaf_call_keep_their_modules(tracer):
    graph = fxviz.to_networkx(fxviz.trace(WithHelper().eval(), torch.randn(4, 8), tracer=tracer))
    paths = {str(attrs["target"]).partition(" ")[0].split(".")[-2 if tracer == "export" else -1]: attrs["module_path"]
             for _, attrs in graph.nodes(data=True) if attrs["op"] in ("call_function", "call_module")}
    assert paths["mul"] == ""  # self.helper.scale(...): the root's
    assert paths["tanh"] == paths["sigmoid"] == "corr"
    assert paths["fc" if tracer == "symbolic" else "linear"] == "fc"


class Norm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Twice(nn.Module):
    """A norm called at two places, and layers of a ModuleList with the model's own op between them."""

    def __init__(self):
        super().__init__()
        self.norm = Norm()
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8)) for _ in range(2)])

    def forward(self, x):
        x = self.norm(x) + 1
        x = self.norm(x)
        for layer in self.layers:
            x = layer(x) * 2
        return x


def test_a_module_called_twice_has_a_box_per_call_and_a_container_stays_one_box():
    tree = build_tree(fxviz.to_networkx(fxviz.trace(Twice(), torch.randn(2, 8))))
    assert tree.boxes["norm"].label == "norm #1 · Norm" and tree.boxes["norm@1"].label == "norm #2 · Norm"
    assert {n for n, box in tree.box_of.items() if box == "norm"} == {"pow_1", "mean", "add", "rsqrt", "mul"}
    assert [key for kind, key in tree.boxes["layers"].items if kind == "box"] == ["layers.0", "layers.1"]
    assert "layers@1" not in tree.boxes


def _node(stack: list[str], *lines: str) -> SimpleNamespace:
    """A node made in ``lines``' forward frames (outermost first) under modules ``stack``."""
    trace = "".join(f'  File "/m/model.py", line {i}, in forward\n    {line}\n' for i, line in enumerate(lines))
    return SimpleNamespace(meta={"stack_trace": trace, "nn_module_stack": {p: (p, "M") for p in stack}})


def test_the_method_path_is_read_from_the_innermost_forward_frame_only_where_it_is_the_modules():
    assert method_path(_node([""], "c = self.corr_block.index_pyramid(x)"), "") == "corr_block"
    two = ["", "layers.0"]
    assert method_path(_node(two, "h = layer(h)", "p = self.altup.predict(h)"), "layers.0") == "layers.0.altup"
    assert method_path(_node(two, "h = layer(h)", "p = self.a.b.predict(h)"), "layers.0") == "layers.0.a.b"
    assert method_path(_node(two, "x = self.norm(x)", "return x * self.weight.float()"), "layers.0") == "layers.0"
    assert method_path(_node([""], "y = self.a.f(self.b.g(x))"), "") == ""  # two owners: which made the op is unknown
    # one forward frame for two modules: the innermost is not the module's own, nothing is guessed
    assert method_path(_node(two, "y = self.head.fc.run(x)"), "layers.0") == "layers.0"
    assert method_path(SimpleNamespace(meta={}), "fc") == "fc"
    # where the model's modules are known, only one of them: a config's or a helper object's method names none
    assert method_path(_node([""], "c = self.corr_block.index_pyramid(x)"), "", {"corr_block"}) == "corr_block"
    assert method_path(_node(two, "s = self.config.scale(h)"), "layers.0", {"layers.0", "layers.0.altup"}) == "layers.0"


class Shared(nn.Module):
    """One ReLU module called twice, then a residual add (an op of the block's own)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.act = nn.Linear(8, 8), nn.Linear(8, 8), nn.ReLU()

    def forward(self, x):
        return self.act(self.b(self.act(self.a(x)))) + x


def test_a_training_steps_backward_and_a_shared_relus_small_calls_split_no_box():
    model = nn.Sequential()
    model.add_module("block", Shared())
    model.add_module("head", nn.Linear(8, 2))

    def step(x):
        loss = model(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    graph = fxviz.to_networkx(fxviz.trace(step, torch.randn(4, 8)))
    tree = build_tree(graph)
    # the block's forward and its backward's clusters are one box, not two calls of it
    assert [key for kind, key in tree.boxes["block"].items if kind == "box"] == [
        "block.a", "block.b", "block.b · backward", "block.a · backward"]
    assert not any("#" in box.label for box in tree.boxes.values())
    acts = [name for name, attrs in graph.nodes(data=True) if (attrs["module_path"] or "").startswith("block.act")]
    assert len(acts) == 8 and {tree.box_of[name] for name in acts} == {"block"}  # two calls of 2 nodes, each way


class Scan(nn.Module):
    """A recurrence unrolled by the trace, all ops of the module's own (a Mamba mixer's scan)."""

    def __init__(self, steps: int):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.steps = steps

    def forward(self, x):  # (batch, steps, 8)
        u = self.proj(x)
        h = torch.zeros_like(u[:, 0])
        for t in range(self.steps):
            step = u[:, t]
            h = torch.tanh(h * 0.9 + step)  # three ops on one line
        return h


class Mixer(nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.scan = Scan(steps)

    def forward(self, x):
        return self.scan(x) + 1


@pytest.mark.parametrize("tracer", ["export", "make_fx", "symbolic"])
def test_a_loop_of_plain_ops_is_drawn_as_its_passes_not_as_segments(tracer):
    """Told by the ops' sequence repeating (symbolic tracing records no source line; export's
    named the scan's one line), and the line where one is recorded."""
    steps = 30  # 4 ops a pass: 120 nodes, over a box's child limit
    graph = fxviz.to_networkx(fxviz.trace(Mixer(steps).eval(), torch.randn(2, steps, 8), tracer=tracer))
    tree = build_tree(graph)
    passes = [tree.boxes[key] for kind, key in tree.boxes["scan"].items if kind == "box" and tree.boxes[key].synthetic]
    labels = [box.label for box in passes]
    where = "" if tracer == "symbolic" else " · test_layout_calls.py:"
    assert len(labels) == steps and labels[0].startswith(f"iteration 1 of {steps}{where}")
    assert sum(box.size for box in passes) >= 4 * steps - 1 and max(box.size for box in passes) <= 5
    assert not any(label.startswith("nodes ") for label in labels)


def test_loops_one_after_another_are_found_up_to_a_bound_then_left_to_segments():
    import networkx as nx

    from fxviz.draw import layout_groups
    from fxviz.draw.layout_groups import Box

    graph, run = nx.DiGraph(), []
    for loop in range(layout_groups.LOOPS + 8):  # each loop: two passes over its own two lines
        for step in range(2):
            for line in range(2):
                name = f"n{len(run)}"
                graph.add_node(name, op="call_function", index=len(run), source=f"/m/net.py:{2 * loop + line}")
                run.append(("node", name))
    boxes = {"m": Box("m", "", "m")}
    items = layout_groups._passes(boxes, boxes["m"], run, graph)
    labels = [b.label for b in boxes.values() if b.synthetic]
    found = [label for label in labels if label.startswith("iteration")]
    assert len(found) == 2 * (layout_groups.LOOPS + 1)  # the first loop, then LOOPS more around it
    assert len(items) <= layout_groups.MAX_ITEMS and any(label.startswith("nodes ") for label in labels)


def test_a_long_loop_is_shown_in_runs_of_its_passes_and_one_op_over_and_over_is_no_loop():
    steps = 70  # 70 passes: more than a box lists, so runs of 32
    graph = fxviz.to_networkx(fxviz.trace(Mixer(steps).eval(), torch.randn(2, steps, 8), tracer="symbolic"))
    tree = build_tree(graph)
    labels = [tree.boxes[key].label for kind, key in tree.boxes["scan"].items if kind == "box"]
    assert labels[:3] == [f"iterations 1–32 of {steps}", f"iterations 33–64 of {steps}", f"iterations 65–70 of {steps}"]

    class Chain(nn.Module):  # 60 adds: a chain, not a loop of passes
        def forward(self, x):
            for _ in range(60):
                x = x + 1
            return x

    chain = build_tree(fxviz.to_networkx(fxviz.trace(Chain(), torch.randn(2))))
    assert not any(b.label.startswith("iteration") for b in chain.boxes.values())


def test_a_segment_says_which_lines_of_the_models_code_made_it():
    """"nodes 800–831" told nothing of what rpn's post-processing does: now "· rpn.py:364–370"."""
    import networkx as nx

    from fxviz.draw import layout_groups
    from fxviz.draw.layout_groups import Box

    graph, run = nx.DiGraph(), []
    for i in range(60):  # straight-line code, two ops a line, no loop: segments
        graph.add_node(f"n{i}", op="call_function", target=f"op{i}", index=i, source=f"/m/rpn.py:{100 + i // 2}")
        run.append(("node", f"n{i}"))
    graph.add_node("q", op="call_function", target="other", index=60, source="/m/boxes.py:7")
    run.append(("node", "q"))
    boxes = {"m": Box("m", "", "m")}
    layout_groups._passes(boxes, boxes["m"], run, graph)
    labels = sorted(b.label for b in boxes.values() if b.synthetic)
    assert labels == ["nodes 0–31 · rpn.py:100–115", "nodes 32–60 · rpn.py:116–129"]  # the file most of it came from
