"""The workflows the README and docs/action.md tell users to copy hold together: the smallest setup
publishes the baseline the gate downloads, the service-container workflow names the service the
config calls, the native workflow passes only inputs the composite declares and uses the app line
tests/github/test_native.py runs, and the merge-queue snippet runs on merge_group. And they keep a
first workflow out of the traps of issue #23 §6: no `paths:` filter on the required check (the
`changes` step + `skip` instead, its script run here against a real git history), `fetch-depth: 0`,
Python ≥ 3.11, what `org` and `v1` are, PEP 668, and what to do on fork pull requests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from action_harness import ROOT
from test_native import APP

from rageval.github.inputs import INPUT_DEFAULTS

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
SERVICE_APP = "app: {type: http, url: http://rag:8000/answer}"


def blocks(text: str) -> list[dict]:
    """The ```yaml blocks that are workflows (they have jobs:)."""
    found = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    return [b for b in found if isinstance(b, dict) and "jobs" in b]


def steps_using(job: dict, prefix: str) -> list[dict]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(prefix)]


def test_the_readmes_first_workflow_gates_prs_and_publishes_the_baseline():
    first = yaml.safe_load(re.search(r"```yaml\n(.*?)```", README, re.S).group(1))
    on = first.get("on", first.get(True))   # YAML 1.1 reads a bare `on` as True
    assert set(on) == {"pull_request", "push"} and on["push"]["branches"] == ["main"]
    assert first["permissions"] == {}
    gate, baseline = first["jobs"]["gate"], first["jobs"]["baseline"]
    assert gate["if"] == "github.event_name == 'pull_request'"
    assert gate["permissions"] == {"contents": "read", "pull-requests": "write", "actions": "read"}
    (gated,) = steps_using(gate, "org/rag-eval-gate@v1")
    assert gated["with"] == {"config": "rageval.yml", "skip": "${{ steps.changes.outputs.relevant == 'false' }}"}
    (report,) = steps_using(gate, "actions/upload-artifact@")      # the comment's "Full report"
    assert report["if"] == "always()" and report["with"]["path"] == "${{ steps.%s.outputs.html }}" % gated["id"]
    assert baseline["if"] == "github.event_name == 'push'"
    assert baseline["permissions"] == {"contents": "read", "actions": "read"}   # the previous baseline: the trend
    (run,) = steps_using(baseline, "org/rag-eval-gate@v1")
    assert run["with"]["mode"] == "baseline"
    (upload,) = steps_using(baseline, "actions/upload-artifact@")
    assert upload["with"]["name"] == INPUT_DEFAULTS["baseline-artifact"]
    assert upload["with"]["path"].splitlines() == ["${{ steps.%s.outputs.%s }}" % (run["id"], o) for o in ("results", "html")]
    assert baseline["steps"].index(run) < baseline["steps"].index(upload)


def test_the_service_container_workflow_names_the_service_the_config_calls():
    assert SERVICE_APP in DOCS
    (workflow,) = [b for b in blocks(DOCS) if any("services" in j for j in b["jobs"].values())]
    (job,) = workflow["jobs"].values()
    host, port = re.search(r"http://([^:/]+):(\d+)/", SERVICE_APP).groups()
    assert list(job["services"]) == [host]
    assert "image" in job["services"][host] and "ports" not in job["services"][host]
    assert steps_using(job, "org/rag-eval-gate@v1")[0]["with"]["config"] == "rageval.yml"
    assert port == "8000"


def test_the_native_workflow_uses_declared_inputs_and_the_tested_app_line():
    native = yaml.safe_load((ROOT / "native" / "action.yml").read_text(encoding="utf-8"))
    assert APP in DOCS
    (workflow,) = [b for b in blocks(DOCS) if any(steps_using(j, "org/rag-eval-gate/native@") for j in
                                                  b["jobs"].values())]
    (job,) = workflow["jobs"].values()
    (step,) = steps_using(job, "org/rag-eval-gate/native@v1")
    assert set(step["with"]) <= set(native["inputs"])
    setup = steps_using(job, "actions/setup-python@")
    assert setup and job["steps"].index(setup[0]) < job["steps"].index(step)


def test_the_merge_queue_snippet_runs_on_merge_group():
    (workflow,) = [b for b in blocks(DOCS) if "merge_group" in b.get("on", b.get(True, {}))]
    (job,) = workflow["jobs"].values()
    assert "merge_group" in job["if"] and "pull_request" in job["if"]
    assert job["permissions"]["actions"] == "read"


def first_workflows() -> list[dict]:
    """The README's first workflow and docs/action.md's workflow to copy."""
    readme = yaml.safe_load(re.search(r"```yaml\n(.*?)```", README, re.S).group(1))
    docs = yaml.safe_load(DOCS.split("## The workflow to copy", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0])
    return [readme, docs]


@pytest.mark.parametrize("which", [0, 1], ids=["readme", "docs"])
def test_the_required_check_always_runs_and_skips_when_nothing_relevant_changed(which):
    workflow = first_workflows()[which]
    on = workflow.get("on", workflow.get(True))
    assert on["pull_request"] is None or "paths" not in on["pull_request"]   # a filtered check waits forever
    gate = workflow["jobs"]["gate"]
    (changes,) = [s for s in gate["steps"] if s.get("id") == "changes"]
    (action,) = steps_using(gate, "org/rag-eval-gate@v1")
    assert gate["steps"].index(changes) < gate["steps"].index(action)
    assert action["with"]["skip"] == "${{ steps.changes.outputs.relevant == 'false' }}"
    assert changes["env"] == {"BASE": "${{ github.event.pull_request.base.sha }}"}
    for job in workflow["jobs"].values():
        for checkout in steps_using(job, "actions/checkout@"):
            assert checkout["with"]["fetch-depth"] == 0, job


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("which", [0, 1], ids=["readme", "docs"])
@pytest.mark.parametrize(("changed", "relevant"), [("README.md", "false"), ("rageval.yml", "true"),
                                                    ("prompts/answer.txt", "true")])
def test_the_changes_step_finds_a_rag_relevant_change(tmp_path, which, changed, relevant):
    """The step's script, run as the runner runs it, on a PR's merge commit over its base."""
    (changes,) = [s for s in first_workflows()[which]["jobs"]["gate"]["steps"] if s.get("id") == "changes"]
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    for name in ("README.md", "rageval.yml", "prompts/answer.txt"):
        (repo / name).write_text("v1\n", encoding="utf-8")
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / changed).write_text("v2\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "the pull request")
    out = tmp_path / "output"
    out.write_text("", encoding="utf-8")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", changes["run"]], cwd=repo,
                          env={"PATH": os.environ["PATH"], "BASE": base, "GITHUB_OUTPUT": str(out)},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8") == f"relevant={relevant}\n"


def test_the_docs_say_what_a_first_workflow_needs_to_know():
    top = README.split("```yaml", 1)[0]
    assert "Python ≥ 3.11" in top
    assert "`org` is the owner of the rag-eval-gate repository" in README
    assert "In `uses:`, `org` is the GitHub owner" in DOCS and "release workflow" in DOCS
    assert "PEP 668" in DOCS and "externally-managed-environment" in DOCS and "PEP 668" in README
    assert "github.event.pull_request.head.repo.fork && 'rageval-offline.yml' || 'rageval.yml'" in DOCS
    assert "maintainer" in DOCS.split("## Pull requests from forks", 1)[1].split("\n## ", 1)[0]
