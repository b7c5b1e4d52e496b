"""The demo's real-model config against the local OpenAI-compatible server over real HTTP:
calls per case by stage (rules first, then one judge call), zero calls on an unchanged re-run, the
gate's re-run calls counted exactly as the server saw them, the budget cap with an unpriced model,
and the key kept out of everything."""

import json
import re

import pytest
from openai_server import OpenAIServer

from rageval.metrics.faithfulness import EXTRACT_SYSTEM, VERIFY_SYSTEM
from rageval.metrics.registry import rule_check_names

SENTINEL = "sk-SENTINEL-DEMO-KEY-42"
ANSWER = "Khách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng (DT-1)."
CLAIM = "Khách được đổi trả trong 7 ngày kể từ ngày nhận hàng."


def responder(body):
    """The generator always answers ANSWER; the judge passes it, with one claim supported by
    whichever sources the request asks about."""
    if body["model"] == "gpt-4o-mini":
        return ANSWER
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system == EXTRACT_SYSTEM:
        return json.dumps({"claims": [CLAIM]})
    keys = [k for k in ("in_context", "in_expected") if f'"{k}" for' in user]
    claims = [{"claim": CLAIM, **dict.fromkeys(keys, "supported")}]
    if system == VERIFY_SYSTEM:
        return json.dumps({"claims": claims})
    return json.dumps({"verdict": "pass", "wrong_claims": [], "missing": [], "claims": claims})


def fails_rules(case):
    return any(case["checks"][n]["status"] == "fail" for n in rule_check_names())


@pytest.fixture
def demo(tmp_path, copy_demo):
    return copy_demo(tmp_path / "banhang")


def test_openai_demo_calls_per_case_and_cache(demo, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out1, out2 = tmp_path / "r1.json", tmp_path / "r2.json"
        code, stdout, stderr = run_cli("run", "--config", demo / "rageval-openai.yml", "--subset", "pr", "--out", out1)
        assert code == 0, stderr
        first_calls = server.calls["chat"]
        assert server.requests[0].headers["authorization"] == f"Bearer {SENTINEL}"
        code, _, _ = run_cli("run", "--config", demo / "rageval-openai.yml", "--subset", "pr", "--out", out2)
        assert code == 0
        assert server.calls["chat"] == first_calls          # unchanged config: zero model calls
    r1, r2 = (json.loads(p.read_text(encoding="utf-8")) for p in (out1, out2))
    n = r1["summary"]["n_cases"]
    calls = r1["cost"]["calls"]
    failing_rules = {c["id"] for c in r1["cases"] if fails_rules(c)}
    assert 0 < len(failing_rules) < n
    # rules first, then one judge call that also returns the claims: no faithfulness call of its own
    assert calls == {"generation": n, "judge": n - len(failing_rules)}
    assert first_calls == sum(calls.values())
    by_case = r1["cost"]["by_case"]
    assert all(by_case[i]["generation"]["calls"] == 1 and "judge" not in by_case[i] for i in failing_rules)
    assert all(by_case[c["id"]]["judge"]["calls"] == 1 for c in r1["cases"] if c["id"] not in failing_rules)
    assert r2["cost"]["calls_total"] == 0 and r2["cost"]["cache_hits"] >= first_calls
    assert r1["summary"]["metrics"] == r2["summary"]["metrics"]
    assert r1["cost"]["usd"] > 0
    assert r1["summary"]["metrics"]["judge_pass"] == 1.0
    assert r1["summary"]["metrics"]["faithfulness"] == 1.0 and r1["summary"]["n_errors"] == 0
    assert r1["cost"]["usd"] == pytest.approx(sum(
        s["prompt_tokens"] * p / 1e6 + s["completion_tokens"] * c / 1e6
        for s, (p, c) in ((r1["cost"]["stages"]["generation"], (0.15, 0.60)), (r1["cost"]["stages"]["judge"], (2.50, 10.00)))),
        abs=1e-6)
    everything = out1.read_text() + out2.read_text() + stdout + stderr
    for path in (demo / ".rageval-cache").rglob("*"):
        if path.is_file():
            everything += path.read_text(encoding="utf-8", errors="replace")
    assert SENTINEL not in everything


def test_budget_cap_stops_calls_marks_the_rest_and_the_report_says_so(demo, run_cli, monkeypatch, tmp_path):
    cfg = demo / "rageval-openai.yml"
    text = cfg.read_text(encoding="utf-8")
    # each generation call costs ~$0.01 at this price; the cap allows a handful, judge disabled
    text = text.replace("max_cost_usd: 2.00", "max_cost_usd: 0.03").replace(
        "gpt-4o-mini: {prompt: 0.15, completion: 0.60}", "gpt-4o-mini: {prompt: 100.0, completion: 100.0}")
    text = text.replace("judge: {model: gpt-4o, faithfulness: true}", "judge: {model: null}")
    text = text.replace("judge_pass: 0.85", "pass_rate: 0.0").replace("judge_pass: 0.05, faithfulness: 0.05", "pass_rate: 1.0")
    text = text.replace("app: {type: builtin, concurrency: 4}", "app: {type: builtin, concurrency: 1}")
    cfg.write_text(text, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        report = tmp_path / "report.md"
        verdict = tmp_path / "v.json"
        code, _, _ = run_cli("gate", "--config", cfg, "--subset", "pr", "--report-md", report, "--out", verdict)
        calls = server.calls["chat"]
    assert 1 <= calls < 10                       # stopped at the cap, far fewer than the cases
    text = report.read_text(encoding="utf-8")
    assert "Budget cap reached" in text
    assert code == 1                             # errors policy: fail


def test_a_server_without_usage_is_charged_an_estimate_the_cap_holds_and_the_report_says_so(demo, run_cli,
                                                                                          monkeypatch, tmp_path):
    """Issue 21 §3: 70 calls and $0.10 of real spend got through a $0.02 cap when the server sent no
    usage (each call counted $0). Now the estimate is charged: the cap stops the run early."""
    cfg = demo / "rageval-openai.yml"
    text = cfg.read_text(encoding="utf-8").replace("max_cost_usd: 2.00", "max_cost_usd: 0.02").replace(
        "gpt-4o-mini: {prompt: 0.15, completion: 0.60}", "gpt-4o-mini: {prompt: 30.0, completion: 30.0}")
    text = text.replace("app: {type: builtin, concurrency: 4}", "app: {type: builtin, concurrency: 1}")
    cfg.write_text(text, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder, usage=False) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        report, out = tmp_path / "report.md", tmp_path / "v.json"
        code, _, _ = run_cli("run", "--config", cfg, "--subset", "pr", "--out", out)
        calls = server.calls["chat"]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert 1 <= calls < 20 and result["cost"]["calls_total"] == calls       # every call counted, stopped early
    assert result["cost"]["estimated_calls"] == calls and result["cost"]["usd"] >= 0.02
    with OpenAIServer(responder=responder, usage=False) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        run_cli("gate", "--config", cfg, "--subset", "pr", "--report-md", report, "--out", tmp_path / "g.json")
    assert "**Estimated cost:** the endpoint sent no token counts for" in report.read_text(encoding="utf-8")


def test_persistent_500_makes_those_cases_errors_and_the_run_completes(demo, run_cli, monkeypatch, tmp_path):
    from openai_server import Fault

    cfg = demo / "rageval-openai.yml"
    text = cfg.read_text(encoding="utf-8").replace("judge: {model: gpt-4o, faithfulness: true}", "judge: {model: null}")
    # without a judge, a threshold on its metrics could never be checked: the config would be refused
    text = text.replace("judge_pass: 0.85", "pass_rate: 0.0").replace("judge_pass: 0.05, faithfulness: 0.05", "pass_rate: 1.0")
    text = text.replace("max_retries: 4", "max_retries: 0").replace("app: {type: builtin, concurrency: 4}",
                                                                     "app: {type: builtin, concurrency: 1}")
    cfg.write_text(text, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        server.faults.append(Fault.server_error(500, times=2, model="gpt-4o-mini"))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = tmp_path / "r.json"
        code, _, stderr = run_cli("run", "--config", cfg, "--subset", "pr", "--out", out)
    assert code == 0, stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    errored = [c for c in result["cases"] if c["error"]]
    assert len(errored) == 2 and all("500" in c["error"] for c in errored)
    assert all(c["passed"] is None for c in errored)                      # an error, not a fail
    assert result["summary"]["n_errors"] == 2
    assert result["summary"]["n_cases"] == len(result["cases"]) >= 30     # nothing lost


def test_an_unchanged_gate_reports_its_rerun_calls_exactly_as_the_server_counted_them(demo, run_cli, monkeypatch,
                                                                                     tmp_path):
    cfg = demo / "rageval-openai.yml"
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        args = ("gate", "--config", cfg, "--subset", "pr")
        code, _, err = run_cli(*args, "--report-md", tmp_path / "cold.md")
        assert code == 1, err                                         # zero tolerance: numbers
        before = server.calls["chat"]
        report, verdict, candidate = tmp_path / "warm.md", tmp_path / "verdict.json", tmp_path / "candidate.json"
        code, _, err = run_cli(*args, "--report-md", report, "--out", verdict, "--candidate-out", candidate)
        assert code == 1, err
        rerun_calls = server.calls["chat"] - before                   # what the server saw this time
    text = report.read_text(encoding="utf-8")
    cand, verd = (json.loads(p.read_text(encoding="utf-8")) for p in (candidate, verdict))
    assert rerun_calls > 0 and verd["reran"]["targeted"]
    assert cand["cost"]["calls_total"] == 0 and cand["cost"]["cache_hits"] > 0       # the first run: all cached
    assert cand["cost"]["rerun"]["calls_total"] == verd["reran"]["cost"]["calls_total"] == rerun_calls
    assert "**Cost and time:** 0 model calls" in text
    assert re.search(rf"\*\*Re-run cost\*\* \(cache bypassed, to confirm the decision\): {rerun_calls} model calls", text)
    generation = next(line for line in text.splitlines() if line.startswith("| generation |"))
    assert generation.split(" | ")[5] == str(cand["cost"]["rerun"]["stages"]["generation"]["calls"])


def test_an_unpriced_judge_with_a_budget_is_refused_at_validate_and_makes_no_call(demo, run_cli, monkeypatch):
    cfg = demo / "rageval-openai.yml"
    text = cfg.read_text(encoding="utf-8").replace("judge: {model: gpt-4o,", "judge: {model: gpt-4.1,")
    cfg.write_text(text.replace("max_cost_usd: 2.00", "max_cost_usd: 0.001"), encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        for command in ("validate", "run", "gate"):
            code, _, err = run_cli(command, "--config", cfg, *(["--no-git"] if command == "validate" else []))
            assert code == 2, (command, err)
            assert "llm.max_cost_usd is set, but judge.model 'gpt-4.1' has no price in llm.prices" in err
            assert "prices: {gpt-4.1: {prompt: …, completion: …}}" in err
        assert server.calls["chat"] == 0


def test_a_baselines_repeats_are_counted_as_re_runs(demo, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    out = tmp_path / "baseline.json"
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, _, err = run_cli("baseline", "--config", demo / "rageval-openai.yml", "--subset", "pr", "--repeats", "3",
                               "--out", out)
        assert code == 0, err
        total = server.calls["chat"]
    cost = json.loads(out.read_text(encoding="utf-8"))["cost"]
    first, rerun = cost["calls_total"], cost["rerun"]["calls_total"]
    assert first + rerun == total and rerun == 2 * first           # two repeats, cache bypassed, each a full run
    assert cost["rerun"]["calls"] == {stage: 2 * n for stage, n in cost["calls"].items()}


def test_a_judge_model_change_shows_judge_metrics_but_does_not_gate_them(demo, run_cli, monkeypatch, tmp_path):
    cfg = demo / "rageval-openai.yml"
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with OpenAIServer(responder=responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, _, err = run_cli("baseline", "--config", cfg, "--subset", "pr", "--out", tmp_path / "base.json")
        assert code == 0, err
        text = cfg.read_text(encoding="utf-8").replace("judge: {model: gpt-4o,", "judge: {model: gpt-4.1,")
        cfg.write_text(text.replace("gpt-4o: {prompt: 2.50, completion: 10.00}",
                                    "gpt-4.1: {prompt: 2.00, completion: 8.00}"), encoding="utf-8")
        code, _, err = run_cli("gate", "--config", cfg, "--subset", "pr", "--baseline", tmp_path / "base.json",
                               "--out", tmp_path / "verdict.json", "--report-md", tmp_path / "report.md")
    verdict = json.loads((tmp_path / "verdict.json").read_text(encoding="utf-8"))
    base = json.loads((tmp_path / "base.json").read_text(encoding="utf-8"))
    assert base["config"]["judge"]["prompt_version"] == "3"
    changed = [r for r in verdict["reasons"] if r["rule"] == "judge_changed"]
    assert len(changed) == 1 and changed[0]["blocking"] is False
    assert "gpt-4o" in changed[0]["message"] and "gpt-4.1" in changed[0]["message"]
    assert "not compared" in changed[0]["message"]
    assert not any(r["metric"] in ("judge_pass", "faithfulness", "groundedness") and r["blocking"]
                   for r in verdict["reasons"])
    assert "the judge changed" in (tmp_path / "report.md").read_text(encoding="utf-8")
