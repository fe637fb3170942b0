"""Checks that say what they cover: random inputs reach every tensor of the inputs' pytree,
a graph specialised to its example is said to be so, and a check over one of dynamo's
graphs says how many of them it covered (issue 32)."""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import NamedTuple

import pytest
import torch
from torch import nn

from fxviz.checks.check import compare_outputs
from fxviz.checks.inputs import EXAMPLE_ONLY, random_like
from fxviz.checks.scope import failed_beyond_example
from fxviz.errors import InputError
from fxviz.session import Session
from fxviz.widgets import explore
from fxviz.widgets.compile_view import CompileExplorer


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


@dataclasses.dataclass(frozen=True)
class Boxes:
    coords: torch.Tensor
    extra: list


@dataclasses.dataclass
class Output(collections.OrderedDict):
    """Like Hugging Face's ModelOutput: a dataclass whose fields are also its items."""

    hidden: torch.Tensor = None

    def __post_init__(self):
        self["hidden"] = self.hidden


def _example():
    image = torch.randn(3, 4, 4)
    ids = torch.tensor([[2, 5, 7]])
    mask = torch.tensor([True, False, True])
    return (
        [image],
        {"ids": ids, "mask": mask, "scale": 0.5},
        Pair(torch.randn(2), torch.randn(2)),
        Boxes(torch.randn(2, 4), [torch.randn(3)]),
        Output(hidden=torch.randn(2, 2)),
        None,
    )


def test_random_inputs_reach_every_tensor_of_the_pytree():
    example = _example()
    kept = [t.clone() for t in _float_leaves(example)]
    varied = random_like(example, seed=1)
    old, new = _float_leaves(example), _float_leaves(varied)
    assert len(new) == len(old) == 6  # the image, the pair's two, the boxes' and the one listed in them, the output's
    for before, after in zip(old, new):
        assert after.shape == before.shape and after.dtype == before.dtype
        assert not torch.equal(after, before)
    assert all(torch.equal(a, b) for a, b in zip(_float_leaves(example), kept))  # the example itself is untouched
    assert type(varied[0]) is list and type(varied[2]) is Pair and type(varied[3]) is Boxes
    assert varied[1]["scale"] == 0.5 and varied[5] is None
    assert varied[1]["mask"] is example[1]["mask"]  # bool masks stay as they are
    ids = varied[1]["ids"]
    assert ids.dtype == torch.int64 and int(ids.min()) >= 2 and int(ids.max()) <= 7 and not torch.equal(ids, example[1]["ids"])
    # a field that is also an item gets one new tensor, not two that disagree
    assert varied[4]["hidden"] is varied[4].hidden and type(varied[4]) is Output
    assert example[4]["hidden"] is example[4].hidden


def test_random_inputs_are_made_again_by_their_seed_and_keep_aliasing():
    x = torch.randn(5)
    first, again, other = random_like(([x, x],), 3), random_like(([x, x],), 3), random_like(([x, x],), 4)
    assert torch.equal(first[0][0], again[0][0]) and not torch.equal(first[0][0], other[0][0])
    assert first[0][0] is first[0][1]  # one tensor passed twice is one new tensor


def _float_leaves(value):
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if dataclasses.is_dataclass(value):
        return [t for f in dataclasses.fields(value) for t in _float_leaves(getattr(value, f.name))]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _float_leaves(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _float_leaves(v)]
    return []


class Detector(nn.Module):
    """Detection-style: a list of images in, as many rows out as the image has positive
    pixels (make_fx bakes the example's count into a reshape)."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(2, 2)

    def forward(self, images):
        found = torch.nonzero(images[0] > 0)
        return self.head(found.float().reshape(found.shape[0], 2))


class Counter(nn.Module):
    """Its output's size is the number of positive inputs: make_fx fixes it at the example's."""

    def forward(self, x):
        return torch.ones(torch.nonzero(x > 0).shape[0]) + 1


def test_a_graph_specialised_to_a_list_inputs_example_is_said_to_match_there_only():
    torch.manual_seed(0)
    images = [torch.randn(4, 4)]
    check = Session(Detector(), (images,), tracer="make_fx").current.check
    assert check.status == "example only" and not check.ok
    assert check.summary == EXAMPLE_ONLY == "matches on the example only: output sizes depend on the data"
    assert check.message.startswith(EXAMPLE_ONLY + ": the graph fails on a random input")
    assert "is invalid for input of size" in check.message and "tracer='symbolic'" in check.message
    # the same model traced symbolically follows the data: a plain match on the same random inputs
    assert Session(Detector(), (images,), tracer="symbolic").current.check.status == "match"


def test_a_graph_whose_output_size_is_the_examples_is_said_to_match_there_only():
    torch.manual_seed(0)
    check = Session(Counter(), torch.randn(8), tracer="make_fx").current.check
    assert check.status == "example only" and check.summary == EXAMPLE_ONLY
    assert "expected a tensor of shape" in check.message and "input 0" not in check.message
    assert Session(Counter(), torch.randn(8), tracer="symbolic").current.check.status == "match"


def test_sizes_that_differ_on_the_example_or_values_that_differ_stay_a_mismatch():
    a, b = torch.ones(3), torch.ones(4)
    assert compare_outputs([a, a], [a, b], example_only=True).status == "example only"
    assert compare_outputs([a, a], [a, b]).status == "mismatch"  # two steps compared: no capture's example
    assert compare_outputs([a, a], [b, a], example_only=True).status == "mismatch"  # the example itself differs
    assert compare_outputs([a, a, a], [a, b, a * 2], example_only=True).status == "mismatch"  # a value differs too
    assert compare_outputs([a], [a]).summary == "match"


def _passed_through(t):
    return t


def _pass_through_first_input(gm, *, nodes=None):
    """A pass that changes nothing the graph computes: a call on its first input."""
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(x):
        same = gm.graph.call_function(_passed_through, (x,))
    x.replace_all_uses_with(same, delete_user_cb=lambda user: user is not same)
    return gm


def test_a_step_after_a_specialised_trace_is_said_to_match_on_the_example_only_too():
    torch.manual_seed(0)
    session = Session(Counter(), torch.randn(8), tracer="make_fx")
    step = session.apply(_pass_through_first_input)
    assert step.check.status == "example only" and session.steps[0].check.status == "example only"


def test_a_graph_failing_beyond_an_example_it_gets_wrong_is_a_mismatch():
    failure = RuntimeError("shape '[6, 2]' is invalid")
    wrong = failed_beyond_example(failure, [torch.ones(2), torch.ones(2)], lambda: torch.zeros(2))
    assert wrong.status == "mismatch" and "fails on a random input" in wrong.message and "RuntimeError" in wrong.message
    right = failed_beyond_example(failure, [torch.ones(2), torch.ones(2)], lambda: torch.ones(2))
    assert right.status == "example only" and right.n_inputs == 2 and math.isinf(right.max_abs)


class Branchy(nn.Module):
    """A branch on a tensor's value: tracer="auto" ends at dynamo's two graphs."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            h = h * 2
        return self.b(h.relu())


@pytest.fixture(scope="module")
def branchy_session():
    torch.manual_seed(0)
    session = Session(Branchy(), torch.randn(2, 3))
    assert session.capture.method == "dynamo" and len(session.capture.graphs) == 2
    return session


def test_a_check_on_one_of_dynamos_graphs_says_which_of_how_many(branchy_session):
    check = branchy_session.steps[0].check
    assert check.status == "match" and check.scope == "graph 1 of 2 checked"
    assert check.summary == "match · graph 1 of 2 checked"
    assert "ran this one alone (listed as graph 0)" in check.message and "check_all_graphs()" in check.message


def test_check_all_graphs_gives_one_result_per_graph(branchy_session):
    results = branchy_session.check_all_graphs()
    assert [r.status for r in results] == ["match", "match"]
    assert [r.scope for r in results] == ["graph 1 of 2 checked", "graph 2 of 2 checked"]
    assert results[0] is branchy_session.current.check  # the graph it is open on: its own current step's


def test_a_single_graph_session_checks_itself_alone_and_says_nothing_more():
    session = Session(nn.Linear(3, 2), torch.randn(2, 3))
    assert session.check_all_graphs() == [session.current.check]
    assert session.current.check.scope == "" and session.current.check.summary == "match"


def test_the_compile_view_checks_every_graph_and_lists_them():
    torch.manual_seed(0)
    widget = explore(Branchy(), torch.randn(2, 3), profile="off")
    try:
        assert isinstance(widget, CompileExplorer)
        assert widget.check_all.description == "check all 2 graphs" and widget.check_all.layout.display == ""
        assert "match · graph 1 of 2 checked" in widget.explorer.badge.value  # the Explorer's badge says it
        assert widget.checks.value == ""
        widget.check_all.click()
        listed = widget.checks.value
        assert "2 of 2 graphs checked: 2 match" in listed
        assert listed.count("fxviz-badge-match") == 2 and "graph 0: " in listed and "graph 1: " in listed
        assert "graph 1 of 2 checked</span>" not in listed  # each row names its graph: the badge its status
        assert widget.check_all.description == "check all 2 graphs" and not widget.check_all.disabled
        assert widget.compiled.session(1).current.check_done  # the other graph's session, kept for show(1)
    finally:
        widget.close()


def test_the_compile_view_offers_no_check_all_for_one_graph():
    widget = explore(nn.Linear(3, 2), torch.randn(2, 3), tracer="dynamo", profile="off")
    try:
        assert len(widget.compiled.graphs) == 1 and widget.check_all.layout.display == "none"
    finally:
        widget.close()


def test_a_graph_that_cannot_open_is_an_error_row_with_its_text_escaped():
    widget = explore(Branchy(), torch.randn(2, 3), profile="off")
    try:
        opened = widget.compiled.session

        def session(index, part="dynamo"):
            if index == 1:
                raise InputError("graph <b>1</b> is broken")
            return opened(index, part)

        widget.compiled.session = session
        results = widget.check_graphs()
        assert [r.status for r in results] == ["match", "error"]
        assert results[1].message.startswith("opening graph 1 failed: InputError: graph <b>1</b> is broken.")
        listed = widget.checks.value
        assert "2 of 2 graphs checked: 1 match, 1 error" in listed
        assert "<b>1</b>" not in listed and "graph &lt;b&gt;1&lt;/b&gt; is broken" in listed
    finally:
        widget.close()
