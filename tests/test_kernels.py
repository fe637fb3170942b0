"""fxviz.compiled(..., backend="inductor"): inductor's kernels mapped to the AOT forward graph
the Explorer opens, with their code and measured times, on one tiny CPU model compiled once
(conv-bn-relu-linear, a small attention block and an MLP) with the cache in a temp dir."""
import os

import pytest
import torch
import torch._inductor.config as inductor_config
from torch import nn

import fxviz
from fxviz._torch_internals import op_schema
from fxviz.errors import InputError, MissingDependency, TraceError
from fxviz.compiler.kernels import KINDS, code_lines


class Tiny(nn.Module):
    """conv-bn-relu-linear into 4 tokens, one attention block, an MLP."""

    def __init__(self, d=32):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.proj = nn.Linear(8 * 14 * 14, 4 * d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.proj(torch.relu(self.bn(self.conv(x))).flatten(1)).view(x.shape[0], 4, -1)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        h = self.norm(h + self.out(nn.functional.scaled_dot_product_attention(q, k, v)))
        return self.mlp(h).mean()


SETTINGS = ("trace.provenance_tracking_level", "cpp.enable_kernel_profile", "fx_graph_cache")


@pytest.fixture(scope="module")
def compiled():
    """The one compile (~15 s on 2 cores), with no cache dir of the user's: fxviz's is a
    temporary one (never the developer's own cache)."""
    torch.manual_seed(0)
    model = Tiny().eval()
    before = {name: inductor_config.get_config_copy()[name] for name in SETTINGS}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.MonkeyPatch.context() as patch, torch.no_grad():
        patch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        made = fxviz.compiled(model, torch.randn(16, 3, 16, 16), backend="inductor")
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    after = {name: inductor_config.get_config_copy()[name] for name in SETTINGS}
    return {"c": made, "config": (before, after), "cache": cache, "model": model, "state": state}


def _computing(gm):
    """ATen operator calls (not the ``getitem`` that picks one output of several)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]


def _is_view(node):
    returns = op_schema(node.target).returns
    return bool(returns) and returns[0].alias_info is not None


def test_every_computing_node_is_in_exactly_one_kernel(compiled):
    c = compiled["c"]
    kernels = c.kernels[c.kernels.part == "forward"]
    gm = c.session(0, "forward").current.gm
    counts = {}
    for nodes in kernels.nodes:
        for name in nodes:
            counts[name] = counts.get(name, 0) + 1
    names = {n.name for n in _computing(gm)}
    assert set(counts) <= names
    assert all(count == 1 for count in counts.values()), {k: v for k, v in counts.items() if v > 1}
    uncovered = [n for n in _computing(gm) if n.name not in counts]
    assert all(_is_view(n) for n in uncovered), [n.name for n in uncovered if not _is_view(n)]
    externs = kernels[kernels.kind == "extern"]
    assert len(externs) >= 3 and all(externs.nodes.map(len) >= 1)  # conv, matmuls (and attention)
    assert {"cpp", "extern"} <= set(kernels.kind) <= set(KINDS)


def test_fusion_is_visible(compiled):
    c = compiled["c"]
    gm = c.session(0, "forward").current.gm
    targets = {n.name: str(n.target) for n in gm.graph.nodes}
    fused = c.kernels[c.kernels.nodes.map(len) >= 3]
    assert len(fused) >= 2
    bn_relu = [row for row in fused.itertuples() if "bn" in row.modules
               and any("relu" in targets[n] for n in row.nodes)]
    assert bn_relu, "the BatchNorm's arithmetic and the ReLU after it run as one kernel"
    assert all(len(row.modules) >= 1 for row in fused.itertuples())


def test_kernel_times_add_up_to_the_compiled_forward(compiled):
    c = compiled["c"]
    kernels = c.kernels
    assert (kernels.time_us > 0).all() and kernels.calls.min() >= 1
    total = c.kernel_totals[(0, "forward")]
    ratio = kernels[kernels.part == "forward"].time_us.sum() / total
    assert 0.2 <= ratio <= 3.0, ratio  # wrapper overhead below, profiler overlap above: loose under CPU load
    assert kernels.share.sum() == pytest.approx(ratio)


def test_generated_kernels_have_code_and_externs_their_call(compiled):
    kernels = compiled["c"].kernels
    for row in kernels.itertuples():
        if row.kind == "extern":
            assert row.kernel.split(" ")[0].rpartition(".")[2].split("_")[0] in row.code or "(" in row.code
        else:
            assert "extern \"C\"" in row.code and len(row.code.splitlines()) > 5


def test_fused_relu_lines_are_marked(compiled):
    c = compiled["c"]
    gm = c.session(0, "forward").current.gm
    relu = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
    row = next(r for r in c.kernels.itertuples() if relu.name in r.nodes)
    lines = code_lines(row.code, relu.target)
    code = row.code.splitlines()
    assert lines and all("tmp" in code[i - 1].split("=")[0] and "clamp_min" in code[i - 1] for i in lines)
    assert code_lines(row.code, torch.ops.aten.rsqrt.default)  # the BatchNorm's 1 / sqrt(var + eps)
    assert not set(lines) & set(code_lines(row.code, torch.ops.aten.rsqrt.default))


def test_config_and_cache_dir_restored_model_untouched(compiled):
    before, after = compiled["config"]
    assert before == after
    assert compiled["cache"] is None
    assert all(torch.equal(v, compiled["state"][k]) for k, v in compiled["model"].state_dict().items())


def test_inductor_cache_dir_is_temporary_unless_the_user_set_one(tmp_path, monkeypatch):
    from fxviz._torch_internals import inductor

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    with inductor.settings():
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path) and tmp_path.is_dir()
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    with inductor.settings():
        own = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert os.path.isdir(own) and os.path.basename(own).startswith("fxviz-inductor-")
        assert inductor_config.trace.provenance_tracking_level == 1
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and not os.path.exists(own)
    assert inductor_config.trace.provenance_tracking_level == 0
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    default = os.path.abspath(default_cache_dir())  # what importing inductor sets: not the user's choice
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default)
    with inductor.settings():
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] != default
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == default


def test_unknown_backend_and_plain_compile_say_what_to_do():
    with pytest.raises(InputError, match="inductor"):
        fxviz.compiled(nn.Linear(2, 2), torch.randn(1, 2), backend="tvm")
    with torch.no_grad():
        plain = fxviz.compiled(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(InputError, match='backend="inductor"'):
        plain.kernels


def test_missing_cpp_compiler_is_a_clear_error():
    with inductor_config.patch({"cpp.cxx": ("no-such-cxx-for-fxviz",)}), \
            pytest.raises(MissingDependency, match="C\\+\\+ compiler"):
        fxviz.compiled(nn.Linear(2, 2), torch.randn(1, 2), backend="inductor")


class Sig(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x * 2)  # LOWERING FAILS


def test_inductor_failure_says_what_and_where(monkeypatch):
    from torch._inductor import lowering

    def refuse(*args, **kwargs):
        raise NotImplementedError("no lowering for this test")

    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.sigmoid.default, refuse)
    with pytest.raises(TraceError) as info, torch.no_grad():
        fxviz.compiled(Sig(), torch.randn(3), backend="inductor")
    text = str(info.value)
    assert "inductor could not compile it" in text and "no lowering for this test" in text
    assert "test_kernels.py" in text and "LOWERING FAILS" in text
    assert inductor_config.trace.provenance_tracking_level == 0


def test_kernel_colour_mode_colours_fused_nodes_alike(compiled):
    import re

    from fxviz.draw.colour_modes import NO_KERNEL, ONE_NODE_KERNEL
    from fxviz.draw.render import render

    c = compiled["c"]
    step = c.session(0, "forward").current
    drawn = render(step.gm, color_by="kernel")
    fill = dict(re.findall(r'id="fx-(\w+)".*?fillcolor="(#\w+)"', drawn.dot.source))
    fused = next(r for r in c.kernels.itertuples() if "bn" in r.modules and len(r.nodes) >= 3)
    drawn_fused = [n for n in fused.nodes if n in fill]
    assert len(drawn_fused) >= 2 and len({fill[n] for n in drawn_fused}) == 1
    assert fill[drawn_fused[0]] not in (ONE_NODE_KERNEL, NO_KERNEL)
    conv = next(n.name for n in step.gm.graph.nodes if n.target == torch.ops.aten.convolution.default)
    assert fill[conv] == ONE_NODE_KERNEL and fill["x"] == NO_KERNEL
    assert fused.kernel in [entry["label"] for entry in drawn.legend]


def test_compile_explorer_shows_kernels_and_follows_the_selection(compiled):
    from fxviz.widgets.compile_view import CompileExplorer

    c = compiled["c"]
    view = CompileExplorer(c, index=0, part="forward", profile="off")
    try:
        panel, explorer = view.kernels, view.explorer
        assert len(panel.table.rows) == len(c.kernels[c.kernels.part == "forward"])
        gm = explorer.session.current.gm
        relu = next(n.name for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
        fused = next(r for r in c.kernels.itertuples() if relu in r.nodes)
        explorer.graph.color_mode = "kernel"
        explorer.select(relu)
        assert panel.table.selected == fused.kernel
        assert explorer.graph.marked == list(fused.nodes)  # the nodes fused with it outlined in the graph
        html = panel.about.value + panel.code.value
        assert 'class="hll"' in html and "fxviz-kernel-fused" in html
        assert all(f">{n}<" in html for n in fused.nodes if n != relu)
        addmm = next(r for r in c.kernels.itertuples() if r.kind == "extern" and "addmm" in r.kernel)
        panel.table.selected = addmm.kernel  # picking a kernel selects its node
        assert explorer.graph.selected == addmm.nodes[0] and "extern_kernels.addmm" in panel.about.value
        assert explorer.graph.marked == list(addmm.nodes)
        explorer.select("x")  # an input: no kernel
        assert "computed by no kernel" in panel.about.value and not panel.code.value
        assert explorer.graph.marked == []
        explorer.select(relu)
        explorer.graph.color_mode = "op"  # another colour mode: the outlines go
        assert explorer.graph.marked == []
        panel.compare.click()
        assert "<td>bn</td>" in panel.modules.value and "eager" in panel.modules.value
        view.show(0, "dynamo")
        assert view.kernels is None
    finally:
        view.close()


def test_report_of_a_compiled_graph_carries_kernels_code_and_times(compiled, tmp_path):
    import html
    import re

    c = compiled["c"]
    page = c.session(0, "forward").to_html(tmp_path / "kernels.html").read_text()
    section = page[page.index('<section class="fxviz-report-kernels">'):]
    forward = c.kernels[c.kernels.part == "forward"]
    for row in forward.itertuples():
        assert html.escape(row.kernel) in section and f"{row.time_us:.1f}" in section
    text = html.unescape(re.sub(r"<[^>]+>", "", section))
    fused = next(r for r in forward.itertuples() if len(r.nodes) >= 3)
    assert ", ".join(fused.nodes) in text and "extern \"C\"" in text  # nodes and C++ code
    assert section.count("<details") == len(forward)
    plain = fxviz.Session(nn.Linear(2, 2), torch.randn(1, 2))
    assert "fxviz-report-kernels" not in plain.to_html(tmp_path / "plain.html").read_text()


def test_module_times_set_eager_beside_compiled(compiled):
    c = compiled["c"]
    table = c.module_times(0)
    assert {"conv", "bn", "proj", "qkv", "norm", "mlp.0", "mlp.2"} <= set(table.module)
    forward = c.kernels[c.kernels.part == "forward"]
    assert table.compiled_us.sum() == pytest.approx(forward[forward.nodes.map(len) > 0].time_us.sum())
    assert (table.eager_us > 0).sum() >= 6 and (table.ratio.dropna() > 0).all()
    conv = table.set_index("module").loc["conv"]
    assert conv.compiled_us == pytest.approx(forward[forward.nodes.map(lambda ns: "convolution" in ns)].time_us.sum())


@pytest.mark.slow
def test_backward_kernels_map_to_the_backward_graph():
    """A training compile (~20 s): the backward's kernels, compiled when it first runs, map
    to the graph that session(0, "backward") opens; no gradient is written."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    c = fxviz.compiled(mlp, torch.randn(8, 16), backend="inductor")
    backward = c.kernels[c.kernels.part == "backward"]
    gm = c.session(0, "backward").current.gm
    covered = [n for nodes in backward.nodes for n in nodes]
    assert len(covered) == len(set(covered)) and set(covered) <= {n.name for n in gm.graph.nodes}
    assert all(_is_view(n) for n in _computing(gm) if n.name not in covered)
    relu_grad = next(r for r in backward.itertuples() if any("le" == n for n in r.nodes))
    assert "where" in relu_grad.nodes and relu_grad.kind == "cpp"  # the ReLU's gradient, fused
    assert (backward.time_us > 0).all() and (0, "backward") in c.kernel_totals
    assert all(p.grad is None for p in mlp.parameters())
    from torch._inductor import debug  # the backward compiles outside inductor's own reset of its debug tables

    assert not any(key.startswith(("cpp_fused_", "extern_kernels."))
                   for key in debug._inductor_triton_kernel_to_post_grad_node_info)

