"""The `rageval` command's start-up: asking for help, the version or a command's help loads none of
the pipeline — what a command needs is imported when it runs. Held by what gets imported, not by a
wall-clock timing (bench/bench_startup.py measures the time)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from conftest import ROOT

import rageval
from rageval import cli

#: what `--help` must not pay for: numpy alone is ~0.2 s, openai ~0.45 s; the config reader, the
#: pipeline and the gate pull in yaml, jinja2 and numpy
HEAVY = ("numpy", "yaml", "jinja2", "openai", "requests", "rageval.config", "rageval.settings", "rageval.pipeline",
         "rageval.flow", "rageval.gate.report", "rageval.commands.shared")
CONSOLE_SCRIPT = "from rageval.cli import main; sys.exit(main())"     # what pip's `rageval` script runs
PYTHON_M = "runpy.run_module('rageval', run_name='__main__', alter_sys=True)"
PROBE = """\
import json, runpy, sys
sys.argv = ["rageval", *{argv!r}]
try:
    {entry}
except SystemExit as exc:
    code = exc.code
print("\\nPROBE " + json.dumps([code, [m for m in {heavy!r} if m in sys.modules]]))
"""


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command the parser knows, by its words: ("run",), ("golden", "add"), …"""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= commands(sub, (*prefix, name)) or {(*prefix, name): sub}
    return found


def probe(entry: str, argv: list[str]) -> tuple[int, list[str], str]:
    """Run the command in a fresh interpreter: (exit code, heavy modules it loaded, its output)."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, entry=entry, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    line = proc.stdout.rstrip().rsplit("\n", 1)[-1]
    assert line.startswith("PROBE "), proc.stdout[-2000:] + proc.stderr[-2000:]
    code, loaded = json.loads(line.removeprefix("PROBE "))
    return code, loaded, proc.stdout


COMMANDS = commands(cli.make_parser())


def test_every_command_is_probed():
    assert {"validate", "run", "baseline", "gate", "report", "judge-agreement", "judge-pair"} <= {c[0] for c in COMMANDS}
    assert ("golden", "add") in COMMANDS and ("golden", "candidates") in COMMANDS


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["no-such-command"]])
@pytest.mark.parametrize("entry", [CONSOLE_SCRIPT, PYTHON_M], ids=["rageval", "python -m rageval"])
def test_help_and_version_load_no_pipeline(entry, argv):
    code, loaded, output = probe(entry, argv)
    assert loaded == []
    assert code == (2 if argv == ["no-such-command"] else 0)
    if argv == ["--help"]:
        assert "usage: rageval" in output and "judge-pair" in output


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
def test_a_commands_help_loads_none_of_its_code(command):
    code, loaded, output = probe(CONSOLE_SCRIPT, [*command, "--help"])
    assert (code, loaded) == (0, [])
    assert f"usage: rageval {' '.join(command)}" in output


def test_a_command_loads_its_module_when_it_runs(tmp_path):
    """The other side: `validate` does import what it needs (the probe sees it), and works."""
    code, loaded, output = probe(CONSOLE_SCRIPT, ["validate", str(ROOT / "examples/banhang"), "--no-git"])
    assert code == 0 and "ok: rageval.yml: golden set banhang-returns" in output
    assert {"numpy", "yaml", "rageval.config", "rageval.pipeline"} <= set(loaded)


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
def test_every_command_names_a_function_that_exists(command):
    assert callable(cli.handler(COMMANDS[command].get_default("handler")))


def test_the_default_config_name_is_the_librarys():
    assert cli.make_parser().parse_args(["run"]).config == rageval.DEFAULT_CONFIG


def test_the_start_up_bench_runs(tmp_path):
    """bench/bench_startup.py (the README's start-up figures) measures every command it names."""
    out = tmp_path / "startup.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "bench_startup.py"), "--runs", "1", "--json", str(out)],
                   capture_output=True, text=True, timeout=120, cwd=ROOT, check=True)
    figures = json.loads(out.read_text(encoding="utf-8"))["median"]
    assert set(figures) == {"now", "reference"} and "rageval --help" in figures["now"]
    assert all(m["wall_s"] > 0 and m["cpu_s"] >= 0 for per in figures.values() for m in per.values())


def test_a_project_folder_and_a_config_in_it(run_cli, tmp_path, capsys):
    """`rageval gate examples/banhang --config rageval-800.yml` reads the 800-token config in that
    folder; a config file given both ways is refused (it used to drop --config silently)."""
    demo = ROOT / "examples" / "banhang"
    code, out, err = run_cli("validate", demo, "--config", "rageval-800.yml", "--no-git")
    assert code == 0 and "rageval-800.yml" in out and "≤800 tokens" in out
    with pytest.raises(SystemExit) as exit_:
        run_cli("validate", demo / "rageval.yml", "--config", demo / "rageval-800.yml")
    assert exit_.value.code == 2 and "name two configs; give one of them" in capsys.readouterr().err
