"""The workflows the README and docs/action.md tell users to copy hold together: the smallest setup
publishes the baseline the gate downloads, the service-container workflow names the service the
config calls, the native workflow passes only inputs the composite declares and uses the app line
tests/github/test_native.py runs, and the merge-queue snippet runs on merge_group."""

from __future__ import annotations

import re

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
    assert gated["with"] == {"config": "rageval.yml"}
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
