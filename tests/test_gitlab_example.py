"""The GitLab CI example (examples/gitlab/.gitlab-ci.yml, docs/gitlab.md): it passes the gitlab-ci
schema linter offline (check-jsonschema's vendored schema, with its GitLab transform), and its gate
job does what it says when its script runs as a GitLab runner runs it (bash, -e, -o pipefail):
the baseline is fetched over real HTTP from a local fake of GitLab's documented route
``GET /projects/:id/jobs/artifacts/:ref_name/raw/*artifact_path?job=name``, the token stays with
GitLab's host, and `rageval gate` writes the JUnit report the job declares."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import xmlschema
import yaml
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "gitlab" / ".gitlab-ci.yml"
DOC = ROOT / "docs" / "gitlab.md"
SCHEMA = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"
TOKEN = "glpat-test-token-123"
PROJECT = "42"
BRANCH = "release/1.x"


def lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.gitlab-ci",
                           "--data-transform", "gitlab-ci", str(path)], capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_example_passes_the_gitlab_ci_schema():
    result = lint(EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("edit", [
    lambda text: text.replace("    reports:\n      junit:", "    reports:\n      junitt:"),
    lambda text: text.replace("  rules:\n    - if: $CI_PIPELINE_SOURCE", "  rules:\n    - iff: $CI_PIPELINE_SOURCE"),
    lambda text: text.replace("expire_in: 30 days", "expire_in: [30, days]"),
])
def test_the_linter_catches_a_broken_copy(tmp_path, edit):
    broken = tmp_path / ".gitlab-ci.yml"
    text = edit(EXAMPLE.read_text(encoding="utf-8"))
    assert text != EXAMPLE.read_text(encoding="utf-8")
    broken.write_text(text, encoding="utf-8")
    assert lint(broken).returncode != 0


def test_docs_gitlab_md_shows_the_example_file_as_it_is():
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def job(name: str) -> dict:
    return yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))[name]


def test_the_jobs_run_where_they_should_and_report_junit():
    config = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert config[".rag-eval"]["image"]["entrypoint"] == [""]
    assert config[".rag-eval"]["variables"]["GIT_DEPTH"] == "0"
    assert job("rag-eval-baseline")["rules"] == [{"if": "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"}]
    assert config["variables"]["RAGEVAL_BASELINE_JOB"] == "rag-eval-baseline"
    gate = job("rag-eval-gate")
    assert gate["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert gate["artifacts"]["reports"]["junit"] == "rageval-junit.xml" and gate["artifacts"]["when"] == "always"
    assert "--junit rageval-junit.xml" in gate["script"][1]


# --- a fake GitLab over real HTTP -----------------------------------------------------------------

class FakeGitLab:
    """Serves ``artifacts`` ({(ref, path, job): bytes}) at GitLab's raw-artifact route, to requests
    carrying the PRIVATE-TOKEN or JOB-TOKEN; ``redirect_to`` sends the file from another host (the
    artifact store); every request's path and headers are logged."""

    def __init__(self) -> None:
        self.artifacts: dict[tuple[str, str, str], bytes] = {}
        self.redirect_to: str | None = None
        self.log: list[tuple[str, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                fake.answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        split = urllib.parse.urlsplit(request.path)
        found = re.fullmatch(rf"/api/v4/projects/{PROJECT}/jobs/artifacts/([^/]+)/raw/(.+)", split.path)
        if self.redirect_to is None and split.path.startswith("/store/"):
            return self.send(request, 200, self.artifacts[("store", split.path[7:], "")])
        if found is None:
            return self.send(request, 404, b'{"message":"404 Not found"}')
        if request.headers.get("PRIVATE-TOKEN") != TOKEN and request.headers.get("JOB-TOKEN") != TOKEN:
            return self.send(request, 401, b'{"message":"401 Unauthorized"}')
        ref, path = urllib.parse.unquote(found.group(1)), urllib.parse.unquote(found.group(2))
        job_name = urllib.parse.parse_qs(split.query).get("job", [""])[0]
        data = self.artifacts.get((ref, path, job_name))
        if data is None:
            return self.send(request, 404, b'{"message":"404 Not found"}')
        if self.redirect_to is not None:
            request.send_response(302)
            request.send_header("Location", f"{self.redirect_to}/store/{path}")
            request.send_header("Content-Length", "0")
            request.end_headers()
            return None
        return self.send(request, 200, data)

    @staticmethod
    def send(request: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        request.send_response(status)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    def __enter__(self) -> FakeGitLab:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gitlab() -> Iterator[FakeGitLab]:
    with FakeGitLab() as fake:
        yield fake


def run_gate_job(tmp_path: Path, gitlab: FakeGitLab, config: Path, **env: str) -> subprocess.CompletedProcess:
    """The gate job's script, as a GitLab runner runs it: one bash script, -e and -o pipefail, in the
    checkout, with the job's variables and the predefined CI ones."""
    variables = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["variables"]
    script = "\n".join(job("rag-eval-gate")["script"])
    full_env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path),
                **{k: str(v) for k, v in variables.items()}, "RAGEVAL_CONFIG": str(config),
                "CI_API_V4_URL": f"{gitlab.url}/api/v4", "CI_PROJECT_ID": PROJECT, "CI_JOB_TOKEN": "not-premium",
                "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": BRANCH, "RAGEVAL_GITLAB_TOKEN": TOKEN,
                "RAGEVAL_SUBSET": "", **env}                   # the seed project tags no case pr
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def baseline_bytes(seed_project, run_cli, tmp_path) -> bytes:
    out = tmp_path / "made-baseline.json"
    assert run_cli("baseline", "--config", seed_project["chunk-200"], "--out", out)[0] == 0
    return out.read_bytes()


def test_the_gate_job_fetches_the_target_branchs_baseline_and_blocks_with_a_junit_report(
        tmp_path, gitlab, seed_project, baseline_bytes):
    gitlab.artifacts[(BRANCH, "rageval-baseline.json", "rag-eval-baseline")] = baseline_bytes
    work = tmp_path / "checkout"
    work.mkdir()
    result = run_gate_job(work, gitlab, seed_project["chunk-800"])
    assert result.returncode == 1, result.stdout + result.stderr          # blocked: the job fails
    assert "baseline: rageval-baseline.json from the latest successful pipeline of release%2F1.x" in result.stdout
    assert (work / "rageval-baseline.json").read_bytes() == baseline_bytes
    (path, headers), = gitlab.log
    assert path == f"/api/v4/projects/{PROJECT}/jobs/artifacts/release%2F1.x/raw/rageval-baseline.json?job=rag-eval-baseline"
    assert headers.get("private-token") == TOKEN
    junit = (work / "rageval-junit.xml").read_text(encoding="utf-8")
    xmlschema.XMLSchema(SCHEMA).validate(junit)
    root = ET.fromstring(junit)
    failed = {t.get("name") for t in root.iter("testcase") if t.find("failure") is not None}
    assert {"q01", "q03", "verdict"} <= failed
    assert (work / "rageval-report.md").read_text(encoding="utf-8").startswith("### ❌ ")
    assert (work / "rageval-verdict.json").exists()


def test_without_a_baseline_yet_the_gate_runs_on_its_missing_baseline_policy(tmp_path, gitlab, seed_project):
    result = run_gate_job(tmp_path, gitlab, seed_project["chunk-200"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No rageval-baseline.json from job rag-eval-baseline on release%2F1.x yet" in result.stdout
    assert not (tmp_path / "rageval-baseline.json").exists()
    assert (tmp_path / "rageval-junit.xml").exists()


def test_a_refused_download_fails_the_job_before_the_gate(tmp_path, gitlab, seed_project):
    gitlab.artifacts[(BRANCH, "rageval-baseline.json", "rag-eval-baseline")] = b"{}"
    result = run_gate_job(tmp_path, gitlab, seed_project["chunk-200"], RAGEVAL_GITLAB_TOKEN="")
    assert result.returncode != 0
    assert "Downloading the baseline: HTTP 401. Set RAGEVAL_GITLAB_TOKEN" in result.stderr
    assert not (tmp_path / "rageval-junit.xml").exists()
    (_, headers), = gitlab.log
    assert headers.get("job-token") == "not-premium" and "private-token" not in headers


def test_the_token_does_not_follow_a_redirect_to_another_host(tmp_path, gitlab, seed_project, baseline_bytes):
    with FakeGitLab() as store:
        store.artifacts[("store", "rageval-baseline.json", "")] = baseline_bytes
        gitlab.artifacts[(BRANCH, "rageval-baseline.json", "rag-eval-baseline")] = baseline_bytes
        gitlab.redirect_to = store.url
        result = run_gate_job(tmp_path, gitlab, seed_project["chunk-200"])
        assert result.returncode == 0, result.stdout + result.stderr
        (_, headers), = store.log
    assert (tmp_path / "rageval-baseline.json").read_bytes() == baseline_bytes
    assert TOKEN not in str(headers) and "private-token" not in headers
