"""The core never reaches up into the Jupyter layer: ``fxviz/`` imports no ``fxviz.widgets``,
ipywidgets or anywidget, the HTML report included (it takes the front-end's files as
package data, :mod:`fxviz.assets`)."""
import ast
import pathlib
import subprocess
import sys

import fxviz

JUPYTER = ("fxviz.widgets", "ipywidgets", "anywidget")
CORE = pathlib.Path(fxviz.__file__).parent


def _loaded_after(code: str) -> list[bool]:
    check = f"{code}\nimport sys; print(*[name in sys.modules for name in {JUPYTER!r}])"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    return out.stdout.split()[-len(JUPYTER):]


def test_core_import_does_not_load_the_jupyter_layer():
    assert _loaded_after("import fxviz") == ["False"] * 3


def test_writing_a_report_does_not_load_the_jupyter_layer(tmp_path):
    page = tmp_path / "r.html"
    code = (
        "import torch, fxviz\n"
        "s = fxviz.Session(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), (torch.randn(2, 4),))\n"
        f"s.to_html({str(page)!r})"
    )
    assert _loaded_after(code) == ["False"] * 3
    text = page.read_text(encoding="utf-8")
    assert 'id="fxviz-graph-view-esm"' in text and "class HostModel" in text  # the front-end came along


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement names (``from a import b``: ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return []


def _jupyter_imports(tree: ast.Module, allowed: ast.AST | None = None) -> list[tuple[int, str]]:
    """Every import of the Jupyter layer in ``tree``, but those inside ``allowed``."""
    exempt = {id(n) for n in ast.walk(allowed)} if allowed is not None else set()
    return [(node.lineno, name) for node in ast.walk(tree) if id(node) not in exempt
            for name in _imported(node) if any(name == j or name.startswith(j + ".") for j in JUPYTER)]


def test_no_core_module_imports_the_jupyter_layer():
    offenders = {}
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        explore = next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "explore"), None)
        found = _jupyter_imports(tree, explore if path == CORE / "__init__.py" else None)
        if found:
            offenders[str(path.relative_to(CORE))] = found
    assert offenders == {}
    # the walk does see an import of the layer: the one allowed, explore's, inside its function
    init = ast.parse((CORE / "__init__.py").read_text(encoding="utf-8"))
    assert [name for _, name in _jupyter_imports(init)] == ["fxviz.widgets", "fxviz.widgets.explore"]
