"""The GitHub Action end to end: rageval.github.action.main / entrypoint.py against a fake GitHub over
real HTTP on 127.0.0.1, on the examples/banhang demo project.

The baseline is a RunResult of examples/banhang/rageval.yml made once per module. The incident's
config (rageval-800.yml: 800-token chunks, another embedding) must be blocked; a copy of the demo
config with a lenient gate (no zero-tolerance, low floors) run against the same baseline must
pass, because nothing in the pipeline changed. Every exchange with the fake GitHub is checked
against the REST description subset, like tests/test_github.py does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from action_fixtures import baseline, baseline_zip, gh, incident_verdict, ws  # noqa: F401 - fixtures
from action_harness import (
    ARTIFACT,
    CFG_200,
    CFG_800,
    CFG_LENIENT,
    HEAD_SHA,
    MERGE_SHA,
    ROOT,
    TOKEN,
    Run,
    assert_no_secret,
    expected_verdict,
    make_env,
    marker_comments,
    parse_outputs,
    pr_payload,
    push_payload,
    run_action,
)
from github_server import FakeGitHub

from rageval.gate.decide import narrow_baseline
from rageval.github.comment import comment_marker
from rageval.github.inputs import (
    INPUT_DEFAULTS,
    get_input,
    parse_inputs,
    read_event,
    resolve_mode,
)
from rageval.github.workflow import write_output
from rageval.golden.set import load_golden

# ---------------------------------------------------------------------- inputs and modes


def test_get_input_accepts_the_hyphen_and_the_underscore_form():
    assert get_input({"INPUT_GITHUB-TOKEN": " a "}, "github-token") == "a"
    assert get_input({"INPUT_GITHUB_TOKEN": "b"}, "github-token") == "b"
    assert get_input({"INPUT_GITHUB-TOKEN": "", "INPUT_GITHUB_TOKEN": "c"}, "github-token") == "c"
    assert get_input({}, "results-path", "rageval-results.json") == "rageval-results.json"
    assert get_input({"INPUT_RESULTS-PATH": "   "}, "results-path", "d.json") == "d.json"


def test_inputs_default_like_action_yml():
    declared = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert set(declared["inputs"]) == set(INPUT_DEFAULTS)
    for name, spec in declared["inputs"].items():
        if name != "github-token":
            assert str(spec["default"]) == INPUT_DEFAULTS[name], name
    assert declared["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert set(declared["outputs"]) == {"verdict", "results", "report", "html", "pass-to-fail"}
    assert declared["runs"] == {"using": "docker", "image": "Dockerfile"}
    inputs = parse_inputs({})
    assert (inputs.config, inputs.mode, inputs.repeats, inputs.comment, inputs.subset) == (
        "rageval.yml", "auto", 3, True, None)
    assert "token=None" in repr(inputs)
    assert TOKEN not in repr(parse_inputs({"INPUT_GITHUB-TOKEN": TOKEN}))


def test_docs_table_every_input_and_output():
    declared = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    doc = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")}
    assert set(declared["inputs"]) | set(declared["outputs"]) <= rows
    workflow = yaml.safe_load(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert workflow["permissions"] == {}
    assert workflow["jobs"]["gate"]["permissions"] == {"contents": "read", "pull-requests": "write",
                                                       "actions": "read"}
    uploads = [s for s in workflow["jobs"]["baseline"]["steps"] if s.get("uses") == "actions/upload-artifact@v4"]
    assert uploads[0]["with"]["name"] == INPUT_DEFAULTS["baseline-artifact"]
    assert uploads[0]["with"]["path"].splitlines() == ["${{ steps.rageval.outputs.results }}",
                                                       "${{ steps.rageval.outputs.html }}"]
    reports = [s for s in workflow["jobs"]["gate"]["steps"] if s.get("uses") == "actions/upload-artifact@v4"]
    assert "${{ steps.rageval.outputs.html }}" in reports[0]["with"]["path"].splitlines()   # the comment's link


@pytest.mark.parametrize(("event", "payload", "ref", "mode"), [
    ("pull_request", pr_payload(), "refs/pull/7/merge", "gate"),
    ("pull_request_target", pr_payload(), "refs/heads/main", "gate"),
    ("push", push_payload("main"), "refs/heads/main", "baseline"),
    ("push", push_payload("release/1.2"), "refs/heads/release/1.2", "verify"),
    ("push", {**push_payload("main"), "repository": {"default_branch": "trunk"}}, "refs/heads/main", "verify"),
    ("workflow_dispatch", {"repository": {"default_branch": "main"}}, "refs/heads/main", "verify"),
    ("schedule", {}, "refs/heads/main", "verify"),
])
def test_auto_mode_follows_the_event(tmp_path, event, payload, ref, mode):
    env = make_env(tmp_path, tmp_path, None, event, payload, ref)
    assert resolve_mode("auto", read_event(env)) == mode
    assert resolve_mode("verify", read_event(env)) == "verify"


def test_event_gives_pr_number_base_and_head_sha_not_the_merge_commit(tmp_path):
    ev = read_event(make_env(tmp_path, tmp_path, None, "pull_request", pr_payload(12, base="develop"),
                             "refs/pull/12/merge"))
    assert (ev.pr_number, ev.base_ref, ev.head_sha, ev.sha) == (12, "develop", HEAD_SHA, MERGE_SHA)


@pytest.mark.parametrize(("inputs", "message"), [
    ({"mode": "bogus"}, "::error title=rag-eval-gate::Input 'mode' is 'bogus'; use one of: auto, gate, baseline, verify, merge."),
    ({"mode": "gates"}, "Input 'mode' is 'gates'; use one of: auto, gate, baseline, verify, merge (did you mean 'gate'?)."),
    ({"shard": "5/4"}, "Input 'shard' is '5/4': write it as I/N, the I-th of N parts (1 ≤ I ≤ N ≤ 1000)"),
    ({"shard": "1/4", "mode": "merge"}, "Inputs 'shard' and 'mode: merge' go to different jobs"),
    ({"repeats": "x"}, "Input 'repeats' is 'x'; it must be a whole number from 1 to 100"),
    ({"repeats": "0"}, "Input 'repeats' is '0'; it must be a whole number from 1 to 100"),
    ({"comment": "yes"}, "Input 'comment' is 'yes'; it must be true or false"),
    ({"baseline_artifact": "a/b"}, "Input 'baseline-artifact' is 'a/b'; an artifact name cannot"),
    ({"config": "nope/rageval.yml"}, "Config file "),
])
def test_bad_input_is_an_error_and_exit_2(ws, tmp_path, inputs, message):
    run = run_action(make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge", **inputs))
    assert run.code == 2
    errors = run.commands("error")
    assert len(errors) == 1 and message in errors[0]
    assert run.outputs == {} and run.summary == ""
    assert_no_secret(run)


def test_bad_event_payload_is_an_error(ws, tmp_path):
    env = make_env(ws, tmp_path, None, "pull_request", {}, "refs/pull/7/merge")
    Path(env["GITHUB_EVENT_PATH"]).write_text("{not json", encoding="utf-8")
    run = run_action(env)
    assert run.code == 2
    assert "is not readable JSON" in run.commands("error")[0]


def test_write_output_is_multiline_safe(tmp_path):
    path = tmp_path / "out"
    tricky = "line one\nname=value\nghadelimiter_fake\n\nend"
    write_output(path, "report", tricky)
    write_output(path, "verdict", "fail")
    assert parse_outputs(path.read_text(encoding="utf-8")) == {"report": tricky, "verdict": "fail"}


def test_narrow_baseline_keeps_only_the_subset_and_recomputes_the_summary(baseline):
    ids = baseline.case_ids[:4]
    narrowed = narrow_baseline(baseline, ids)
    assert narrowed.case_ids == ids
    assert narrowed.summary.n_cases == 4
    hits = [c.metrics["hit@3"] for c in baseline.cases[:4]]
    assert narrowed.summary.metrics["hit@3"] == pytest.approx(sum(hits) / 4)
    assert baseline.summary.n_cases == len(baseline.cases)  # the input is not changed
    assert narrow_baseline(baseline, baseline.case_ids) is baseline


# ---------------------------------------------------------------------- gate mode end to end


def test_pr_gate_blocks_the_incident_config(ws, tmp_path, gh, incident_verdict):
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_800, results_path="out/pr-800.json", status_context="rag-eval")
    run = run_action(env)

    want = incident_verdict
    assert want.blocked  # the demo's incident is caught
    assert run.code == 1
    assert run.outputs == {"verdict": "fail", "results": "out/pr-800.json", "report": "out/pr-800.md",
                           "html": "out/pr-800.html", "pass-to-fail": ",".join(want.pass_to_fail)}
    report = run.file("out/pr-800.md")
    assert run.summary == report
    # the comment and the job summary link the full report: the HTML in the run's artifacts
    assert "📊 **[Full report](https://github.example/acme/shop/actions/runs/99#artifacts)**" in report
    page = run.file("out/pr-800.html")
    assert "RAG eval gate: blocked" in page and 'id="rageval-data"' in page
    assert (ws / "out" / "pr-800.html").stat().st_mode & 0o777 == 0o644
    assert report.splitlines()[0].startswith("### ") and "blocked" in report.splitlines()[0].lower()
    for case_id in want.pass_to_fail[:3]:
        assert case_id in report
    results = json.loads(run.file("out/pr-800.json"))
    assert results["golden"]["subset"] == "pr"
    assert results["config"]["chunking"]["size"] == 800
    assert any(line.startswith("::error") and "blocked" in line for line in run.out.splitlines())
    assert "::group::rageval gate: " in run.out and "::endgroup::" in run.out

    # the baseline came from main's artifact of this repository (not the fork's, not release/1.2)
    (download,) = gh.find("actions/download-artifact")
    assert download.path == f"/repos/acme/shop/actions/artifacts/{gh.artifacts[0]['id']}/zip"

    # sticky comment: "running…" posted first, then replaced by the report; one comment only
    (created,) = gh.find("issues/create-comment")
    (updated,) = gh.find("issues/update-comment")
    marker = comment_marker(CFG_800)
    assert created.json["body"].startswith(marker + "\n### ⏳ RAG eval gate: evaluation running…")
    assert f"{len(results['cases'])} golden cases (subset `pr`)" in created.json["body"]
    assert updated.json["body"] == f"{marker}\n{report}"
    assert [c["body"] for c in marker_comments(gh, CFG_800)] == [f"{marker}\n{report}"]
    assert gh.requests.index(created) < gh.requests.index(download) < gh.requests.index(updated)

    # commit status on the PR head commit from the payload, not GITHUB_SHA (the merge commit)
    assert list(gh.statuses) == [HEAD_SHA]
    pending, status = gh.statuses[HEAD_SHA]
    assert (pending["state"], pending["context"]) == ("pending", "rag-eval")
    assert gh.requests.index(gh.find("repos/create-commit-status")[0]) < gh.requests.index(created)
    assert (status["state"], status["context"]) == ("failure", "rag-eval")
    assert status["description"].startswith("RAG eval gate: blocked")
    assert status["target_url"] == "https://github.example/acme/shop/actions/runs/99"

    assert_no_secret(run, "out/pr-800.json", "out/pr-800.md", "out/pr-800.html")
    for req in gh.requests:
        if req.operation != "storage/download":
            assert req.headers["Authorization"] == f"Bearer {TOKEN}"


def test_pr_gate_passes_an_unchanged_pipeline_and_updates_the_existing_comment(ws, tmp_path, gh, baseline):
    marker = comment_marker(CFG_LENIENT)
    human = gh.add_comment(7, "LGTM, but see " + marker + " below", login="reviewer")
    ours = gh.add_comment(7, f"{marker}\nan older report")
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_LENIENT, results_path="out/pr-lenient.json", status_context="rag-eval")
    env.pop("INPUT_GITHUB-TOKEN")
    env["INPUT_GITHUB_TOKEN"] = TOKEN  # the underscore form works too
    run = run_action(env)

    want = expected_verdict(ws, CFG_LENIENT, baseline, "pr")
    assert not want.blocked and want.pass_to_fail == ()
    assert run.code == 0
    assert run.outputs["verdict"] == "pass" and run.outputs["pass-to-fail"] == ""
    assert run.commands("error") == []
    report = run.file("out/pr-lenient.md")
    assert run.summary == report
    assert gh.find("issues/create-comment") == []
    updates = gh.find("issues/update-comment")
    assert [u.path for u in updates] == [f"/repos/acme/shop/issues/comments/{ours['id']}"] * 2
    assert "evaluation running…" in updates[0].json["body"]
    assert [c["id"] for c in marker_comments(gh, CFG_LENIENT)] == [ours["id"]]
    assert ours["body"] == f"{marker}\n{report}"
    assert human["body"].startswith("LGTM")
    assert [s["state"] for s in gh.statuses[HEAD_SHA]] == ["pending", "success"]
    assert_no_secret(run, "out/pr-lenient.json", "out/pr-lenient.md")


def test_cases_that_went_pass_to_fail_are_listed_and_block(ws, tmp_path, baseline):
    """A replayed PR in which three numeric cases that passed on main now answer without the number."""
    pr_ids = {c.id for c in load_golden(ws / "examples" / "banhang" / "golden.yaml").subset("pr").cases}
    numeric_passes = [c.id for c in baseline.cases if c.id in pr_ids and c.passed is True
                      and c.status("numbers") == "pass"]
    assert len(numeric_passes) >= 3, "the demo's pr subset should hold passing numeric cases"
    flipped = numeric_passes[:3]
    with (ws / "examples" / "banhang" / "traces-flipped.jsonl").open("w", encoding="utf-8") as fh:
        for case in baseline.cases:
            if case.id in pr_ids:
                answer = "Vui lòng liên hệ bộ phận hỗ trợ." if case.id in flipped else case.answer
                trace = {"id": case.id, "answer": answer, "retrieved": [r.to_dict() for r in case.retrieved or ()],
                         "error": None}
                fh.write(json.dumps(trace, ensure_ascii=False) + "\n")
    data = yaml.safe_load((ws / CFG_LENIENT).read_text(encoding="utf-8"))
    data["app"] = {"type": "replay", "path": "traces-flipped.jsonl"}
    data["gate"]["zero_tolerance"] = ["numbers"]
    (ws / "examples" / "banhang" / "rageval-flipped.yml").write_text(yaml.safe_dump(data, allow_unicode=True),
                                                                     encoding="utf-8")
    env = make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config="examples/banhang/rageval-flipped.yml", baseline_path="baseline/main.json",
                   results_path="out/pr-flipped.json", comment="false")
    run = run_action(env)

    assert run.code == 1
    assert run.outputs["verdict"] == "fail"
    assert run.outputs["pass-to-fail"] == ",".join(flipped)
    for case_id in flipped:
        assert case_id in run.summary
        assert f"BLOCK numbers {case_id}: missing" in run.out
    assert_no_secret(run, "out/pr-flipped.json")


def test_comment_refused_with_403_warns_and_keeps_verdict_and_summary(ws, tmp_path, gh):
    gh.fail("issues/create-comment", 403, message="Resource not accessible by integration", times=5)
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_LENIENT, results_path="out/pr-fork.json")
    run = run_action(env)

    assert run.code == 0
    assert run.outputs["verdict"] == "pass"
    (warning,) = run.commands("warning")
    assert "Could not post the PR comment (HTTP 403)" in warning and "the verdict is unchanged" in warning
    assert run.summary == run.file("out/pr-fork.md") and "RAG eval gate" in run.summary.splitlines()[0]
    assert len(gh.find("issues/create-comment")) == 1  # no second attempt after the refusal
    assert gh.comments.get(7, []) == []
    assert_no_secret(run, "out/pr-fork.json")


def test_no_baseline_artifact_applies_the_missing_baseline_policy(ws, tmp_path):
    with FakeGitHub(token=TOKEN) as empty:
        env = make_env(ws, tmp_path, empty, "pull_request", pr_payload(base="develop"), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path="out/pr-nobase.json", comment="false")
        run = run_action(env)
        assert [r.query["name"] for r in empty.find("actions/list-artifacts-for-repo")] == [[ARTIFACT]]
        assert empty.find("issues/create-comment") == [] and empty.find("issues/list-comments") == []
    (notice,) = [n for n in run.commands("notice") if "No baseline artifact" in n]
    assert "'rageval-baseline' from branch 'develop' of acme/shop" in notice
    assert "gate.missing_baseline is 'floors_only'" in notice
    assert run.code == 0 and run.outputs["verdict"] == "pass"


def test_rejected_token_is_a_clear_error_not_a_silent_missing_baseline(ws, tmp_path):
    with FakeGitHub(token="ghp_the_real_one") as strict:
        env = make_env(ws, tmp_path, strict, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=CFG_LENIENT, results_path="out/pr-401.json")
        run = run_action(env)
        assert strict.find("actions/download-artifact") == []
    assert run.code == 2
    (warning,) = run.commands("warning")  # the "running…" comment could not be posted
    assert "HTTP 401" in warning
    (error,) = run.commands("error")
    assert "actions/artifacts failed with HTTP 401: Bad credentials" in error
    assert "TIP The token was rejected" in error.replace("%0A", "\n")
    assert run.outputs == {}
    assert_no_secret(run)


@pytest.mark.parametrize("target", ["/proc/self/fd/1", "../../elsewhere.json"], ids=["job-log", "file"])
def test_a_link_the_checkout_planted_at_the_results_path_is_refused(ws, tmp_path, target):
    """The checkout is the pull request's: a link at the results path could send the report's untrusted
    text, unescaped, into the job log (/proc/self/fd/1) or anywhere the action can write."""
    link = ws / "out" / f"planted-{target.rsplit('/', 1)[-1]}"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    env = make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge", config=CFG_LENIENT,
                   results_path=str(link.relative_to(ws)), comment="false", baseline_path="baseline/main.json")
    run = run_action(env)
    assert run.code == 2
    (error,) = run.commands("error")
    assert f"{link}: a symbolic link (to {target})" in error
    assert os.readlink(link) == target and not (ws.parent / "elsewhere.json").exists()


# ---------------------------------------------------------------------- baseline and verify modes


def test_push_to_main_writes_the_baseline(ws, tmp_path, gh, baseline):
    env = make_env(ws, tmp_path, gh, "push", push_payload("main"), "refs/heads/main",
                   config=CFG_200, results_path="out/baseline.json", repeats="2")
    run = run_action(env)

    assert run.code == 0
    assert "mode baseline (auto: push event on main)" in run.out
    assert run.outputs == {"verdict": "none", "results": "out/baseline.json", "report": "out/baseline.md",
                           "html": "out/baseline.html", "pass-to-fail": ""}
    result = json.loads(run.file("out/baseline.json"))
    assert "\n" not in run.file("out/baseline.json").strip()   # compact, as `rageval baseline` writes it: the artifact stays small
    assert result["repeats"] == 2 and result["noise"]["deterministic"] is True
    assert result["golden"]["subset"] is None and len(result["cases"]) == result["golden"]["n_total"]
    assert "### RAG eval gate: baseline" in run.summary and "`rageval-baseline`" in run.summary
    # the API is asked for one thing: main's previous baseline, whose history this one carries
    assert [r.operation for r in gh.requests] == ["actions/list-artifacts-for-repo", "actions/download-artifact",
                                                  "storage/download"]
    (previous,) = result["history"]
    assert previous["date"] == baseline.created_at and previous["metrics"]["mrr@5"] == baseline.summary.metrics["mrr@5"]
    assert "RAG eval gate: run of banhang-returns" in run.file("out/baseline.html")
    assert_no_secret(run, "out/baseline.json", "out/baseline.html")


def test_push_to_release_branch_verifies_all_cases_against_mains_baseline(ws, tmp_path, gh):
    env = make_env(ws, tmp_path, gh, "push", push_payload("release/1.2"), "refs/heads/release/1.2",
                   config=CFG_LENIENT, results_path="out/verify.json")
    run = run_action(env)

    assert "mode verify (auto: push event on release/1.2)" in run.out
    assert run.code == 0 and run.outputs["verdict"] == "pass"
    result = json.loads(run.file("out/verify.json"))
    assert result["golden"]["subset"] is None and len(result["cases"]) == result["golden"]["n_total"]
    (download,) = gh.find("actions/download-artifact")
    assert download.path.endswith(f"/{gh.artifacts[0]['id']}/zip")  # main's, not release/1.2's
    assert gh.find("issues/list-comments") == []  # a push has no PR to comment on
    assert_no_secret(run, "out/verify.json")


# ---------------------------------------------------------------------- the entrypoint as a process


def test_entrypoint_process_end_to_end(ws, tmp_path, gh, incident_verdict):
    env = make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=CFG_800, results_path="out/proc.json")
    env.update({"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                "PYTHONDONTWRITEBYTECODE": "1"})
    proc = subprocess.run([sys.executable, str(ROOT / "entrypoint.py")], env=env, cwd=ws,
                          capture_output=True, text=True, timeout=120)
    run = Run(proc.returncode, proc.stdout, proc.stderr, env)

    assert run.code == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert run.outputs["verdict"] == "fail"
    assert run.outputs["report"] == "out/proc.md"
    assert run.outputs["pass-to-fail"] == ",".join(incident_verdict.pass_to_fail)
    assert run.summary == run.file("out/proc.md")
    assert len(marker_comments(gh, CFG_800)) == 1
    assert_no_secret(run, "out/proc.json", "out/proc.md")
