"""bench/bench_model.py's our-stack part on a few banhang cases against the local OpenAI-compatible
server: the calls per case it measures are the calls the stack must make — 1 generation, 1 judge
and at most 2 faithfulness calls per case on a cold cache, none on a warm one."""

import importlib.util
import json
import sys

import pytest
from conftest import ROOT
from openai_server import OpenAIServer

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


def test_cold_run_makes_one_generation_one_judge_and_at_most_two_faithfulness_calls_per_case(ours):
    out, _, _ = ours
    section = out["section"]
    assert section["cases"] == N_CASES
    per_case = section["per_case_calls"]
    assert sorted(per_case) == ["q01", "q02", "q03", "q04"]
    for case_id, calls in per_case.items():
        assert calls["generation"] == 1, case_id
        assert calls["judge"] == 1, case_id
        assert 1 <= calls["faithfulness"] <= 2, case_id
    cold = section["cold"]
    # the first cases answer from a retrieved chunk: claims extracted, then verified -> 2 calls
    assert cold["calls"] == {"generation": 4, "judge": 4, "faithfulness": 8}
    assert cold["calls_per_case"] == {"generation": 1.0, "judge": 1.0, "faithfulness": 2.0, "total": 4.0}
    assert cold["runresult_agrees"] is True and cold["runresult_cost"]["calls_total"] == 16


def test_warm_run_makes_no_model_call(ours):
    out, chat_requests, _ = ours
    warm = out["section"]["warm"]
    assert warm["calls_total"] == 0 and warm["server_requests"] == 0
    assert warm["runresult_cost"]["cache_hits"] == 16
    assert chat_requests == 16                         # the server saw the cold run only


def test_measured_tokens_are_the_servers_usage_numbers(ours):
    out, _, recorder = ours
    cold = out["section"]["cold"]
    cost = cold["runresult_cost"]
    # the recorder counts what the server reports as usage, so the client's totals match exactly
    assert sum(c.prompt_tokens for c in recorder.calls) == cost["prompt_tokens"]
    assert sum(c.completion_tokens for c in recorder.calls) == cost["completion_tokens"]
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
    assert lines[0] == "| tool | metric | calls/case | prompt tokens/case | wall s | warm re-run calls |"
    assert lines[2].startswith("| rageval ") and "(1 generation + 1 judge + 2 faithfulness) | 4 |" in lines[2]
    assert lines[2].endswith("| 0 |")
    assert lines[3].startswith("| deepeval | FaithfulnessMetric | not installed")
