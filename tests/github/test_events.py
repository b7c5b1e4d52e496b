"""The action against the runner's events and GitHub's state: commit statuses from start to exit,
schedule and merge_group events, a person's marker comment, the evaluated app's environment and
the notice when no baseline was ever uploaded. A fake GitHub over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from action_fixtures import baseline, baseline_zip, gh, incident_verdict, ws  # noqa: F401 - fixtures
from action_harness import (
    ARTIFACT,
    CFG_800,
    CFG_LENIENT,
    HEAD_SHA,
    MERGE_SHA,
    TOKEN,
    make_env,
    marker_comments,
    pr_payload,
    run_action,
)
from github_server import FakeGitHub
from test_client import SPEC, check_contract

from rageval.github import action
from rageval.github.comment import comment_marker

QUEUE_SHA = "9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a9a"


@pytest.fixture
def trunk_gh(baseline_zip):
    """A repository whose default branch is ``trunk``: its baseline comes from trunk, and a newer
    artifact on a branch called ``main`` must not be used."""
    with FakeGitHub(token=TOKEN, default_branch="trunk") as fake:
        fake.add_artifact(ARTIFACT, zip_bytes=baseline_zip, branch="trunk", created_at="2026-09-01T00:00:00Z")
        fake.add_artifact(ARTIFACT, zip_bytes=b"not a zip", branch="main", created_at="2026-09-05T00:00:00Z")
        yield fake
        if SPEC is not None:
            check_contract(SPEC, fake.requests)


def states(gh: FakeGitHub, sha: str) -> list[str]:
    return [s["state"] for s in gh.statuses.get(sha, [])]


# ---------------------------------------------------------------------- commit status


@pytest.mark.parametrize(("inputs", "code"), [
    ({"mode": "bogus"}, 2),                                  # a bad input: before the config is read
    ({"config": "examples/banhang/missing.yml"}, 2),         # a config that is not there
    ({"config": "examples/banhang/golden.yaml"}, 2),         # a file that is not a config
])
def test_status_goes_pending_then_error_on_a_bad_input_exit(ws, tmp_path, gh, inputs, code):
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   status_context="rag-eval", **inputs)
    run = run_action(env)
    assert run.code == code
    assert states(gh, HEAD_SHA) == ["pending", "error"]
    error = gh.statuses[HEAD_SHA][-1]
    assert error["context"] == "rag-eval" and error["description"].startswith(f"rag-eval-gate: exit {code}: ")
    assert error["target_url"] == "https://github.example/acme/shop/actions/runs/99"
    assert MERGE_SHA not in gh.statuses


def test_status_error_on_an_internal_error(ws, tmp_path, gh, monkeypatch):
    monkeypatch.setattr(action, "_run_gate", lambda ctx: 1 / 0)
    run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                              status_context="rag-eval"))
    assert run.code == 3
    assert states(gh, HEAD_SHA) == ["pending", "error"]


def test_no_status_without_a_context(ws, tmp_path, gh):
    run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge", mode="bogus"))
    assert run.code == 2 and gh.statuses == {} and gh.requests == []


def test_a_refused_status_is_a_warning_and_the_verdict_stands(ws, tmp_path, gh):
    gh.fail("repos/create-commit-status", 403, message="Resource not accessible by integration", times=5)
    run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                              config=CFG_LENIENT, results_path="out/s.json", status_context="rag-eval",
                              comment="false"))
    assert run.code == 0 and run.outputs["verdict"] == "pass"
    warnings = run.runner.named("warning")
    assert len(warnings) == 2 and all("Could not set the commit status 'rag-eval'" in w.data for w in warnings)


# ---------------------------------------------------------------------- events


def test_schedule_on_a_trunk_repository_uses_the_trunk_baseline(ws, tmp_path, trunk_gh):
    """A schedule payload has no repository.default_branch: it comes from GET /repos/{owner}/{repo}."""
    env = make_env(ws, tmp_path, trunk_gh, "schedule", {"schedule": "0 3 * * 1"}, "refs/heads/trunk",
                   config=CFG_LENIENT, results_path="out/nightly.json")
    run = run_action(env)
    assert "mode verify (auto: schedule event on trunk)" in run.out
    assert run.code == 0 and run.outputs["verdict"] == "pass"
    assert [r.path for r in trunk_gh.find("repos/get")] == ["/repos/acme/shop"]
    assert "default branch of acme/shop (from the API): trunk" in run.out
    (download,) = trunk_gh.find("actions/download-artifact")
    assert download.path.endswith(f"/{trunk_gh.artifacts[0]['id']}/zip")
    assert json.loads(run.file("out/nightly.json"))["golden"]["subset"] is None   # verify: every case


def test_workflow_dispatch_with_the_default_branch_in_the_payload_needs_no_lookup(ws, tmp_path, trunk_gh):
    env = make_env(ws, tmp_path, trunk_gh, "workflow_dispatch", {"repository": {"default_branch": "trunk"}},
                   "refs/heads/feature", config=CFG_LENIENT, results_path="out/dispatch.json")
    run = run_action(env)
    assert run.code == 0
    assert trunk_gh.find("repos/get") == []
    assert len(trunk_gh.find("actions/download-artifact")) == 1


def merge_group_payload(base: str = "main") -> dict:
    return {"action": "checks_requested",
            "merge_group": {"head_sha": QUEUE_SHA, "head_ref": f"refs/heads/gh-readonly-queue/{base}/pr-7-{'b' * 40}",
                            "base_sha": "b" * 40, "base_ref": f"refs/heads/{base}",
                            "head_commit": {"id": QUEUE_SHA, "tree_id": "c" * 40, "message": "Merge pull request #7",
                                            "timestamp": "2026-09-01T10:00:00Z",
                                            "author": {"name": "A", "email": "a@example.com"},
                                            "committer": {"name": "A", "email": "a@example.com"}}},
            "repository": {"full_name": "acme/shop", "default_branch": "main"}}


def test_merge_group_verifies_against_the_queues_base_and_reports_on_its_head(ws, tmp_path, trunk_gh, incident_verdict):
    """A merge queue into trunk: the queue's base branch supplies the baseline (not the repository's
    default branch of the payload), the status goes on merge_group.head_sha, and the incident's
    config is blocked as on the pull request."""
    env = make_env(ws, tmp_path, trunk_gh, "merge_group", merge_group_payload("trunk"),
                   f"refs/heads/gh-readonly-queue/trunk/pr-7-{'b' * 40}", config=CFG_800,
                   results_path="out/queue.json", status_context="rag-eval")
    env["GITHUB_SHA"] = QUEUE_SHA
    run = run_action(env)
    assert "mode verify (auto: merge_group event on gh-readonly-queue/trunk/" in run.out
    assert run.code == 1 and run.outputs["verdict"] == "fail"
    assert set(incident_verdict.pass_to_fail) <= set(run.outputs["pass-to-fail"].split(","))
    assert "Fetching baseline artifact 'rageval-baseline' from branch 'trunk'" in run.out
    assert trunk_gh.find("repos/get") == []
    assert states(trunk_gh, QUEUE_SHA) == ["pending", "failure"]
    assert trunk_gh.find("issues/list-comments") == [] and trunk_gh.find("issues/create-comment") == []


# ---------------------------------------------------------------------- the sticky comment


def test_a_persons_marker_comment_is_never_adopted(ws, tmp_path, gh):
    """Two runs: a reviewer's comment that starts with the marker (older, and then a newer one)
    stays as written; the bot's own comment is created once and updated by the second run."""
    marker = comment_marker(CFG_LENIENT)
    older = gh.add_comment(7, f"{marker}\nI pasted the marker on purpose", login="reviewer")
    bodies_before = []
    for n in (1, 2):
        if n == 2:
            newer = gh.add_comment(7, f"{marker}\na newer human comment", login="mallory")
            bodies_before = [older["body"], newer["body"]]
        env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path=f"out/run{n}.json")
        assert run_action(env).code == 0
    bots = [c for c in marker_comments(gh, CFG_LENIENT) if c["user"]["type"] == "Bot"]
    assert len(bots) == 1 and len(gh.find("issues/create-comment")) == 1
    assert bots[0]["body"] == f"{marker}\n" + (ws / "out/run2.md").read_text(encoding="utf-8")
    assert [older["body"], newer["body"]] == bodies_before
    assert older["body"] == f"{marker}\nI pasted the marker on purpose"
    edited = {r.path.rsplit("/", 1)[-1] for r in gh.find("issues/update-comment")}
    assert edited == {str(bots[0]["id"])}


def test_a_config_error_replaces_an_earlier_passed_comment_and_ends_in_error(ws, tmp_path, gh):
    """A PR whose sticky comment says passed breaks its config: the comment no longer says passed
    (it shows the error with file, key and fix), and the status ends in error (issue 19)."""
    assert run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                               config=CFG_LENIENT, status_context="rag-eval",
                               results_path="out/config-error.json")).code == 0
    (ours,) = [c for c in marker_comments(gh, CFG_LENIENT) if c["user"]["type"] == "Bot"]
    assert "passed" in ours["body"].splitlines()[1]
    broken = ws / CFG_LENIENT
    good = broken.read_text(encoding="utf-8")
    try:
        broken.write_text(good.replace("gate:", "gates:", 1), encoding="utf-8")
        run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                                  config=CFG_LENIENT, status_context="rag-eval",
                                  results_path="out/config-error.json"))
    finally:
        broken.write_text(good, encoding="utf-8")
    assert run.code == 2
    (ours,) = [c for c in marker_comments(gh, CFG_LENIENT) if c["user"]["type"] == "Bot"]
    body = ours["body"]
    assert "the evaluation did not finish" in body and "passed" not in body
    assert "unknown key 'gates' (did you mean 'gate'?)" in body and str(CFG_LENIENT) in body
    assert states(gh, HEAD_SHA)[-1] == "error"


# ---------------------------------------------------------------------- the evaluated app's environment


def test_a_command_app_sees_neither_the_token_nor_the_runners_credentials(ws, tmp_path, gh):
    traces = tmp_path / "traces.jsonl"
    traces.write_text("", encoding="utf-8")
    cfg = ws / "examples" / "banhang" / "rageval-command.yml"
    cfg.write_text((ws / CFG_LENIENT).read_text(encoding="utf-8").replace(
        "app:\n  type: builtin", f"app:\n  type: command\n  command: [{json.dumps(sys.executable)}, -m, myapp.eval_adapter]"),
        encoding="utf-8")
    assert "myapp.eval_adapter" in cfg.read_text(encoding="utf-8")
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config="examples/banhang/rageval-command.yml", results_path="out/cmd.json", comment="false")
    hidden = {"GITHUB_TOKEN": TOKEN, "ACTIONS_RUNTIME_TOKEN": "rt-secret", "ACTIONS_RUNTIME_URL": "https://rt.example/",
              "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-secret", "ACTIONS_ID_TOKEN_REQUEST_URL": "https://oidc.example/",
              "ACTIONS_RESULTS_URL": "https://results.example/", "ACTIONS_CACHE_URL": "https://cache.example/"}
    env.update(hidden)
    env.update({"MYAPP_TRACES": str(traces), "MYAPP_ENV_DUMP": str(tmp_path / "env.json"),
                "PYTHONPATH": str(Path(__file__).parent), "OPENAI_API_KEY": "sk-the-app-may-use-this"})
    run = run_action(env)
    assert run.code in (0, 1)
    seen = set(json.loads((tmp_path / "env.json").read_text(encoding="utf-8")))
    assert not seen & set(hidden)
    assert not [k for k in seen if k.startswith("INPUT_")]
    assert {"MYAPP_TRACES", "OPENAI_API_KEY", "GITHUB_REPOSITORY", "GITHUB_WORKSPACE"} <= seen


# ---------------------------------------------------------------------- no baseline yet


def test_the_no_baseline_notice_names_the_missing_job_and_links_the_docs(ws, tmp_path):
    with FakeGitHub(token=TOKEN) as empty:
        env = make_env(ws, tmp_path, empty, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path="out/nobase.json", comment="false")
        env.update({"GITHUB_ACTION_REPOSITORY": "org/rag-eval-gate", "GITHUB_ACTION_REF": "v1"})
        run = run_action(env)
    (notice,) = [n.data for n in run.runner.named("notice") if "No baseline artifact" in n.data]
    assert "`mode: baseline`" in notice and "`actions/upload-artifact` with `name: rageval-baseline`" in notice
    assert "on a push to main" in notice
    assert "https://github.example/org/rag-eval-gate/blob/v1/docs/action.md" in notice


def _two_runs(ws, tmp_path, gh) -> list:
    runs = []
    for n in (1, 2):
        env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path=f"out/apps{n}.json")
        runs.append(run_action(env))
        assert runs[-1].code == 0
    return runs


def test_another_apps_marker_comment_is_never_edited(ws, tmp_path, gh):
    """Another GitHub App (a Bot too) whose comment starts with our marker: left as it is; ours is
    created once and updated by the second run."""
    marker = comment_marker(CFG_LENIENT)
    theirs = gh.add_comment(7, f"{marker}\nanother App's comment", login="other-app[bot]")
    assert theirs["user"]["type"] == "Bot"
    _two_runs(ws, tmp_path, gh)
    assert theirs["body"] == f"{marker}\nanother App's comment"
    (created,) = gh.find("issues/create-comment")
    ours = [c for c in marker_comments(gh, CFG_LENIENT) if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"] == f"{marker}\n" + (ws / "out/apps2.md").read_text(encoding="utf-8")
    assert {r.path.rsplit("/", 1)[-1] for r in gh.find("issues/update-comment")} == {str(ours[0]["id"])}


def test_ours_is_updated_even_when_another_apps_is_newer(ws, tmp_path, gh):
    marker = comment_marker(CFG_LENIENT)
    ours = gh.add_comment(7, f"{marker}\nour older report")
    theirs = gh.add_comment(7, f"{marker}\na newer comment of another App", login="other-app[bot]")
    _two_runs(ws, tmp_path, gh)
    assert gh.find("issues/create-comment") == []
    assert ours["body"] == f"{marker}\n" + (ws / "out/apps2.md").read_text(encoding="utf-8")
    assert theirs["body"] == f"{marker}\na newer comment of another App"


def test_a_refused_edit_posts_a_new_comment_not_a_fork_warning(ws, tmp_path, gh):
    marker = comment_marker(CFG_LENIENT)
    old = gh.add_comment(7, f"{marker}\na comment we may no longer edit")
    gh.fail("issues/update-comment", 403, message="Resource not accessible by integration")
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_LENIENT, results_path="out/refused.json")
    run = run_action(env)
    assert run.code == 0 and run.runner.named("warning") == []
    assert old["body"] == f"{marker}\na comment we may no longer edit"
    (created,) = gh.find("issues/create-comment")
    new = [c for c in marker_comments(gh, CFG_LENIENT) if c["id"] != old["id"]]
    assert len(new) == 1 and new[0]["body"] == f"{marker}\n" + run.file("out/refused.md")


def test_thousands_of_unusable_artifacts_are_a_notice_not_exit_2(ws, tmp_path):
    """Past the page cap (5,000 artifacts of the name; here 50 pages of one) the gate goes on
    without a baseline, as gate.missing_baseline says, with a notice naming the cap."""
    with FakeGitHub(token=TOKEN, max_page_size=1) as crowded:
        for _ in range(51):
            crowded.add_artifact(ARTIFACT, zip_bytes=b"", branch="feature")
        env = make_env(ws, tmp_path, crowded, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path="out/crowded.json", comment="false")
        run = run_action(env)
        assert len(crowded.find("actions/list-artifacts-for-repo")) == 50
    assert run.code == 0 and run.outputs["verdict"] == "pass"
    notices = [n.data for n in run.runner.named("notice")]
    assert any(n.startswith("Stopped looking for a baseline after the newest 50 pages") for n in notices)
    assert any("No baseline artifact" in n for n in notices)


# ---------------------------------------------------------------------- skip: no RAG-relevant change


def test_skip_passes_without_evaluating_and_updates_only_an_existing_comment(ws, tmp_path, gh):
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_LENIENT, skip="true", status_context="rag-eval")
    run = run_action(env)
    assert run.code == 0
    assert run.outputs == {"verdict": "skipped", "results": "", "report": "", "pass-to-fail": ""}
    assert states(gh, HEAD_SHA) == ["pending", "success"]
    assert gh.statuses[HEAD_SHA][-1]["description"] == "rag-eval-gate: no RAG-relevant change"
    assert "no RAG-relevant change" in run.summary
    assert gh.find("actions/list-artifacts-for-repo") == [] and gh.find("issues/create-comment") == []
    assert not (ws / "rageval-results.json").exists()

    marker = comment_marker(CFG_LENIENT)
    earlier = gh.add_comment(7, f"{marker}\n### ❌ blocked (an earlier push of this PR)")
    run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                              config=CFG_LENIENT, skip="true"))
    assert run.code == 0 and gh.find("issues/create-comment") == []
    assert earlier["body"].startswith(f"{marker}\n### ✅ rag-eval-gate: no RAG-relevant change")


def test_skip_must_be_true_or_false(ws, tmp_path):
    run = run_action(make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge", skip="yes"))
    assert run.code == 2
    assert "Input 'skip' is 'yes'; it must be true or false" in run.runner.named("error")[0].data


# ---------------------------------------------------------------------- pull requests from forks


def fork_payload() -> dict:
    payload = pr_payload()
    payload["pull_request"]["head"]["repo"] = {"full_name": "mallory/shop", "fork": True}
    payload["pull_request"]["base"]["repo"] = {"full_name": "acme/shop", "fork": False}
    return payload


def test_a_fork_pr_with_a_model_config_says_what_to_do(ws, tmp_path, gh):
    env = make_env(ws, tmp_path, gh, "pull_request", fork_payload(), "refs/pull/7/merge",
                   config="examples/banhang/rageval-openai.yml", status_context="rag-eval")
    env["GITHUB_ACTION_REPOSITORY"], env["GITHUB_ACTION_REF"] = "org/rag-eval-gate", "v1"
    run = run_action(env)
    assert run.code == 2
    (error,) = run.runner.named("error")
    assert error.data.startswith("This pull request comes from a fork, and GitHub gives a fork's runs no secrets: "
                                 "examples/banhang/rageval-openai.yml calls a model (")
    assert "$OPENAI_API_KEY, which is empty here" in error.data
    assert "github.event.pull_request.head.repo.fork && 'rageval-offline.yml' || 'rageval.yml'" in error.data
    assert "https://github.example/org/rag-eval-gate/blob/v1/docs/action.md" in error.data
    assert states(gh, HEAD_SHA) == ["pending", "error"]


def test_a_fork_pr_with_an_offline_config_is_gated_with_a_notice_in_the_report(ws, tmp_path, gh):
    gh.fail("issues/create-comment", 403, message="Resource not accessible by integration", times=5)
    env = make_env(ws, tmp_path, gh, "pull_request", fork_payload(), "refs/pull/7/merge",
                   config=CFG_LENIENT, results_path="out/fork.json")
    run = run_action(env)
    assert run.code == 0 and run.outputs["verdict"] == "pass"
    assert run.summary.startswith("> ℹ️ This pull request comes from a fork")
    assert run.file("out/fork.md") == run.summary
    (warning,) = run.runner.named("warning")
    assert "Could not post the PR comment (HTTP 403)" in warning.data


@pytest.mark.parametrize(("mode", "event", "expected"), [
    ("gate", "pull_request", "report"), ("verify", "merge_group", "report"),
    ("verify", "push", "block"), ("verify", "schedule", "block"), ("verify", "workflow_dispatch", "block"),
])
def test_known_failures_are_a_ratchet_for_prs_and_queues_and_block_release_verification(mode, event, expected):
    assert action.known_failures_default(mode, event) == expected
