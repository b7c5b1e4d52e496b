"""The response cache is not an input of the pull request (issue 21 §5): in the action the cache
lives outside the workspace, and a cache folder committed in the checkout — here, one full of judge
"pass" replies — is ignored with a notice. The model is tests/openai_server.py over real HTTP."""

from __future__ import annotations

import json

from action_harness import make_env, push_payload, run_action
from openai_server import OpenAIServer

from rageval.metrics.judge import JUDGE_CLAIMS_SYSTEM, JUDGE_SYSTEM
from rageval.config import load_config
from rageval.pipeline.runner import prepare

CONFIG = "examples/banhang/rageval-openai.yml"
WRONG = "Bạn có 30 ngày để đổi trả."


def judge(verdict: str):
    def respond(body):
        system = body["messages"][0]["content"]
        if system not in (JUDGE_SYSTEM, JUDGE_CLAIMS_SYSTEM):
            return WRONG
        return json.dumps({"verdict": verdict, "wrong_claims": [] if verdict == "pass" else ["30 ngày"],
                           "missing": [], "claims": []})
    return respond


def cache_files(folder):
    return sorted(p for p in folder.rglob("*.json") if p.is_file()) if folder.exists() else []


def test_a_cache_committed_in_the_checkout_is_ignored_with_a_notice(tmp_path, copy_demo, monkeypatch):
    ws = tmp_path / "ws"
    copy_demo(ws / "examples" / "banhang")
    committed = ws / "examples" / "banhang" / ".rageval-cache"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    # the pull request's commit: a cache in which the judge passes every case
    with OpenAIServer(responder=judge("pass")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        poisoned = prepare(load_config(ws / CONFIG), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": srv.base_url},
                           subset="pr").run()
    assert poisoned.summary.value("judge_pass") == 1.0 and cache_files(committed)
    committed_before = cache_files(committed)
    home = tmp_path / "home"
    with OpenAIServer(responder=judge("fail")) as srv:
        env = make_env(ws, tmp_path, None, "push", push_payload("main"), "refs/heads/main", config=CONFIG,
                       mode="baseline", repeats="1", subset="pr")
        env.update({"HOME": str(home), "OPENAI_API_KEY": "sk-test-not-a-secret", "OPENAI_BASE_URL": srv.base_url})
        run = run_action(env)
        calls = srv.calls["chat"]
    assert run.code == 0, run.out
    notices = [line for line in run.out.splitlines() if line.startswith("::notice")]
    assert any("is inside the checkout, where a pull request can commit entries, so it is ignored" in n
               for n in notices)
    assert calls > 0                                                  # every answer asked again, none from the commit
    result = json.loads(run.file("rageval-results.json"))
    assert result["summary"]["metrics"]["judge_pass"] < 1.0           # the judge's own verdicts, not the committed ones
    assert cache_files(home / ".cache" / "rageval")                  # the cache the action keeps is outside
    assert cache_files(committed) == committed_before                 # and the committed one was not written


def test_a_cache_dir_configured_outside_the_workspace_is_kept(tmp_path, copy_demo, monkeypatch):
    ws = tmp_path / "ws"
    copy_demo(ws / "examples" / "banhang")
    outside = tmp_path / "elsewhere"
    cfg = ws / CONFIG
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("llm:", f"llm:\n  cache_dir: {outside}", 1),
                   encoding="utf-8")
    with OpenAIServer(responder=judge("fail")) as srv:
        env = make_env(ws, tmp_path, None, "push", push_payload("main"), "refs/heads/main", config=CONFIG,
                       mode="baseline", repeats="1", subset="pr")
        env.update({"HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test-not-a-secret",
                    "OPENAI_BASE_URL": srv.base_url})
        run = run_action(env)
    assert run.code == 0, run.out
    assert f"response cache: {outside}" in run.out and cache_files(outside)
    assert not any(line.startswith("::notice") and "inside the checkout" in line for line in run.out.splitlines())
