"""ModelJudge inside a real run: the seed incident replayed through the runner, with the judge and
faithfulness answered by a scripted OpenAI-compatible server over HTTP — rules first, then one
judge call per case that returns the verdict and the claims (or two more calls on the separate
path). Also the judge's admission to the gate (judge.min_agreement) and the labels file reader."""

from __future__ import annotations

import json
import re

import pytest
from builders import as_dict
from seed_data import POLICY
from test_faithfulness import scripted_faithfulness, scripted_judge_with_claims
from test_judge import block, scripted_judge, system

from rageval.config import load_config
from rageval.errors import DatasetError
from rageval.golden.set import Case
from rageval.metrics.faithfulness import EXTRACT_SYSTEM, VERIFY_SYSTEM
from rageval.metrics.judge import JUDGE_CLAIMS_SYSTEM, JUDGE_SYSTEM
from rageval.pipeline.apps import Retrieved, Trace
from rageval.pipeline.judging import ModelJudge, judge_gate_allowed, load_labels
from rageval.pipeline.llm import LLMClient
from rageval.pipeline.runner import prepare
from rageval.settings import JudgeConfig


def scripted_model(body: dict) -> str:
    if system(body) in (EXTRACT_SYSTEM, VERIFY_SYSTEM):
        return scripted_faithfulness(body)
    if system(body) == JUDGE_CLAIMS_SYSTEM:
        return scripted_judge_with_claims(body)
    return scripted_judge(body)


@pytest.fixture
def server(model_server):
    return model_server(responder=scripted_model)


def judged_project(seed_project, server, tmp_path, *, faithfulness=True, extra=""):
    path = seed_project["chunk-800"]
    path.write_text(path.read_text(encoding="utf-8")
                    + f"judge: {{model: judge-model, faithfulness: {str(faithfulness).lower()}{extra}}}\n"
                    + f"llm: {{base_url: '{server.base_url}', cache_dir: {tmp_path / 'cache'}, max_retries: 0}}\n",
                    encoding="utf-8")
    cfg = load_config(path)
    client = LLMClient(cfg.llm, env={})
    judge = ModelJudge(client, cfg.judge)
    return prepare(cfg, client=client, judge=judge, env={}), judge


CASES = ("q01", "q02", "q03", "q04", "q05")


def test_the_seed_incident_judged_end_to_end_in_one_call_per_case(seed_project, server, tmp_path):
    evaluation, _ = judged_project(seed_project, server, tmp_path, extra=", always: true")
    result = as_dict(evaluation.run())
    cases = {c["id"]: c for c in result["cases"]}
    q01 = cases["q01"]["checks"]
    assert q01["judge"]["status"] == "fail"
    assert q01["judge"]["wrong_claims"] == ["30 ngày (the sources say 7 ngày)"] and q01["judge"]["missing"] == ["7 ngày"]
    # "30 ngày" is in the retrieved L2 chunk (grounded) but not in DT-1 (incorrect)
    f = q01["faithfulness"]
    assert f["claims"] == [
        {"claim": "Bạn có 30 ngày để đổi trả áo", "in_context": "supported", "in_expected": "contradicted"},
        {"claim": "miễn là hàng còn tem và nhãn", "in_context": "supported", "in_expected": "supported"},
    ]
    assert (f["groundedness"], f["faithfulness"], f["contradicted"], f["state"], f["status"]) == (
        1.0, 0.5, 0.0, "scored", "fail")
    assert cases["q03"]["checks"]["judge"]["status"] == "fail"          # "5 ngày" is not "5 ngày làm việc"
    assert {q: cases[q]["checks"]["judge"]["status"] for q in ("q02", "q04", "q05")} == dict.fromkeys(
        ("q02", "q04", "q05"), "pass")
    assert result["summary"]["metrics"]["judge_pass"] == pytest.approx(3 / 5)
    assert result["summary"]["metrics"]["groundedness"] is not None
    # calls per case: one judge call (verdict and claims), no faithfulness call of its own
    assert server.calls["chat"] == 5
    assert evaluation.client.usage()["by_case"] == {q: {"judge": 1} for q in cases}
    assert result["cost"]["calls"] == {"judge": 5} and result["cost"]["calls_per_case"] == 1.0
    (q01_body,) = [b for b in server.bodies("chat") if block(b, "answer") == cases["q01"]["answer"]]
    # the server's own count: words of the request's messages, words of its reply
    assert result["cost"]["by_case"]["q01"] == {"judge": {
        "calls": 1, "cache_hits": 0, "prompt_tokens": sum(len(m["content"].split()) for m in q01_body["messages"]),
        "completion_tokens": len(scripted_model(q01_body).split()), "usd": 0.0}}
    assert POLICY["DT-1"] in block(q01_body, "sources")
    assert block(q01_body, "expected_answer") == cases["q01"]["expected_answer"]
    assert result["config"]["judge"]["prompt_version"] == "3" and result["config"]["judge"]["temperature"] == 0.0


def test_rules_first_cases_failing_a_rule_are_not_judged(seed_project, server, tmp_path):
    evaluation, _ = judged_project(seed_project, server, tmp_path)
    result = as_dict(evaluation.run())
    cases = {c["id"]: c for c in result["cases"]}
    # q01 ("30 ngày") and q03 ("5 ngày") fail the number rule: no model call is spent on them
    for q in ("q01", "q03"):
        assert cases[q]["checks"]["numbers"]["status"] == "fail" and cases[q]["passed"] is False
        for name in ("judge", "faithfulness"):
            check = cases[q]["checks"][name]
            assert check["status"] == "skipped"
            assert check["reason"].startswith("not judged: failed rules (numbers")
    assert {q: cases[q]["checks"]["judge"]["status"] for q in ("q02", "q04", "q05")} == dict.fromkeys(
        ("q02", "q04", "q05"), "pass")
    assert server.calls["chat"] == 3 and set(evaluation.client.usage()["by_case"]) == {"q02", "q04", "q05"}
    assert result["summary"]["metrics"]["judge_pass"] == 1.0            # over the 3 judged cases


def test_the_separate_faithfulness_path_makes_two_more_calls_per_case(seed_project, server, tmp_path):
    evaluation, _ = judged_project(seed_project, server, tmp_path, extra=", faithfulness_calls: separate, always: true")
    result = as_dict(evaluation.run())
    assert server.calls["chat"] == 15
    assert evaluation.client.usage()["by_case"] == {q: {"judge": 1, "faithfulness": 2} for q in CASES}
    assert result["cost"]["calls"] == {"faithfulness": 10, "judge": 5} and result["cost"]["calls_per_case"] == 3.0
    q01 = {c["id"]: c for c in result["cases"]}["q01"]["checks"]["faithfulness"]
    assert (q01["groundedness"], q01["faithfulness"], q01["state"]) == (1.0, 0.5, "scored")


def test_an_unchanged_rerun_costs_zero_calls_and_the_gate_rerun_calls_again(seed_project, server, tmp_path):
    evaluation, judge = judged_project(seed_project, server, tmp_path, extra=", always: true")
    assert evaluation.judge is judge
    first = as_dict(evaluation.run())
    assert server.calls["chat"] == 5
    again = as_dict(evaluation.run())
    assert server.calls["chat"] == 5                                      # all from the cache
    assert [c["checks"] for c in again["cases"]] == [c["checks"] for c in first["cases"]]
    assert again["cost"]["calls_total"] == 0 and again["cost"]["cache_hits"] == 5      # this run's own cost
    rerun = as_dict(evaluation.run(fresh=True))                                  # the gate's re-run
    assert server.calls["chat"] == 10
    assert [c["checks"] for c in rerun["cases"]] == [c["checks"] for c in first["cases"]]
    assert rerun["cost"]["calls"] == {"judge": 5}


def test_without_faithfulness_only_the_judge_runs(seed_project, server, tmp_path):
    evaluation, _ = judged_project(seed_project, server, tmp_path, faithfulness=False, extra=", always: true")
    result = as_dict(evaluation.run())
    assert server.calls["chat"] == 5
    assert all("faithfulness" not in c["checks"] for c in result["cases"])
    assert {system(b) for b in server.bodies("chat")} == {JUDGE_SYSTEM}          # no claims asked for


CASE = Case("q01", "Mua áo mặc không vừa thì được trả trong mấy ngày?", ("DT-1",),
            "Trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn.")


def test_model_judge_checks_claims_against_the_context_the_generator_saw(server, tmp_path):
    from rageval.settings import LLMConfig
    client = LLMClient(LLMConfig(base_url=server.base_url), env={}, cache_dir=tmp_path)
    retrieved = (Retrieved("L2", ("DT-3", "DT-4"), POLICY["DT-3"] + "\n\n" + POLICY["DT-4"]),
                 Retrieved("L1", ("DT-1", "DT-2"), POLICY["DT-1"] + "\n\n" + POLICY["DT-2"]))
    trace = Trace("q01", "Bạn có 30 ngày để đổi trả áo", retrieved, context_k=1)
    for calls in ("judge", "separate"):
        cfg = JudgeConfig(model="judge-model", faithfulness=True, faithfulness_calls=calls)
        out = ModelJudge(client, cfg).check(CASE, trace, POLICY["DT-1"])
        assert set(out) == {"judge", "faithfulness"}
        assert out["faithfulness"].details["groundedness"] == 1.0 and out["faithfulness"].details["faithfulness"] == 0.0
    judged, verify = (next(b for b in server.bodies("chat") if system(b) == s) for s in (JUDGE_CLAIMS_SYSTEM, VERIFY_SYSTEM))
    for body in (judged, verify):
        assert block(body, "context") == "[1] " + retrieved[0].text      # only the chunk within context_k


def test_model_judge_fresh_flag_bypasses_the_cache(server, tmp_path):
    from rageval.settings import LLMConfig
    client = LLMClient(LLMConfig(base_url=server.base_url), env={}, cache_dir=tmp_path)
    judge = ModelJudge(client, JudgeConfig(model="judge-model", faithfulness=True))
    trace = Trace("q01", "Bạn có 30 ngày để đổi trả áo", (Retrieved("L2", ("DT-3",), POLICY["DT-3"]),))
    first = judge.check(CASE, trace, POLICY["DT-1"])
    assert server.calls["chat"] == 1
    assert judge.check(CASE, trace, POLICY["DT-1"]) == first and server.calls["chat"] == 1
    assert judge.check(CASE, trace, POLICY["DT-1"], fresh=True) == first and server.calls["chat"] == 2
    assert judge.check(CASE, trace, POLICY["DT-1"]) == first and server.calls["chat"] == 2   # nothing left switched on


@pytest.mark.parametrize("always, calls", [(False, 0), (True, 1)])
def test_model_judge_skips_a_case_failing_rules_unless_always(server, tmp_path, always, calls):
    from rageval.settings import LLMConfig
    client = LLMClient(LLMConfig(base_url=server.base_url), env={}, cache_dir=tmp_path)
    judge = ModelJudge(client, JudgeConfig(model="judge-model", faithfulness=True, always=always))
    trace = Trace("q01", "Bạn có 30 ngày để đổi trả áo", (Retrieved("L2", ("DT-3",), POLICY["DT-3"]),))
    out = judge.check(CASE, trace, POLICY["DT-1"], ["numbers", "must_not_include"])
    assert server.calls["chat"] == calls
    if not always:
        assert {k: (v.status, v.reason) for k, v in out.items()} == dict.fromkeys(
            ("judge", "faithfulness"),
            ("skipped", "not judged: failed rules (numbers, must_not_include); judge.always: true judges these too"))
    else:
        assert out["judge"].status == "fail"


def test_model_judge_without_a_model_skips_and_calls_nothing(server):
    out = ModelJudge(None, JudgeConfig(faithfulness=True)).check(CASE, Trace("q01", "7 ngày"), POLICY["DT-1"])
    assert {k: v.status for k, v in out.items()} == {"judge": "skipped", "faithfulness": "skipped"}
    assert "judge.model" in out["judge"].reason and server.calls["chat"] == 0


def test_model_judge_needs_a_client_when_a_model_is_set():
    with pytest.raises(ValueError, match="needs a model client"):
        ModelJudge(None, JudgeConfig(model="judge-model"))


# --- judge.min_agreement ----------------------------------------------------------------------------------
def agreement_cfg(tmp_path, content, floor=0.8):
    path = tmp_path / "agreement.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return JudgeConfig(model="judge-model", min_agreement=floor, agreement_file=path)


def test_no_floor_means_the_judge_may_gate():
    assert judge_gate_allowed(JudgeConfig(model="judge-model")) == (True, "judge.min_agreement is not set")


def test_agreement_at_or_above_the_floor_allows_gating(tmp_path):
    allowed, why = judge_gate_allowed(agreement_cfg(tmp_path, {"agreement": 0.8, "n": 30, "kappa": 0.55}))
    assert allowed is True and why == "the judge agrees with people on 80% of 30 labelled cases, kappa 0.55 (floor 80%)"


@pytest.mark.parametrize("content, floor, message", [
    ({"agreement": 0.7, "n": 30, "kappa": 0.4}, 0.8,
     "the judge agrees with people on 70% of 30 labelled cases, kappa 0.40, below judge.min_agreement 80%"),
    (None, 0.8, "does not exist"),
    ("{not json", 0.8, "is not an agreement report (not JSON"),
    # the last of two values must not win: a report saying 0.1 and then 0.95 is not one report
    ('{"agreement": 0.1, "n": 30, "agreement": 0.95}', 0.8, "'agreement' appears twice"),
    ('{"agreement": NaN}', 0.8, "is not an agreement report (not JSON"),
    ('{"agreement": 1' + "0" * 400 + '}', 0.8, "no number 'agreement' between 0 and 1"),
    ({"kappa": 0.9}, 0.8, "no number 'agreement' between 0 and 1"),
    ({"agreement": "high"}, 0.8, "no number 'agreement' between 0 and 1"),
    ({"agreement": 1.5}, 0.8, "no number 'agreement' between 0 and 1"),
    ([0.9], 0.8, "no number 'agreement'"),
])
def test_missing_unreadable_or_low_agreement_refuses_the_judge(tmp_path, content, floor, message):
    allowed, why = judge_gate_allowed(agreement_cfg(tmp_path, content, floor))
    assert allowed is False and message in why


def test_a_floor_without_an_agreement_file_refuses_the_judge():
    allowed, why = judge_gate_allowed(JudgeConfig(model="judge-model", min_agreement=0.8))
    assert allowed is False and "judge.agreement_file is not set" in why and "rageval judge-agreement --out" in why


# --- labels files -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("labels.jsonl", '{"id": "q01", "label": "pass"}\n{"id": "q02", "label": "fail"}\n'),
    ("labels.yaml", "q01: pass\nq02: fail\n"),
    ("labels.yml", "q01: true\nq02: false\n"),
    ("labels.json", '{"q01": "pass", "q02": "fail"}'),
])
def test_load_labels_formats(tmp_path, name, text):
    (tmp_path / name).write_text(text, encoding="utf-8")
    assert load_labels(tmp_path / name) == {"q01": True, "q02": False}


@pytest.mark.parametrize("name, text, message", [
    ("labels.jsonl", '{"id": "q01", "label": "pass"}\n{"id": "q02", "label": "đạt"}\n',
     "labels.jsonl: line 2: label \"đạt\" for case 'q02' must be \"pass\" or \"fail\""),
    ("labels.yaml", "q01: pass\nq02: 1\n", "labels.yaml: line 2: label 1 for case 'q02'"),
    ("labels.csv", "id,label\nq01,pass\n", "unknown labels format '.csv'"),
    ("absent.jsonl", None, "absent.jsonl: labels file not found"),
])
def test_load_labels_errors_name_the_file_and_line(tmp_path, name, text, message):
    if text is not None:
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_labels(tmp_path / name)
