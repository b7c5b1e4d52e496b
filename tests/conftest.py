import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# helper modules (fakes, builders, scripted model replies) import by name from any test folder,
# whichever subset of the suite runs; test file names are unique across the folders
for folder in (TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__"))):
    sys.path.insert(0, str(folder))


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
