"""What a fresh process loads for ``import fxviz`` and a first view: a symbolically traced
model's first view loads none of torch's compiler stack (dynamo, inductor, AOT autograd,
sympy), and ``import fxviz`` leaves torch's FLOP counter (which imports triton) to the
first run that counts. Each is measured against what ``import torch`` loaded itself
(torch 2.14 imports torch.export and make_fx's proxy_tensor on its own), in a subprocess:
this test process has loaded everything already. Importing fxviz runs no cyclic collection
(after torchvision, one full collection was 0.15-0.35 s of it) and leaves the collector on."""
import json
import subprocess
import sys
from typing import Any

#: Loaded only where a capture needs them: torch.compile's stack and the symbolic shapes it uses.
COMPILER_STACK = ("torch.export", "torch._export", "torch._dynamo", "torch._inductor", "torch._functorch",
                  "torch._functorch.aot_autograd", "torch.fx.experimental.proxy_tensor", "sympy")
FLOP_COUNTER = ("torch.utils.flop_counter", "triton")


def _loaded(code: str) -> dict[str, Any]:
    """Run ``code`` after ``import torch`` in a fresh process: what it put in ``SEEN``, and per
    ``mark(label)`` it called, the modules loaded then that ``import torch`` had not loaded."""
    script = ("import json, sys\nimport torch\nBASE = set(sys.modules)\nSEEN = {}\n"
              "def mark(label):\n    SEEN[label] = sorted(set(sys.modules) - BASE)\n"
              f"{code}\nprint(json.dumps(SEEN))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_first_view_of_a_symbolic_model_loads_no_compiler_stack():
    seen = _loaded(
        "import fxviz\nfrom torch import nn\nfrom fxviz.draw.render import render\n"
        "model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))\n"
        "session = fxviz.Session(model.eval(), (torch.randn(1, 3, 8, 8),))\n"
        "svg = render(session.current.graph).drawn().svg\n"
        "assert session.capture.method == 'symbolic' and '<svg' in svg, (session.capture.method, svg[:80])\n"
        "mark('view')")
    assert "fxviz.session" in seen["view"]  # what the first view loaded is seen
    assert [name for name in COMPILER_STACK if name in seen["view"]] == []


def test_import_fxviz_leaves_the_flop_counter_to_its_first_use():
    seen = _loaded("import fxviz\nmark('import')\nfxviz._torch_internals.FlopCounter\nmark('read')")
    assert [name for name in FLOP_COUNTER if name in seen["import"]] == []
    assert "torch.utils.flop_counter" in seen["read"]  # read, it is imported
    assert [name for name in COMPILER_STACK if name in seen["import"]] == []


def test_import_fxviz_runs_no_collection_and_leaves_the_collector_on():
    seen = _loaded("import gc\ngc.collect()\nruns = SEEN['runs'] = []\n"  # counts start at 0
                   "gc.callbacks.append(lambda phase, info: runs.append(info['generation']) if phase == 'start' else None)\n"
                   "import fxviz\nSEEN['enabled'] = gc.isenabled()\nSEEN['while importing'] = list(runs)\ngc.collect()\ngc.callbacks.clear()")
    assert seen["while importing"] == [] and seen["enabled"] is True
    assert 2 in seen["runs"]  # the callback sees collections: gc.collect()'s


def test_the_explorers_first_display_loads_no_pandas_and_its_first_comparison_does():
    """pandas (0.2 s cold) and matplotlib are for tables and charts of timings and errors: the
    Explorer's first display, its static copy's node table included, needs neither."""
    seen = _loaded(
        "import fxviz\nfrom torch import nn\n"
        "model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))\n"
        "ex = fxviz.explore(model, torch.randn(2, 4), profile='off')\n"
        "page = ex._repr_mimebundle_()['text/html']\n"
        "assert '<td>1 (ReLU)</td>' in page, page[-400:]\n"
        "mark('display')\n"
        "ex.session.apply('lower_modules')\n"
        "from fxviz.widgets.coloring import comparison\n"
        "comparison(ex.session.steps[0], ex.session.steps[1]).structure\n"
        "ex.close()\n"
        "mark('compared')")
    assert "fxviz.widgets.explorer" in seen["display"]
    assert [name for name in ("pandas", "matplotlib") if name in seen["display"]] == []
    assert "pandas" in seen["compared"]
