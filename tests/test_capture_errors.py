"""Errors a user can act on: short, the user's line, only advice that works, the call as written."""
import collections
import functools
import linecache
import os
import sys

import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture import places
from fxviz.errors import TraceError


class Unrunnable(nn.Module):
    def forward(self, x):
        return x @ torch.ones(5, 5)  # wrong shapes: no capture method can help


class Inner(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        y = self.inner(x)  # fails first: fallback makes it a leaf
        if y.sum() > 0:  # then this fails, and no leaf can help
            return y * 3
        return y


def test_session_names_itself_and_says_the_model_itself_fails():
    with pytest.raises(TraceError) as info:
        fxviz.Session(Unrunnable(), torch.randn(2, 3))
    message = str(info.value)
    assert message.startswith("Session(...): Unrunnable itself fails on the example inputs")
    line = Unrunnable.forward.__code__.co_firstlineno + 1
    assert f"test_capture_errors.py:{line}" in message and "mat1 and mat2 shapes" in message
    assert len(message.splitlines()) == 3 and "fails without fxviz too" in message  # not fxviz's failure
    assert "or build it with a configuration it can run" in message  # CodeGen with n_head=2 fails so, not its inputs
    rendered = info.value._render_traceback_()  # what IPython shows instead of the chained traceback
    assert len(rendered) == 1 and "itself fails" in rendered[0]


def test_fallback_that_cannot_help_says_why_and_the_advice_given_works():
    with pytest.raises(TraceError) as info:
        fxviz.trace(Outer(), tracer="symbolic", fallback=True)
    message = str(info.value)
    assert message.startswith("trace(...): Cannot trace the top-level module (Outer)")
    assert "fallback=True cannot help" in message and "top-level forward" in message
    assert "inner" in message  # it made the failing submodule a leaf first, and says so
    assert "tracer='auto'" in message
    assert fxviz.Session(Outer(), torch.randn(3), tracer="auto").capture.method == "dynamo"


def test_leaf_advice_works_for_a_failing_submodule():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x) + 1

    with pytest.raises(TraceError, match=r"trace\(\.\.\., leaf_modules=\['inner'\]\)"):
        fxviz.trace(Wrapper(), tracer="symbolic")
    gm = fxviz.trace(Wrapper(), tracer="symbolic", leaf_modules=["inner"])
    assert [n.target for n in gm.graph.find_nodes(op="call_module")] == ["inner"]


def test_user_frame_keeps_torchvision_frames():
    """torchvision's path starts with torch's directory name; it is model code all the same."""
    torch_dir = places._TORCH_DIR.rstrip("/")
    sibling = torch_dir + "vision/models/fake.py"
    code = compile("def f():\n    raise ValueError('boom')\n", sibling, "exec")
    namespace = {}
    exec(code, namespace)
    try:
        namespace["f"]()
    except ValueError as exc:
        frame = places.user_frame(exc)
    assert frame is not None and frame.filename == sibling and frame.lineno == 2


def test_user_frame_passes_over_generated_code_for_the_line_that_ran_it():
    """torch.export raises from code it generated (``<string>``): the message points at the
    user's line that ran it, not at ``<string>:1`` with no source."""
    generated = compile("def g():\n    raise ValueError('boom')\n", "<string>", "exec")
    namespace = {}
    exec(generated, namespace)
    try:
        namespace["g"]()  # the user's line
    except ValueError as exc:
        frame = places.user_frame(exc)
        said = places.where(exc)
    assert frame.filename == __file__ and said.endswith('namespace["g"]()  # the user\'s line'), said


def test_explore_names_itself_as_the_user_called_it():
    pytest.importorskip("anywidget")
    with pytest.raises(TraceError, match=r"^explore\(\.\.\.\): Unrunnable itself fails"):
        fxviz.explore(Unrunnable(), torch.randn(2, 3))
    with pytest.raises(TraceError, match=r"^explore\(\.\.\.\): Cannot trace module 'inner'"):
        fxviz.explore(Outer(), torch.randn(3), tracer="symbolic")  # a tracer named by the user


def test_torch_logs_nothing_while_capture_tries_methods(capfd):
    """export and dynamo log each failed meta kernel's traceback before raising: in a
    notebook that is pages of stderr above fxviz's own short message."""
    with pytest.raises(TraceError, match="itself fails"):
        fxviz.trace(Unrunnable(), torch.randn(2, 3))
    err = capfd.readouterr().err
    assert "Traceback" not in err and "fake_tensor" not in err, err[:2000]


def test_a_notebook_cell_is_named_as_ipython_names_it(monkeypatch):
    """Code run in a cell comes from a temporary file; the message names the cell instead."""
    import IPython

    cell_file = "/tmp/ipykernel_1/123.py"
    source = "def forward(x):\n    raise ValueError('boom')\n"
    # IPython keeps a cell's source in linecache (the file itself is never written).
    monkeypatch.setitem(linecache.cache, cell_file, (len(source), None, source.splitlines(True), cell_file))
    code = compile(source, cell_file, "exec")
    namespace = {}
    exec(code, namespace)

    class Compiler:
        @staticmethod
        def format_code_name(name):
            return ("Cell", "In[7]") if name == cell_file else None

    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Shell", (), {"compile": Compiler})())
    try:
        namespace["forward"](None)
    except ValueError as exc:
        assert places.where(exc) == " at Cell In[7], line 2: raise ValueError('boom')"
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)  # plain Python: the file's path
    try:
        namespace["forward"](None)
    except ValueError as exc:
        assert places.where(exc) == f" at {cell_file}:2: raise ValueError('boom')"



def test_library_files_are_named_by_their_package_path_and_no_other_file_is_changed(tmp_path):
    import transformers

    assert places.package_relative(transformers.__file__) == os.path.join("transformers", "__init__.py")
    own = str(tmp_path / "site-packages" / "model.py")  # a folder of the user's that only looks like one
    assert places.package_relative(own) == own


class Tokens(nn.Module):
    """A forward as Hugging Face's: called as ``model(**batch)``."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def forward(self, input_ids, past=None, attention_mask=None):
        return self.embed(input_ids) * attention_mask[..., None]


def test_a_dict_of_keyword_inputs_gets_the_tuple_to_pass_instead():
    batch = collections.UserDict(input_ids=torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 3))  # as HF's
    with pytest.raises(TraceError) as caught:
        fxviz.Session(Tokens(), batch)
    advice = "pass a tuple in forward's order instead, (batch['input_ids'], None, batch['attention_mask'])."
    assert "given to forward as its first argument" in str(caught.value) and advice in str(caught.value)
    session = fxviz.Session(Tokens(), (batch["input_ids"], None, batch["attention_mask"]))  # the advice works
    assert session.current.check.status == "match"


def test_a_tuple_given_to_explore_gets_the_call_that_unpacks_it():
    """explore takes the inputs one by one; Session as one tuple: the slip between them
    reaches the model as a tuple, and the error says which call to write."""
    from fxviz.widgets import explore

    ids, mask = torch.tensor([[1, 2, 3]]), torch.ones(1, 3)
    with pytest.raises(TraceError, match=r"explore\(model, \*inputs\), not explore\(model, inputs\)"):
        explore(Tokens(), (ids, None, mask), profile="off")
    with pytest.raises(TraceError) as caught:  # Session takes the tuple: a wrong input there gets no such advice
        fxviz.Session(Tokens(), ((ids, None, mask),))
    assert "explore(model" not in str(caught.value)
    explorer = explore(Tokens(), ids, None, mask, profile="off")  # the advice works
    assert explorer.session.current.check.status == "match"
    explorer.close()


class Detector(nn.Module):
    """Takes a list of images, as torchvision's detection models do."""

    def forward(self, images):
        if not isinstance(images, list):
            raise ValueError(f"images is expected to be a list of 3d tensors, got {type(images).__name__}")
        return torch.stack([image.mean((1, 2)) for image in images])


def test_a_list_of_images_given_as_the_arguments_gets_the_call_that_wraps_it():
    """A list of example inputs is the arguments, one per item: a model whose one argument
    is the list gets a bare tensor, and the error says how to wrap it."""
    images = [torch.randn(3, 8, 8), torch.randn(3, 6, 6)]
    with pytest.raises(TraceError, match=r"wrap it in a tuple: Session\(model, \(\[image, \.\.\.\],\)\)"):
        fxviz.Session(Detector(), images)
    with pytest.raises(TraceError) as caught:  # a tuple is not a list: no such advice
        fxviz.Session(Detector(), tuple(images))
    assert "wrap it" not in str(caught.value)
    assert fxviz.Session(Detector(), (images,)).current.check.status == "match"  # the advice works


class CountsNonzero(nn.Module):
    """A branch on a data-dependent size: torch.export fails on it, after printing its partial graph."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        print("the model's own line", file=sys.stderr)
        return x * 2 if self.lin(x).nonzero().shape[0] > 2 else x


def test_a_failed_export_prints_no_partial_graph_and_the_models_own_output_passes(capsys):
    session = fxviz.Session(CountsNonzero(), torch.randn(2, 3))
    assert [method for method, _ in session.capture.attempts][1:3] == ["export", "export (strict)"]
    err = capsys.readouterr().err
    assert "def forward" not in err and "nonzero" not in err  # torch printed it twice per export tried
    assert "the model's own line" in err


class BranchesOnAValue(nn.Module):
    """Longformer's ``if is_global_attn:`` (``mask.any().item()``), in small."""

    def forward(self, x):
        return x * 2 if (x > 0).any().item() else x


@pytest.mark.parametrize("tracer", ["export", "export (strict)"])
def test_export_named_on_a_branch_on_a_value_says_what_opens_it(tracer):
    with pytest.raises(TraceError) as caught:
        fxviz.Session(BranchesOnAValue(), torch.randn(2, 3), tracer=tracer)
    text = str(caught.value)
    assert "data-dependent" in text.lower() and "(x > 0).any().item()" in text  # the model's line, strict too
    assert "What to do:" in text and "tracer='auto'" in text and "torch.cond" in text
    session = fxviz.Session(BranchesOnAValue(), torch.randn(2, 3))  # the advice holds
    assert session.capture.method == "dynamo" and session.current.check.status == "match"


class KeepsWhatIsLeft(nn.Module):
    """torchvision's box filtering: ``torch.where(keep)[0]``, a size only values give."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return x[torch.where(self.lin(x)[:, 0] > 0)[0]]


def test_a_model_that_cannot_run_on_the_meta_device_is_told_to_use_a_real_one():
    with torch.device("meta"):
        model, x = KeepsWhatIsLeft(), torch.randn(4, 3)
    with pytest.raises(TraceError) as caught:
        fxviz.Session(model, x)
    text = str(caught.value)
    assert "KeepsWhatIsLeft itself fails" in text and "test_capture_errors.py" in text
    assert "What to do:" in text and "meta device" in text and "real device" in text


def _wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


class WrappedForward(nn.Module):
    """A forward under a (*args, **kwargs) decorator, as Hugging Face's causal LMs have."""

    @_wrapped
    def forward(self, x, mask=None, **kwargs):
        return x + 1


def test_a_forward_under_an_args_kwargs_decorator_is_explained_and_auto_goes_on():
    with pytest.raises(TraceError) as caught:
        fxviz.Session(WrappedForward(), torch.randn(2), tracer="symbolic")
    text = str(caught.value)
    assert "decorator's wrapper taking *args and **kwargs" in text and "co_varnames" in text
    assert "concrete_args" not in text and "leaf_modules" not in text  # advice that cannot help here
    session = fxviz.Session(WrappedForward(), torch.randn(2))
    assert session.capture.method == "export" and session.current.check.status == "match"
    assert any("decorator's wrapper" in str(a) for a in session.capture.attempts)


@pytest.mark.parametrize("model, named", [(None, "NoneType"), ("weights.pt", "str ('weights.pt')"), (3, "int")])
def test_something_that_is_no_model_is_refused_at_once_saying_what_a_model_is(model, named):
    """It was run on the inputs, and the message said the model "itself fails" on them."""
    from fxviz.errors import UsageError

    with pytest.raises(UsageError) as caught:
        fxviz.Session(model, torch.randn(2))
    text = str(caught.value)
    assert text.startswith("Session(...) needs a model to capture") and f"got {named}" in text
    assert "ExportedProgram" in text and ".pt2" in text and "fails" not in text


def test_a_session_without_the_inputs_the_forward_needs_says_which_at_once():
    """It read "The graph after the trace cannot run on the example inputs at node 'input_1'"."""
    from fxviz.errors import UsageError

    with pytest.raises(UsageError) as caught:
        fxviz.Session(nn.Linear(3, 2))
    text = str(caught.value)
    assert "Linear.forward(input" in text and "'input'" in text and "needs example inputs" in text
    with pytest.raises(UsageError, match="missing a required argument: 'y'"):
        fxviz.Session(lambda x, y: x + y, torch.randn(2))
    assert fxviz.trace(nn.Linear(3, 2)).graph.find_nodes(op="placeholder")  # a symbolic trace alone needs none


class Steered(nn.Module):
    def forward(self, x, double):
        return x * 2 if double else x


def test_an_input_fixed_by_concrete_args_is_still_an_input_to_give():
    """torch.fx keeps a concrete arg as an input, guarded to the value it was fixed to."""
    from fxviz.errors import UsageError

    with pytest.raises(UsageError, match="missing a required argument: 'double'"):
        fxviz.Session(Steered(), torch.randn(2), tracer="symbolic", concrete_args={"double": True})
    session = fxviz.Session(Steered(), (torch.randn(2), True), tracer="symbolic", concrete_args={"double": True})
    assert session.current.check.status == "match"
