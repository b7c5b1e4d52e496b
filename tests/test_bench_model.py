"""bench/bench_model.py's our-stack part on a few banhang cases against the local OpenAI-compatible
server: the calls per case it measures are the calls the stack must make — 1 generation, then 1
judge call (verdict and claims) only for cases that pass the rules; 2 per case when every case is
judged; 4 with the separate faithfulness path; none on a warm cache."""

import importlib.util
import json
import sys

import pytest
from conftest import ROOT
from openai_server import OpenAIServer

from rageval.config import load_config
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.metrics.numbers import check_numbers
from rageval.metrics.registry import rule_check_names
from rageval.metrics.rules import check_phrases, check_refusal

N_CASES = 4


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_model", ROOT / "bench" / "bench_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_model"] = module      # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    recorder = bench.Recorder()
    with OpenAIServer(responder=recorder) as server:
        out = bench.run_ours(server, recorder, tmp_path_factory.mktemp("bench"), cases=N_CASES)
        chat_requests = server.calls["chat"]
    return out, chat_requests, recorder


def failing_rules(inputs):
    """Case ids whose answer fails a rule, decided here by the rule functions themselves on the
    answers the stack got, not by the runner that skips the judge."""
    cfg = load_config(ROOT / "examples" / "banhang" / "rageval-openai.yml")
    golden, corpus = load_golden(cfg.golden), load_corpus(cfg.corpus, cfg.root)
    answers = {i["id"]: i["answer"] for i in inputs}
    out = set()
    for case in golden.cases:
        if case.id not in answers:
            continue
        answer = answers[case.id]
        checks = [check_numbers(answer, case.expected_answer, corpus.text_of(case.expected_sections), cfg.checks.units),
                  check_phrases(answer, case.must_include, "must_include"),
                  check_phrases(answer, case.must_not_include, "must_not_include", inverse=True),
                  check_refusal(answer, case.out_of_scope, cfg.checks.refusal_markers)]
        assert len(checks) == len(rule_check_names())
        if any(c.status == "fail" for c in checks):
            out.add(case.id)
    return out


def test_cold_run_one_generation_and_one_judge_call_only_for_cases_passing_the_rules(ours):
    out, _, _ = ours
    section = out["section"]
    assert section["cases"] == N_CASES
    failing = failing_rules(out["inputs"])
    assert 0 < len(failing) < N_CASES                              # the bench exercises both paths
    per_case = section["per_case_calls"]
    assert sorted(per_case) == ["q01", "q02", "q03", "q04"]
    for case_id, calls in per_case.items():
        assert calls == ({"generation": 1} if case_id in failing else {"generation": 1, "judge": 1}), case_id
    cold = section["cold"]
    judged = N_CASES - len(failing)
    assert cold["calls"] == {"generation": N_CASES, "judge": judged}
    assert cold["calls_per_case"]["total"] == (N_CASES + judged) / N_CASES
    assert cold["runresult_agrees"] is True and cold["runresult_cost"]["calls_total"] == N_CASES + judged
    assert section["rules_first"] == {
        "cases": N_CASES, "cases_failing_rules": len(failing),
        "judge_calls_on_failing_cases": {"before": len(failing), "after": 0},
        "judge_calls_all_cases": {"before": N_CASES, "after": judged},
        "calls_total": {"before": 2 * N_CASES, "after": N_CASES + judged}}


def test_every_case_judged_is_two_calls_per_case_and_the_separate_path_four(ours):
    modes = ours[0]["section"]["modes"]
    assert modes["always"]["cold"]["calls_per_case"] == {"generation": 1.0, "judge": 1.0, "total": 2.0}
    assert modes["separate"]["cold"]["calls_per_case"] == {"generation": 1.0, "judge": 1.0, "faithfulness": 2.0,
                                                           "total": 4.0}
    assert all(m["cold"]["runresult_agrees"] and m["warm"]["calls_total"] == 0 for m in modes.values())


def test_warm_run_makes_no_model_call(ours):
    out, chat_requests, _ = ours
    section = out["section"]
    warm, cold = section["warm"], section["cold"]
    assert warm["calls_total"] == 0 and warm["server_requests"] == 0
    assert warm["runresult_cost"]["cache_hits"] == cold["calls_total"]
    cold_calls = [m["cold"]["calls_total"] for m in section["modes"].values()] + [cold["calls_total"]]
    assert chat_requests == sum(cold_calls)            # the server saw the cold runs only


def test_measured_tokens_are_the_servers_usage_numbers(ours):
    out, _, recorder = ours
    cold = out["section"]["cold"]
    cost = cold["runresult_cost"]
    first = recorder.calls[:cold["calls_total"]]                # the rules-first cold run came first
    # the recorder counts what the server reports as usage, so the client's totals match exactly
    assert sum(c.prompt_tokens for c in first) == cost["prompt_tokens"]
    assert sum(c.completion_tokens for c in first) == cost["completion_tokens"]
    assert cold["prompt_tokens_per_case"]["total"] == round(cost["prompt_tokens"] / N_CASES, 1)


def test_every_prompt_was_recognised_and_answered_well_formed(ours):
    out, _, recorder = ours
    kinds = {c.kind for c in recorder.calls}
    assert kinds == {"rageval.generation", "rageval.judge", "rageval.claims", "rageval.verify"}
    assert out["section"]["scores"]["judge_pass"] == 1.0
    assert out["section"]["scores"]["faithfulness"] == 1.0
    # the inputs handed to Ragas / DeepEval are the stack's own answers and contexts
    inputs = out["inputs"]
    assert [i["id"] for i in inputs] == ["q01", "q02", "q03", "q04"]
    assert all(i["answer"] and i["contexts"] and i["expected_text"] for i in inputs)


def test_faithfulness_only_row_two_calls_cold_zero_warm(ours, tmp_path):
    out, _, _ = ours
    recorder = bench.Recorder()
    with OpenAIServer(responder=recorder) as server:
        row = bench.run_ours_faithfulness(server, recorder, tmp_path, out["inputs"], out["judge_model"], out["llm_cfg"])
    assert row["cold"]["calls_per_case"]["total"] == 2.0
    assert row["warm"]["calls_total"] == 0
    assert row["scores"] == {"groundedness": 1.0, "faithfulness": 1.0, "errors": 0}


@pytest.mark.parametrize("answer, source, expected", [
    ("Khách được trả hàng trong 7 ngày. [DT-1]", "Khách được trả hàng trong 7 ngày kể từ ngày nhận.", True),
    ("Khách được trả hàng trong 30 ngày. [DT-1]", "Khách được trả hàng trong 7 ngày kể từ ngày nhận.", False),
])
def test_mechanical_entailment_supports_only_text_that_is_in_the_source(answer, source, expected):
    claims = bench.claims_of(answer)
    assert claims == [answer.replace(" [DT-1]", "")]
    assert bench.supported(claims[0], source) is expected


def test_a_refusal_states_no_claims():
    assert bench.claims_of(bench.DECLINE) == []
    assert bench.claims_of("") == []


def test_a_tool_that_is_not_importable_is_recorded_as_not_installed_with_the_pip_command():
    missing = bench.not_installed("ragas", ModuleNotFoundError("No module named 'ragas'", name="ragas"))
    assert missing["status"] == "not installed" and "pip install ragas" in missing["install"]
    broken = bench.not_installed("ragas", ModuleNotFoundError("No module named 'langchain_community.x'",
                                                             name="langchain_community.x"))
    assert broken["status"] == "import failed" and "langchain_community.x" in broken["error"]


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1", True), ("127.5.0.9", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("10.0.0.1", False), ("api.openai.com", False), ("0.0.0.0", False), (None, False),
])
def test_loopback_guard_allows_only_loopback(host, allowed):
    assert bench.is_loopback(host) is allowed


def test_loopback_guard_refuses_resolving_a_remote_name_and_records_it():
    import socket
    with bench.LoopbackGuard() as guard:
        with pytest.raises(OSError, match="refused resolve api.openai.com"):
            socket.getaddrinfo("api.openai.com", 443)
        assert socket.getaddrinfo("127.0.0.1", 80)          # loopback still resolves
    assert guard.blocked == ["resolve api.openai.com"]
    assert socket.getaddrinfo.__module__ == "socket"        # restored on exit


def test_results_merge_keeps_other_tools_sections(tmp_path):
    path = tmp_path / "results.json"
    bench.merge_results(path, {"ours": {"v": 1}, "ragas": {"v": 1}})
    merged = bench.merge_results(path, {"ragas": {"v": 2}, "deepeval": {"v": 3}})
    assert merged == {"ours": {"v": 1}, "ragas": {"v": 2}, "deepeval": {"v": 3}}
    assert json.loads(path.read_text(encoding="utf-8")) == merged
    assert not path.with_suffix(".json.tmp").exists()


def test_table_lists_a_row_per_tool_with_the_measured_numbers(ours):
    out, _, _ = ours
    text = bench.table({"ours": out["section"],
                        "deepeval": {"status": "not installed", "metric": "FaithfulnessMetric",
                                     "error": "ModuleNotFoundError: No module named 'deepeval'"}})
    lines = text.splitlines()
    assert lines[0] == "| tool | metric | calls/case | prompt tokens/case | wall s | calls on an unchanged re-run |"
    cold = out["section"]["cold"]["calls_per_case"]
    assert lines[2].startswith("| rageval ") and f"(generation 1 + judge {cold['judge']:.2f}) | {cold['total']:.2f} |" in lines[2]
    assert "(generation 1 + judge 1) | 2 |" in lines[3] and "(generation 1 + judge 1 + faithfulness 2) | 4 |" in lines[4]
    assert all(line.endswith("| 0 |") for line in lines[2:5])
    assert lines[5].startswith("| deepeval | FaithfulnessMetric | not installed")


def test_an_unchanged_gate_counts_its_re_run_calls_as_the_server_did(tmp_path):
    with OpenAIServer(responder=bench.Recorder()) as server:
        out = bench.run_gate_rerun(server, tmp_path, subset="pr")
    warm = out["unchanged"]
    assert warm["first_run_calls"] == 0 and warm["cases_rechecked"] > 0
    assert warm["rerun_calls"] == warm["verdict_rerun_calls"] == warm["server_calls"] > 0
    assert warm["report_line"].startswith(f"**Re-run cost** (cache bypassed, to confirm the decision): "
                                          f"{warm['server_calls']} model calls")
    assert out["agrees"] is True
    cold = out["cold"]
    assert cold["first_run_calls"] + cold["rerun_calls"] == cold["server_calls"]
