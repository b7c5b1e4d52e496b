"""What the action prints, read the way the GitHub runner reads it (`runner_log`, reimplemented
from actions/runner): text from the evaluated app never runs as a workflow command, masks register
the secret exactly, and a secret a model echoes reaches no comment, report or results file."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import seed_data
from action_harness import TOKEN, make_env, pr_payload, push_payload, run_action
from github_server import FakeGitHub
from runner_log import RunnerLog

from rageval.config import load_config
from rageval.files import write_json
from rageval.flow import run_repeats
from rageval.github import action
from rageval.github.workflow import NEUTRAL_PREFIX, Console, could_be_command
from rageval.pipeline.runner import prepare

FORGED = [
    "boom\n::error::FORGED-1",
    "  ::error title=x::FORGED-2",
    "##[warning]FORGED-3",
    "text before ##[error]FORGED-4",
    "::stop-commands::abc\n::error::FORGED-5\n::abc::\n::error::FORGED-6",
    "a\r::warning::FORGED-7",
    "::add-mask::FORGED-8",
    "\t::ERROR::FORGED-9",
    "::endgroup::\n::group::FORGED-10",
    "::set-output name=verdict::pass FORGED-11",
]
OURS = {"add-mask", "group", "endgroup", "notice", "warning", "error"}


def forged_in(log: RunnerLog) -> list[str]:
    """Commands the runner would run whose text comes from FORGED."""
    return [c.line for c in log.commands if "FORGED" in c.line or "FORGED" in c.data]


def test_the_parser_reimplementation_does_see_the_forgeries_when_printed_raw():
    log = RunnerLog().feed("".join(f + "\n" for f in FORGED))
    seen = {c.data for c in log.commands}
    assert {"FORGED-1", "FORGED-2", "FORGED-3", "FORGED-4", "FORGED-7", "FORGED-8", "FORGED-9"} <= seen
    assert "FORGED-5" not in seen and "FORGED-6" in seen  # stop-commands with a known token
    assert "FORGED-10" in seen


@pytest.mark.parametrize("text", FORGED)
def test_console_log_never_runs_untrusted_text(text):
    out = io.StringIO()
    console = Console(out, [])
    console.log(text)
    console.notice("after the block: still processed")
    log = RunnerLog().feed(out.getvalue())
    assert forged_in(log) == []
    assert [c.name for c in log.commands] == ["notice"]
    assert log.stop_token is None  # the block was closed
    assert not any("##[" in line for line in log.shown)  # the viewer renders none of it as markup
    assert any("FORGED" in line for line in log.shown)  # the text itself is still in the log


def test_plain_text_is_printed_as_is_and_the_check_sees_through_invisible_characters():
    out = io.StringIO()
    Console(out, []).log("rageval gate: 12/44 cases\nbaseline: main.json")
    assert out.getvalue() == "rageval gate: 12/44 cases\nbaseline: main.json\n"
    for tricky in (":\u200b:error::x", "\uff1a\uff1aerror::x", ":\u0301:x", "#\u200b#[x", ":\n:x"):
        assert could_be_command(tricky), tricky
    assert "##[" not in NEUTRAL_PREFIX and "::" not in NEUTRAL_PREFIX


def test_group_titles_and_annotations_are_escaped():
    out = io.StringIO()
    console = Console(out, [])
    with console.group("cases q01\n::error::FORGED-group"):
        console.error("line one\n::error::FORGED-error 100%")
    log = RunnerLog().feed(out.getvalue())
    assert [c.name for c in log.commands] == ["group", "error", "endgroup"]
    assert log.commands[1].data == "line one\n::error::FORGED-error 100%"


@pytest.mark.parametrize("secret", ["ghp_%25abc%0Adef", "sk-line1\nline2%", "p%0D%25"])
def test_masks_register_the_secret_exactly(secret):
    out = io.StringIO()
    console = Console(out, [])
    console.add_secret(secret)
    console.log(f"the model said: {secret}")
    log = RunnerLog().feed(out.getvalue())
    assert log.masks == [line for line in secret.split("\n") if line]
    assert not any(part in line for line in log.shown for part in secret.split("\n"))


def _forged_project(tmp_path):
    paths = seed_data.write_project(tmp_path / "seed")
    folder = paths["chunk-200"].parent
    traces = seed_data.traces("chunk-200")
    traces[1] = {"id": traces[1]["id"], "error": "\n".join(FORGED)}
    traces[2]["answer"] = "::error::FORGED-answer " + traces[2]["answer"]
    (folder / "forged.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces),
                                         encoding="utf-8")
    cfg = folder / "forged.yml"
    cfg.write_text(paths["chunk-200"].read_text(encoding="utf-8").replace("chunk-200.jsonl", "forged.jsonl"),
                   encoding="utf-8")
    return cfg


def test_a_trace_error_with_commands_is_not_executed_in_the_job_log(tmp_path):
    cfg = _forged_project(tmp_path)
    env = make_env(tmp_path, tmp_path, None, "push", push_payload("main"), "refs/heads/main",
                   config=str(cfg.relative_to(tmp_path)), results_path="out/baseline.json", repeats="1")
    run = run_action(env)
    assert run.code == 0
    assert "FORGED-1" in run.out  # the run table lists the errored case with its error
    assert forged_in(run.runner) == []
    assert {c.name for c in run.runner.commands} <= OURS
    assert run.runner.masks == [TOKEN]
    assert run.runner.stop_token is None
    assert not any("##[warning]FORGED" in line or "##[error]FORGED" in line for line in run.runner.shown)


def test_an_internal_error_traceback_stays_inert(tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("bug\n::error::FORGED-traceback\n##[warning]FORGED-tb")
    monkeypatch.setattr(action, "_run_gate", explode)
    run = run_action(make_env(tmp_path, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge"))
    assert run.code == 3 and run.err == ""
    assert forged_in(run.runner) == []
    assert "RuntimeError: bug" in run.out
    (error,) = run.runner.named("error")
    assert "Internal error in rageval (a bug)" in error.data


def test_a_secret_the_model_echoes_reaches_no_comment_report_or_file(tmp_path):
    """The app (a command adapter, like a team's own) answers with the API key it can see."""
    key = "sk-ECHOED%25SECRET"
    paths = seed_data.write_project(tmp_path / "seed")
    folder = paths["chunk-200"].parent
    write_json(tmp_path / "main.json", run_repeats(prepare(load_config(paths["chunk-200"]), env={}), 1))
    traces = seed_data.traces("chunk-800")   # the incident: q01 now says 30 days, shown before → after
    for t in traces:
        t["answer"] = f"Mã của tôi là {key}. " + t["answer"]
    (folder / "echo.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces),
                                       encoding="utf-8")
    cfg = folder / "echo.yml"
    cfg.write_text(paths["chunk-200"].read_text(encoding="utf-8").replace(
        "app: {type: replay, path: chunk-200.jsonl}",
        f"app: {{type: command, command: [{json.dumps(sys.executable)}, -m, myapp.eval_adapter]}}"), encoding="utf-8")
    with FakeGitHub(token=TOKEN) as gh:
        env = make_env(tmp_path, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                       config=str(cfg.relative_to(tmp_path)), results_path="out/pr.json", baseline_path="main.json")
        env.update({"OPENAI_API_KEY": key, "MYAPP_TRACES": str(folder / "echo.jsonl"),
                    "PYTHONPATH": str(Path(__file__).parent)})
        run = run_action(env)
        bodies = [r.json["body"] for r in gh.requests if r.json and "body" in r.json]
    assert run.code == 1, run.out[-2000:]
    # the report quotes the answers, redacted before they are marked up: the key's "25" is a number the
    # baseline's answer lacks, which the quote sets in bold — redacting after that missed "%**25**"
    assert bodies and "Mã của tôi là &#42;&#42;&#42;." in bodies[-1]
    results = run.file("out/pr.json")
    assert "***" in results and json.loads(results)["cases"]
    for text in (*bodies, run.file("out/pr.md"), results, run.summary, "\n".join(run.runner.shown)):
        assert key not in text and "ECHOED" not in text and "SECRET" not in text
    assert key in run.runner.masks
