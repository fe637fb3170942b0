"""The house rules, checked on the source tree: fxviz raises its own errors, only one
module touches torch's private API, the widget layer uses the public core, the code
cites only documents in the project and modules stay small."""
import ast
import builtins
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHIM = "fxviz/_torch_internals/"  # a package: the general shim and dynamo's
BUILTIN_ERRORS = {name for name, value in vars(builtins).items()
                  if isinstance(value, type) and issubclass(value, BaseException)}
# Raised and caught inside one function, never seen by a user.
INTERNAL_RAISES = {("fxviz/passes/fusion_functional.py", "ValueError")}


def _sources() -> dict[str, ast.Module]:
    """Every Python file of the package (``fxviz/widgets`` is a link to ``widgets/``)."""
    files = [p for p in (ROOT / "fxviz").rglob("*.py") if "widgets" not in p.relative_to(ROOT / "fxviz").parts]
    files += (ROOT / "widgets").glob("*.py")
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8")) for p in files}


def _imports(tree: ast.Module) -> list[tuple[str, str]]:
    """(module, name) for every import; name "" for ``import module``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def test_fxviz_raises_only_its_own_errors():
    bare = []
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTIN_ERRORS and (path, exc.id) not in INTERNAL_RAISES:
                    bare.append(f"{path}:{node.lineno} raises {exc.id}")
    assert not bare, bare


def test_private_torch_api_is_used_in_the_shim_only():
    used = []
    for path, tree in _sources().items():
        if path.startswith(SHIM):
            continue
        for module, name in _imports(tree):
            if module.split(".")[0] == "torch" and (_private(module) or name.startswith("_")):
                used.append(f"{path}: {module} {name}".strip())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("_codegen", "_schema", "_count_flops"):
                used.append(f"{path}:{node.lineno} .{node.attr}")
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and ast.unparse(node).startswith("torch.")):
                used.append(f"{path}:{node.lineno} {ast.unparse(node)}")
    assert len(_sources()) > 40 and not used, used


def test_the_widget_layer_imports_no_private_core_module():
    private = [f"{path}: from {module} import {name}"
               for path, tree in _sources().items() if path.startswith("widgets/") for module, name in _imports(tree)
               if module.split(".")[0] == "fxviz" and (_private(module) or name.startswith("_"))]
    assert not private, private


def test_the_code_cites_only_documents_in_the_project():
    cited = set()
    for folder in ("fxviz", "widgets", "tests", "bench"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".js", ".css") and "widgets" not in path.relative_to(ROOT).parts[1:2]:
                cited |= {(str(path.relative_to(ROOT)), doc) for doc in re.findall(r"[\w./-]+\.md\b", path.read_text())}
    missing = sorted(f"{path} cites {doc}" for path, doc in cited if not (ROOT / doc).exists())
    assert cited and not missing, missing


MAX_LINES = 320  # "about 300": a module longer than this holds more than one concept


def test_modules_stay_small():
    files = [*_sources(), *(str(p.relative_to(ROOT)) for p in (ROOT / "widgets").glob("*.js"))]
    sizes = {path: len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in files}
    too_long = sorted(f"{path}: {n} lines" for path, n in sizes.items() if n > MAX_LINES)
    assert len(sizes) > 60 and not too_long, too_long
