"""Setup plumbing (masks, positions, checks) is one collapsed box named for what it builds."""
import torch
from torch import nn

import fxviz
from fxviz.draw.layout_tree import build_tree
from fxviz.draw.render import render


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, mask, pos):
        scores = self.proj(x) @ x.transpose(1, 2)
        return x + torch.softmax(scores.masked_fill(mask, -1e4) + pos, -1) @ x


class Decoder(nn.Module):
    """A decoder's top level as Hugging Face writes it: embedding, then a causal mask and
    position biases made at the top level and read by every layer."""

    def __init__(self, layers=4):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList(Layer() for _ in range(layers))

    def forward(self, ids):
        x = self.embed(ids)
        n = ids.shape[1]
        steps = torch.arange(n)
        mask = steps[None, :] > steps[:, None]
        pos = (steps[None, :] - steps[:, None]).float().abs().neg().unsqueeze(0)
        for layer in self.layers:
            x = layer(x, mask, pos)
        return x


def test_a_decoders_masks_and_positions_are_one_collapsed_box_and_its_trunk_stays_open():
    for tracer in ("export", "symbolic"):
        graph = fxviz.Session(Decoder(), torch.randint(0, 16, (1, 6)), tracer=tracer).current.graph
        tree = build_tree(graph)
        setup = [b for b in tree.boxes.values() if b.setup]
        assert len(setup) == 1, tracer
        box = setup[0]
        assert box.parent == "" and box.label.startswith("setup · ") and "masks" in box.label and "positions" in box.label
        inside = {name for _, name in box.items}
        arange = next(n for n, a in graph.nodes(data=True) if "arange" in a["target"])
        assert arange in inside
        embedding = next(n for n, a in graph.nodes(data=True) if "embed" in a["target"] or "embedding" in n)
        assert embedding not in inside  # the trunk: read by the first layer only
        rendering = render(graph)
        assert box.path in rendering.collapsed  # never the first view
        assert not any(e.get("name") in inside for e in rendering.elements.values() if e["kind"] == "node")
        assert box.label in rendering.dot.source


def test_a_model_without_setup_and_one_with_a_single_input_check_get_no_setup_box(resnet18):
    class Checked(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            torch._assert(x.shape[1] == 4, "four features")  # a module's own input check
            return self.lin(x).relu()

    for model, x in ((resnet18, torch.randn(1, 3, 32, 32)), (Checked(), torch.randn(2, 4))):
        tree = build_tree(fxviz.to_networkx(fxviz.trace(model, x)))
        assert not any(b.setup for b in tree.boxes.values())


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", torch.rand(4))

    def forward(self, n: int):
        angles = torch.arange(n).float()[:, None] * self.inv_freq[None, :]
        return torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()


class RotaryLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, cos, sin):
        return x + self.proj(x * cos + x * sin)


class RotaryDecoder(nn.Module):
    """Llama's top level: the rotary tables made once by a module, read by every layer."""

    def __init__(self):
        super().__init__()
        self.embed, self.rotary = nn.Embedding(16, 8), Rotary()
        self.layers = nn.ModuleList(RotaryLayer() for _ in range(4))

    def forward(self, ids):
        x = self.embed(ids)
        cos, sin = self.rotary(ids.shape[1])
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


def test_a_module_that_only_builds_tables_for_the_layers_is_drawn_collapsed_under_its_own_name():
    graph = fxviz.Session(RotaryDecoder(), torch.randint(0, 16, (1, 6)), tracer="export").current.graph
    tree = build_tree(graph)
    assert tree.boxes["rotary"].setup and not tree.boxes["rotary"].synthetic
    assert tree.boxes["rotary"].label == "rotary · Rotary"
    assert "rotary" in render(graph).collapsed
    assert not any(b.setup for p, b in tree.boxes.items() if p.startswith("layers"))  # the layers are the model


def test_a_modules_few_input_checks_are_not_drawn_unless_weights_are():
    class Checked(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            torch._assert(x.shape[1] == 4, "four features")  # timm's norm layers check their input so
            return self.lin(x).relu()

    graph = fxviz.to_networkx(fxviz.trace(Checked(), torch.randn(2, 4)))
    checks = {n for n, a in graph.nodes(data=True) if a["target"] in ("getattr", "operator.getitem", "operator.eq",
                                                                         "torch._assert")}
    assert len(checks) >= 3
    drawn = {e["name"] for e in render(graph).elements.values() if e["kind"] == "node"}
    assert not checks & drawn and {"x", "lin", "relu", "output"} <= drawn
    assert checks <= {e["name"] for e in render(graph, show_weights=True).elements.values() if e["kind"] == "node"}
    assert render(graph, expand=["_assert"]).elements == render(graph).elements  # revealing one: its box's first op
