"""The demo's real-model config against the local OpenAI-compatible server over real HTTP:
calls per case by stage, zero calls on an unchanged re-run, and the key kept out of everything."""

import json
import shutil

import pytest
from conftest import ROOT
from openai_server import OpenAIServer

SENTINEL = "sk-SENTINEL-DEMO-KEY-42"


def responder(body):
    model = body["model"]
    if model == "gpt-4o-mini":
        return "Khách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng (DT-1)."
    text = json.dumps(body["messages"], ensure_ascii=False)
    if "claims" in text and "verdict" not in text and "in_context" not in text:
        return json.dumps({"claims": ["Khách được đổi trả trong 7 ngày kể từ ngày nhận hàng."]})
    if "in_context" in text:
        return json.dumps({"claims": [{"claim": "Khách được đổi trả trong 7 ngày kể từ ngày nhận hàng.",
                                       "in_context": "supported", "in_expected": "supported"}]})
    return json.dumps({"verdict": "pass", "wrong_claims": [], "missing": []})


@pytest.fixture
def demo(tmp_path):
    target = tmp_path / "banhang"
    shutil.copytree(ROOT / "examples" / "banhang", target, ignore=shutil.ignore_patterns(".rageval-cache"))
    return target


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
    assert calls["generation"] == n and calls["judge"] == n
    assert n <= calls["faithfulness"] <= 2 * n
    assert first_calls == sum(calls.values())
    assert r2["cost"]["calls_total"] == 0 and r2["cost"]["cache_hits"] >= first_calls
    assert r1["summary"]["metrics"] == r2["summary"]["metrics"]
    assert r1["cost"]["usd"] > 0
    assert r1["summary"]["metrics"]["judge_pass"] == 1.0
    assert r1["summary"]["metrics"]["faithfulness"] == 1.0 and r1["summary"]["n_errors"] == 0
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


def test_persistent_500_makes_those_cases_errors_and_the_run_completes(demo, run_cli, monkeypatch, tmp_path):
    from openai_server import Fault

    cfg = demo / "rageval-openai.yml"
    text = cfg.read_text(encoding="utf-8").replace("judge: {model: gpt-4o, faithfulness: true}", "judge: {model: null}")
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
