"""The pass contract: specs from signatures, registration, and what a pass may return."""
import pathlib
import re
import sys
from typing import Literal

import pytest
import torch
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult

from fxviz import passes
from fxviz.errors import PassError
from fxviz.passes import NothingToDo, PassParam, describe, register
from fxviz.discovery import import_modules
from fxviz.passes.registry import _REGISTRY
from fxviz.capture import trace

# The Passes tab's order: what a reader of the tab has learnt to expect.
BUILT_INS = ("fuse_conv_bn", "lower_modules", "replace_op", "inline_module",
             "eliminate_dead_code", "channels_last", "fake_quantize", "run_decompositions")


@pytest.fixture
def registry():
    """Registrations made by a test are forgotten after it."""
    saved = dict(_REGISTRY)
    yield
    _REGISTRY.clear()
    _REGISTRY.update(saved)


def scale_outputs(gm, *, nodes=None, factor: float = 2.0, mode: Literal["mul", "div"] = "mul"):
    """Multiply the graph's output by a factor."""
    output = gm.graph.find_nodes(op="output")[0]
    with gm.graph.inserting_before(output):
        scaled = gm.graph.call_function(torch.mul, (output.args[0], factor))
    output.args = (scaled,)
    return gm


def test_built_ins_are_registered_first():
    assert passes.available()[: len(BUILT_INS)] == BUILT_INS == passes.BUILT_INS


def test_every_module_of_the_package_that_registers_a_pass_is_discovered():
    folder = pathlib.Path(passes.__file__).parent
    registering = {f"fxviz.passes.{p.stem}" for p in folder.glob("*.py")
                   if re.search(r"^@register\(", p.read_text(), re.M)}
    assert registering == {passes.get(name).fn.__module__ for name in passes.BUILT_INS}
    assert all(getattr(passes, passes.get(name).fn.__name__) is passes.get(name).fn for name in BUILT_INS)


def test_a_new_pass_module_is_one_file_placed_by_its_order(registry, tmp_path, monkeypatch):
    package = tmp_path / "more_passes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "double.py").write_text(
        "from fxviz.passes import register\n"
        "@register(order=15, name='double_outputs')\n"
        "def double_outputs(gm):\n"
        "    'Double every output.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert import_modules("more_passes", [str(package)]) == ("more_passes.double",)
        register(scale_outputs)  # no order: after the built-ins
        assert passes.available() == (BUILT_INS[0], "double_outputs", *BUILT_INS[1:], "scale_outputs")
    finally:
        for name in ("more_passes", "more_passes.double"):
            sys.modules.pop(name, None)


def test_a_spec_describes_the_parameters_for_a_form():
    spec = describe(scale_outputs, preserves_semantics=False)
    assert spec.name == "scale_outputs"
    assert spec.doc == "Multiply the graph's output by a factor."
    assert spec.params == (
        PassParam("factor", float, 2.0, None),
        PassParam("mode", Literal["mul", "div"], "mul", ("mul", "div")),
    )
    assert spec.targets_nodes and not spec.needs_eval and not spec.preserves_semantics


def test_a_required_parameter_must_be_given():
    def needs_k(gm, *, k: int):
        return gm

    spec = describe(needs_k)
    assert spec.params[0].required and not spec.targets_nodes
    with pytest.raises(PassError, match="Pass 'needs_k' needs the parameter 'k'"):
        spec(trace(nn.ReLU()))


def test_unknown_parameters_and_unexpected_nodes_are_refused():
    spec = describe(scale_outputs)
    gm = trace(nn.ReLU())
    with pytest.raises(PassError, match=r"has no parameter 'fcator'; its parameters are: factor, mode"):
        spec(gm, fcator=3)
    with pytest.raises(PassError, match=r"mode='pow' is not one of 'mul', 'div'"):
        spec(gm, mode="pow")
    with pytest.raises(PassError, match="acts on the whole graph; call it without nodes="):
        passes.get("eliminate_dead_code")(gm, nodes=["x"])
    with pytest.raises(PassError, match="no node named 'nope' in this graph"):
        spec(gm, nodes=["nope"])


def test_register_works_bare_with_options_and_as_a_call(registry):
    register(scale_outputs)
    assert passes.get("scale_outputs").fn is scale_outputs

    @register(name="scaled_thrice", preserves_semantics=False)
    def scaled(gm, *, nodes=None):
        return scale_outputs(gm, factor=3.0)

    assert passes.get("scaled_thrice").preserves_semantics is False
    assert passes.resolve(scaled) is passes.get("scaled_thrice")


def test_a_name_taken_by_another_function_is_refused(registry):
    def fuse_conv_bn(gm):
        return gm

    message = r"A pass named 'fuse_conv_bn' is already registered \(fxviz.passes.fusion.fuse_conv_bn\)"
    with pytest.raises(PassError, match=message):
        register(fuse_conv_bn)
    register(fuse_conv_bn, replace=True)
    assert passes.get("fuse_conv_bn").fn is fuse_conv_bn


def test_registering_the_same_function_again_replaces_it(registry):
    register(scale_outputs)
    register(scale_outputs, name="scale_outputs", preserves_semantics=False)
    assert passes.get("scale_outputs").preserves_semantics is False


def test_unknown_pass_names_list_the_available_ones():
    with pytest.raises(PassError, match="No pass named 'fuse'; available: fuse_conv_bn, lower_modules"):
        passes.get("fuse")


def test_unregister_forgets_a_pass(registry):
    register(scale_outputs)
    passes.unregister("scale_outputs")
    assert "scale_outputs" not in passes.available()
    with pytest.raises(PassError, match="No pass named 'scale_outputs'"):
        passes.unregister("scale_outputs")


def test_return_values_are_normalised_to_a_pass_result():
    gm = trace(nn.ReLU())
    result = describe(scale_outputs)(gm)
    assert isinstance(result, PassResult) and result.modified and result.graph_module is gm
    assert "torch.mul" in gm.code  # recompiled

    def says_unchanged(gm):
        return PassResult(gm, False)

    with pytest.raises(NothingToDo, match="Pass 'says_unchanged' found nothing to change"):
        describe(says_unchanged)(gm)

    def returns_number(gm):
        return 3

    with pytest.raises(PassError, match="returned a int; return a GraphModule, a PassResult or None"):
        describe(returns_number)(gm)


class WithRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(x)


def test_a_failing_pass_names_the_node_it_was_working_on():
    def breaks_on_relu(gm):
        for node in gm.graph.nodes:
            if node.op == "call_module":
                raise ValueError("cannot handle this")

    with pytest.raises(PassError, match=r"Pass 'breaks_on_relu' failed at node 'relu': ValueError: cannot handle this"):
        describe(breaks_on_relu)(trace(WithRelu()))


def test_a_graph_that_fails_lint_is_refused_naming_the_node():
    def use_before_definition(gm):
        relu = gm.graph.find_nodes(op="call_module")[0]
        with gm.graph.inserting_before(relu):
            gm.graph.call_function(torch.neg, (relu,))

    message = r"Pass 'use_before_definition' produced an invalid graph: .*'relu' of Node 'neg'"
    with pytest.raises(PassError, match=message):
        describe(use_before_definition)(trace(WithRelu()))


def test_passes_with_star_args_cannot_be_described():
    def bad(gm, *extra):
        return gm

    with pytest.raises(PassError, match=r"Pass 'bad' takes \*extra; passes take keyword parameters only"):
        describe(bad)


def test_every_pass_description_is_a_whole_sentence_as_the_panel_shows_it():
    """The description was the docstring's first line: fuse_conv_bn's read '... Linear
    before it (modules,' in the Passes tab."""
    from fxviz.widgets.panel_passes import PassPanel

    panel = PassPanel(goto=lambda index: None)
    panel.select.options = passes.available()
    for name in passes.available():
        doc = passes.get(name).doc
        assert doc.endswith(".") and doc.count("(") == doc.count(")") and "``" not in doc and "\n" not in doc, doc
        panel.select.value = name
        assert panel.doc.value.startswith(doc)
    assert passes.get("fuse_conv_bn").doc.endswith("(modules, F.batch_norm calls and ATen batch_norm ops alike).")


def test_a_description_is_the_first_paragraph_of_the_docstring():
    def wrapped(gm):
        """Do one thing, explained
        over two lines.

        Details that the form does not show."""

    assert describe(wrapped).doc == "Do one thing, explained over two lines."
