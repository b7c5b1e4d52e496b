"""Fixtures of the action's tests: the demo workspace with main's baseline, and a fake GitHub
holding that baseline as an artifact (plus decoys that must not be used).

The test modules import them by name: a conftest.py here would shadow tests/conftest.py, which
other tests import as ``conftest``."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import yaml
from action_harness import (
    ARTIFACT,
    CFG_200,
    CFG_800,
    CFG_LENIENT,
    LENIENT_GATE,
    TOKEN,
    expected_verdict,
    zip_json,
)
from github_server import FakeGitHub
from test_client import SPEC, check_contract

from rageval.config import load_config
from rageval.files import write_json
from rageval.flow import run_repeats
from rageval.gate.verdict import Verdict
from rageval.pipeline.runner import prepare
from rageval.results import RunResult, load_result


@pytest.fixture(scope="session")
def ws(tmp_path_factory, copy_demo) -> Path:
    """A workspace holding the demo project, a lenient copy of its config and main's baseline."""
    root = tmp_path_factory.mktemp("workspace")
    copy_demo(root / "examples" / "banhang")
    data = yaml.safe_load((root / CFG_200).read_text(encoding="utf-8"))
    data["gate"] = LENIENT_GATE
    (root / CFG_LENIENT).write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    # main runs the lenient policy too: the policy a PR is held to is the stricter of main's and its own
    baseline = run_repeats(prepare(load_config(root / CFG_LENIENT), env={}), 1)
    write_json(root / "baseline" / "main.json", baseline)
    return root


@pytest.fixture(scope="session")
def baseline(ws) -> RunResult:
    return load_result(ws / "baseline" / "main.json")


@pytest.fixture(scope="session")
def incident_verdict(ws, baseline) -> Verdict:
    return expected_verdict(ws, CFG_800, baseline, "pr")


@pytest.fixture(scope="session")
def baseline_zip(ws) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(ws / "baseline" / "main.json", "rageval-baseline.json")
    return buf.getvalue()


@pytest.fixture
def gh(baseline_zip):
    """A fake GitHub holding main's baseline artifact, plus newer decoys that must not be used."""
    with FakeGitHub(token=TOKEN) as fake:
        decoy = zip_json({"not": "a RunResult"})
        fake.add_artifact(ARTIFACT, zip_bytes=baseline_zip, branch="main", created_at="2026-09-01T00:00:00Z")
        fake.add_artifact(ARTIFACT, zip_bytes=decoy, branch="main", created_at="2026-09-02T00:00:00Z",
                          head_repository_id=777)  # a fork's branch called main
        fake.add_artifact(ARTIFACT, zip_bytes=decoy, branch="release/1.2", created_at="2026-09-03T00:00:00Z")
        yield fake
        if SPEC is not None:
            check_contract(SPEC, fake.requests)
