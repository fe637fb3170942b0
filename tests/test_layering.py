"""The core never reaches up into the Jupyter layer: ``fxviz/`` imports no ``fxviz.widgets``,
ipywidgets or anywidget, the HTML report included (it takes the front-end's files as
package data, :mod:`fxviz.present.assets`)."""
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


#: Imports inside a function that close a circle on purpose, and why.
CIRCLE_BY_DESIGN = {
    ("fxviz.compiler.graphs", "fxviz.session"): "a Compiled opens a Session per graph, and a Session of one of "
                                              "several graphs checks them all through a Compiled",
}


def _module_name(path: pathlib.Path) -> str:
    parts = ["fxviz", *path.relative_to(CORE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of_core() -> dict[str, set[str]]:
    """Per module of ``fxviz/``, the modules of ``fxviz/`` it imports anywhere in its code,
    in a function too (``from a import b``: ``a.b`` if that is a module, else ``a``)."""
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:  # relative: from its package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                node = ast.ImportFrom(module=".".join(filter(None, [base, node.module])), names=node.names, level=0)
            for imported in _imported(node):
                while imported and imported not in modules:
                    imported = imported.rpartition(".")[0]
                if imported and imported != name and not name.startswith(imported + "."):  # its own package: no edge
                    found.add(imported)
        graph[name] = found
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (as the modules along it), or []."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(module: str, path: list[str]) -> list[str]:
        state[module] = 1
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return path[path.index(imported):] + [imported]
            if imported not in state and (found := walk(imported, [*path, imported])):
                return found
        state[module] = 2
        return []

    return next((found for module in sorted(graph) if module not in state and (found := walk(module, [module]))), [])


def test_no_import_circles_in_the_core():
    graph = _imports_of_core()
    assert "fxviz.timing.aten_breakdown" in graph["fxviz.timing.profiling"]  # the walk sees imports, relative ones too
    assert "fxviz.capture.places" in graph["fxviz.capture.keywords"]
    for (importer, imported) in CIRCLE_BY_DESIGN:
        graph[importer].discard(imported)
    assert _circle(graph) == []
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # it finds one where there is
