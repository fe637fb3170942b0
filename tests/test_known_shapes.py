"""An exported program's first view and report from what the program carries: a program
loaded from a .pt2 is drawn without running it too, and its report shows the code
without compiling it."""
from __future__ import annotations

import base64
import gzip
import io
import json
import re

import torch
from torch import nn

import fxviz
import fxviz.session


class Cast(nn.Module):
    """``.to`` a dtype: export notes it with ``aten._assert_tensor_metadata``, which returns nothing."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x.to(torch.float32)).relu()


def _saved_and_loaded(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return torch.export.load(buffer)


def test_a_program_loaded_from_a_pt2_file_is_drawn_from_its_shapes(monkeypatch):
    from fxviz.annotation.known_shapes import known_notes

    x = torch.randn(2, 4, dtype=torch.float64)
    fresh = torch.export.export(Cast().eval(), (x,))
    loaded = _saved_and_loaded(fresh)
    asserts = [n for n in loaded.graph.nodes if "assert_tensor_metadata" in str(n.target)]
    assert asserts and "val" not in asserts[0].meta  # what a loaded program lacks
    notes = [known_notes(fxviz.trace(ep), (x,)) for ep in (fresh, loaded)]
    assert notes[1] is not None and notes[1].keys() == notes[0].keys()
    assert [n["flops"] for n in notes[1].values()] == [n["flops"] for n in notes[0].values()]
    runs, run = [], fxviz.session.annotated_run
    monkeypatch.setattr(fxviz.session, "annotated_run", lambda *a: runs.append(a) or run(*a))
    session = fxviz.Session(loaded)  # the inputs the .pt2 keeps
    linear = next(a for _, a in session.current.graph.nodes(data=True) if "linear" in a["target"])
    assert runs == [] and linear["shape"] == (2, 3) and linear["flops"] == 2 * 2 * 4 * 3


def test_the_report_shows_the_code_without_compiling_it(tmp_path):
    x = torch.randn(2, 4)
    session = fxviz.Session(torch.export.export(Cast().eval(), (x,)), (x,))
    gm = session.current.gm
    page = session.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    assert type(gm)._needs_recompile()  # still no code made: the report only read its text
    data = json.loads(re.search(r'id="fxviz-report-data">(.*?)</script>', page, re.S).group(1))
    shown = json.loads(gzip.decompress(base64.b64decode(data["blobs"][data["steps"][0]["code"]])))
    assert shown == gm.code.lstrip("\n") and "torch.ops.aten.linear.default" in shown


class Attention(nn.Module):
    """Operators with a FLOP formula (mm, attention), composites that decompose into them
    (linear, layer_norm) and operators without one (gelu, add, view)."""

    def __init__(self):
        super().__init__()
        self.norm, self.qkv, self.out = nn.LayerNorm(8), nn.Linear(8, 24), nn.Linear(8, 8)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).view(*x.shape[:2], 3, 8).unbind(2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return x + torch.nn.functional.gelu(self.out(y))


def test_only_operators_the_counter_may_count_are_run_for_flops():
    from fxviz._torch_internals.flops import may_count
    from fxviz.annotation.known_shapes import known_notes
    from fxviz.annotation.shapes import annotated_run

    aten = torch.ops.aten
    assert may_count(aten.mm.default) and may_count(aten.linear.default)  # a formula; a composite of mm
    assert not may_count(aten.gelu.default) and not may_count(aten.add.Tensor)
    x = torch.randn(2, 5, 8)
    gm = fxviz.trace(torch.export.export(Attention().eval(), (x,)))
    known, (_, ran) = known_notes(gm, (x,)), annotated_run(gm, (x,))
    assert {n: known[n]["flops"] for n in ran} == {n: ran[n]["flops"] for n in ran}
    assert sum(note["flops"] or 0 for note in known.values()) > 0


def test_an_operator_with_a_formula_is_counted_from_shapes_as_the_counter_counts_it_running():
    from fxviz._torch_internals import FlopCounter
    from fxviz._torch_internals.flops import formula_flops, has_formula

    aten = torch.ops.aten
    assert has_formula(aten.mm.default) and has_formula(aten.convolution.default)
    assert not has_formula(aten.linear.default)  # it decomposes (into addmm) before the counter sees it
    a, b = torch.randn(3, 5, device="meta"), torch.randn(5, 7, device="meta")
    with FlopCounter(display=False) as counter:
        out = aten.mm.default(a, b)
    assert formula_flops(aten.mm.default, out, (a, b), {}) == counter.get_total_flops() == 2 * 3 * 5 * 7
    assert "FLOP formula for aten.mm" in formula_flops(aten.mm.default, out, (a,), {})  # a formula's failure said



def test_flops_run_on_meta_once_per_operator_and_shapes_in_a_process(monkeypatch):
    """A graph opened again (a new export of the same model) reads the counts made for the
    first; other shapes are counted anew, as the annotated run counts them."""
    from fxviz.annotation import known_shapes
    from fxviz.annotation.shapes import annotated_run

    monkeypatch.setattr(known_shapes, "_COUNTED", {})
    ran, run = [], known_shapes._run_on_meta
    monkeypatch.setattr(known_shapes, "_run_on_meta", lambda node, vals: ran.append(node.target) or run(node, vals))
    model, x = Attention().eval(), torch.randn(2, 5, 8)
    first, again = (fxviz.trace(torch.export.export(model, (x,))) for _ in range(2))
    notes = known_shapes.known_notes(first, (x,))
    assert torch.ops.aten.linear.default in ran  # composites run on meta the first time
    counted = len(ran)
    assert known_shapes.known_notes(again, (x,)) == notes and len(ran) == counted  # the same counts, none run
    y = torch.randn(4, 5, 8)
    gm = fxviz.trace(torch.export.export(model, (y,)))
    other = known_shapes.known_notes(gm, (y,))
    assert len(ran) > counted  # counted anew: a batch of 4, not 2
    _, real = annotated_run(gm, (y,))
    assert {n: other[n]["flops"] for n in real} == {n: real[n]["flops"] for n in real}
    assert sum(n["flops"] or 0 for n in other.values()) == 2 * sum(n["flops"] or 0 for n in notes.values())


def test_the_counts_kept_are_bounded(monkeypatch):
    from fxviz.annotation import known_shapes

    x = torch.randn(2, 5, 8)
    gm = fxviz.trace(torch.export.export(Attention().eval(), (x,)))
    monkeypatch.setattr(known_shapes, "_COUNTED", {})
    unbounded = known_shapes.known_notes(gm, (x,))
    assert len(known_shapes._COUNTED) > 2
    monkeypatch.setattr(known_shapes, "_COUNTED", {})
    monkeypatch.setattr(known_shapes, "_COUNTED_LIMIT", 2)
    assert known_shapes.known_notes(gm, (x,)) == unbounded and len(known_shapes._COUNTED) <= 2


class Twins(nn.Module):
    """Two equal blocks, then one of other sizes: equal notes twice, and one that differs."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x).relu()
        return x


def test_nodes_with_equal_notes_share_one_and_others_keep_their_own():
    from fxviz.annotation.known_shapes import known_notes
    from fxviz.annotation.shapes import annotated_run

    x = torch.randn(2, 8)
    gm = fxviz.trace(torch.export.export(Twins().eval(), (x,)))
    notes = known_notes(gm, (x,))
    linears = [name for name in notes if name.startswith("linear")]
    relus = [name for name in notes if name.startswith("relu")]
    assert len(linears) == len(relus) == 3
    assert notes[linears[0]] is notes[linears[1]] and notes[relus[0]] is notes[relus[1]]
    assert notes[linears[2]] is not notes[linears[1]] and notes[linears[2]]["flops"] == 2 * 2 * 8 * 4
    assert notes[linears[0]] is not notes[relus[0]]  # equal layouts, other FLOPs
    _, ran = annotated_run(gm, (x,))
    assert {n: (notes[n]["flops"], notes[n]["bytes"]) for n in ran} == {n: (ran[n]["flops"], ran[n]["bytes"]) for n in ran}


def test_a_training_steps_notes_from_its_shapes_are_the_annotated_runs_and_picking_an_output_moves_nothing():
    """getitem of native_batch_norm's outputs read 2,336 bytes from the shapes and 1,184 run: each
    counted the tuple it picks from; in-place adds on a buffer alike. A pick moves no bytes."""
    import operator

    from fxviz.annotation.known_shapes import known_notes
    from fxviz.annotation.shapes import annotated_run

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()

    def step(x):
        loss = model(x).sum()
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    x = torch.randn(2, 3, 6, 6)
    gm = fxviz.trace(step, x, tracer="make_fx")
    notes = known_notes(gm, (x,))
    assert notes is not None
    _, ran = annotated_run(gm, (x,))
    assert {n: notes[n]["bytes"] for n in ran} == {n: ran[n]["bytes"] for n in ran}
    picks = [n.name for n in gm.graph.find_nodes(op="call_function", target=operator.getitem)
             if isinstance(n.args[0].meta.get("val"), (tuple, list))]
    assert picks and all(ran[name]["bytes"] == 0 for name in picks)
