"""Main's trend through the action (issue 24 §3): each baseline run on main reads the previous
baseline artifact and carries its history, so after two baselines the PR comment shows one trend
line per gated metric; a baseline whose predecessor cannot be read still succeeds, with a warning."""

from __future__ import annotations

import io
import json
import zipfile

from action_fixtures import ws  # noqa: F401 - fixture
from action_harness import ARTIFACT, CFG_200, CFG_800, TOKEN, make_env, pr_payload, push_payload, run_action, zip_json
from github_server import FakeGitHub

from rageval.results import RunResult


def zipped(data: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rageval-baseline.json", data)
    return buf.getvalue()


def test_two_baselines_on_main_give_the_pr_comment_a_trend_line(ws, tmp_path):
    with FakeGitHub(token=TOKEN) as gh:
        for n in (1, 2):
            run = run_action(make_env(ws, tmp_path, gh, "push", push_payload("main"), "refs/heads/main",
                                      config=CFG_200, results_path=f"out/b{n}.json", repeats="1"))
            assert run.code == 0, run.out[-2000:]
            gh.add_artifact(ARTIFACT, zip_bytes=zipped(run.file(f"out/b{n}.json")), branch="main")
        first = RunResult.from_json(run.file("out/b1.json").encode(), "b1.json")
        second = RunResult.from_json(run.file("out/b2.json").encode(), "b2.json")
        assert first.history == () and [e.date for e in second.history] == [first.created_at]
        run = run_action(make_env(ws, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                                  config=CFG_800, results_path="out/pr.json"))
    assert run.code == 1
    report = run.file("out/pr.md")
    assert "**Trend on main** (last 2 baselines → this PR):" in report
    lines = [line for line in report.splitlines() if line.startswith("- ") and "this PR" in line]
    assert [line.split()[1] for line in lines] == ["hit@3", "mrr@5", "pass_rate"]
    # both baselines ran the same config: a flat main, then the PR's drop (the README's 0.91 → 0.87)
    assert lines == ["- hit@3 `▄▄ → ▄` main 0.97 (0.97 over 2 baselines); this PR 0.97",
                     "- mrr@5 `██ → ▁` main 0.91 (0.91 over 2 baselines); this PR 0.87",
                     "- pass_rate `██ → ▁` main 1.00 (1.00 over 2 baselines); this PR 0.93"]
    assert run.summary == report and "trend" in run.file("out/pr.html").lower()


def test_an_unreadable_previous_baseline_warns_and_starts_the_trend_again(ws, tmp_path):
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_artifact(ARTIFACT, zip_bytes=zip_json({"not": "a RunResult"}), branch="main")
        run = run_action(make_env(ws, tmp_path, gh, "push", push_payload("main"), "refs/heads/main",
                                  config=CFG_200, results_path="out/b.json", repeats="1"))
    assert run.code == 0
    (warning,) = [c for c in run.runner.named("warning") if "trend starts again" in c.data]
    assert "previous baseline of branch 'main' could not be read" in warning.data and "actions: read" in warning.data
    assert "history" not in json.loads(run.file("out/b.json"))
