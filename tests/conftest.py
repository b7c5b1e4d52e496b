import contextlib
import io
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
DEMO = ROOT / "examples" / "banhang"
# helper modules (fakes, builders, scripted model replies) import by name from any test folder,
# whichever subset of the suite runs; test file names are unique across the folders
for folder in (TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__"))):
    sys.path.insert(0, str(folder))

from openai_server import OpenAIServer  # noqa: E402 - tests/ is on sys.path from here


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rageval gate` appends its report to $GITHUB_STEP_SUMMARY when it is set: a suite run in a
    GitHub Actions job must not write the job's summary (a test that wants one sets its own)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def model_server() -> Iterator[Callable[..., OpenAIServer]]:
    """Start the local OpenAI-compatible server (tests/openai_server.py) on 127.0.0.1:
    ``model_server(responder=…, rules=…, usage=…, latency_s=…, require_api_key=…)`` returns it
    running; every server a test started is stopped when the test ends."""
    started: list[OpenAIServer] = []

    def start(**options) -> OpenAIServer:
        server = OpenAIServer(**options).start()
        started.append(server)
        return server
    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def copy_demo() -> Callable[[Path], Path]:
    """Copy the demo project (examples/banhang, without a response cache a local run left there):
    ``copy_demo(folder)`` returns ``folder``. Session-scoped so module-wide fixtures can use it."""
    def copy(dest: Path) -> Path:
        shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns(".rageval-cache"))
        return dest
    return copy


@pytest.fixture
def seed_project(tmp_path):
    """The seed article's incident as a replay project: {'chunk-200': config path, 'chunk-800': …}."""
    import seed_data
    return seed_data.write_project(tmp_path / "seed")


@pytest.fixture
def run_cli(capsys):
    """Run the rageval CLI in-process; returns (exit code, stdout, stderr)."""
    from rageval.cli import main

    def run(*argv):
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run


def unwrapped(stdout: str) -> str:
    """`rageval gate`'s output with its wrapped lines joined back (rageval.gate.terminal wraps at 80
    columns: a continuation line is indented 4 or more spaces and is no ``↳`` line)."""
    out: list[str] = []
    for line in stdout.splitlines():
        if out and line.startswith("    ") and not line.lstrip().startswith("↳"):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if stdout.endswith("\n") else "")


def run_in_process(*argv):
    """The rageval CLI in-process with its output captured (for module-scoped fixtures, which cannot
    use capsys): (exit code, stdout, stderr)."""
    from rageval.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()
