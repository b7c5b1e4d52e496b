"""The LLM judge (rageval.metrics.judge) over real HTTP: tests/openai_server.py answers as a
scripted judge that decides from what it receives, through the real openai client (LLMClient)."""

from __future__ import annotations

import json
import random
import re

import pytest
from openai_server import Fault, OpenAIServer  # tests/ is on sys.path (conftest.py)
from seed_data import GOLDEN, POLICY

from rageval.config import LLMConfig
from rageval.errors import DatasetError
from rageval.metrics.judge import (
    JUDGE_SYSTEM,
    PAIR_SYSTEM,
    judge_agreement,
    judge_case,
    judge_messages,
    judge_pair,
    parse_labels,
    parse_pair,
    parse_verdict,
)
from rageval.pipeline.llm import LLMClient

JUDGE_MODEL = "judge-model"
Q01 = GOLDEN[0]
QUESTION, EXPECTED = Q01["cau_hoi"], Q01["tra_loi_ky_vong"]
DT1 = POLICY["DT-1"]
RIGHT = "Bạn được đổi hoặc trả trong 7 ngày kể từ ngày nhận hàng, nhớ giữ tem và hóa đơn."
WRONG = "Bạn có 30 ngày để đổi trả áo"

# --- scripted models: they read the request, like a real judge would ---------------------------------
NUMBER = re.compile(r"(\d+(?:\.\d{3})*)\s*(ngày làm việc|ngày|tháng|đồng)")


def numbers(text: str) -> set[str]:
    return {f"{n} {u}" for n, u in NUMBER.findall(text.lower())}


def block(body: dict, tag: str) -> str | None:
    """The text of <tag>…</tag> in the request's last user message (None when absent)."""
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", user, re.DOTALL)
    return m.group(1) if m else None


def system(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def grade(answer: str, expected: str, sources: str) -> dict:
    """A judge that checks numbers: every number in the answer must be in the sources, every
    number of the expected answer must be in the answer."""
    said, src = numbers(answer), numbers(sources)
    wrong = [f"{x} (the sources say {', '.join(sorted(src)) or 'nothing about it'})" for x in sorted(said - src)]
    missing = sorted(numbers(expected) - said)
    return {"verdict": "fail" if wrong or missing else "pass", "wrong_claims": wrong, "missing": missing}


def scripted_judge(body: dict) -> str:
    if system(body) == PAIR_SYSTEM:
        return scripted_pair(body)
    assert system(body) == JUDGE_SYSTEM, "not a judge request"
    return json.dumps(grade(block(body, "answer"), block(body, "expected_answer"), block(body, "sources")),
                      ensure_ascii=False)


def scripted_pair(body: dict) -> str:
    """Prefers the answer the number-checking judge passes; "tie" when both or neither pass."""
    ok = {label: grade(block(body, f"answer_{label}"), block(body, "expected_answer"),
                       block(body, "sources"))["verdict"] == "pass" for label in "AB"}
    better = "tie" if ok["A"] == ok["B"] else ("A" if ok["A"] else "B")
    return json.dumps({"better": better, "reason": "numbers"})


def biased_pair(body: dict) -> str:
    """Always prefers whatever is shown first."""
    return json.dumps({"better": "A", "reason": "the first answer is more complete"})


def make_client(server, tmp_path, **cfg):
    return LLMClient(LLMConfig(base_url=server.base_url, **cfg), env={}, cache_dir=tmp_path / "cache",
                     sleep=lambda s: None, rng=random.Random(1))


@pytest.fixture
def server():
    with OpenAIServer(responder=scripted_judge) as srv:
        yield srv


def run_judge(client, answer, *, fresh=False, case_id="q01"):
    return judge_case(client, JUDGE_MODEL, QUESTION, EXPECTED, DT1, answer, case_id=case_id, fresh=fresh)


# --- the request -------------------------------------------------------------------------------------
def test_judge_request_carries_question_expected_answer_sections_and_answer(server, tmp_path):
    result = run_judge(make_client(server, tmp_path), WRONG)
    (body,) = server.bodies("chat")
    assert body["model"] == JUDGE_MODEL and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert block(body, "question") == QUESTION
    assert block(body, "expected_answer") == EXPECTED
    assert block(body, "sources") == DT1
    assert block(body, "answer") == WRONG
    rules = system(body)
    assert "number" in rules.lower() and "exactly" in rules
    assert "Declining" in rules and "do not answer" in rules
    assert "sources do not state is a wrong claim" in rules
    assert '{"verdict": "pass" or "fail"' in rules and "Do not give a score." in rules
    # the scripted judge saw "30 ngày" against a source that says 7 ngày
    assert result.status == "fail" and result.passed is False and result.score == 0.0
    assert result.details == {"wrong_claims": ["30 ngày (the sources say 7 ngày)"], "missing": ["7 ngày"],
                              "model": JUDGE_MODEL}
    assert "30 ngày" in result.reason and "missing: 7 ngày" in result.reason


def test_a_correct_answer_passes_and_an_out_of_scope_case_says_there_are_no_sources(server, tmp_path):
    client = make_client(server, tmp_path)
    result = run_judge(client, RIGHT)
    assert result.status == "pass" and result.score == 1.0 and result.details["wrong_claims"] == []
    messages = judge_messages("Có bán vé máy bay không?", "Tài liệu không nói.", "", "Tài liệu không đề cập.")
    assert "(none: the documents do not cover this question)" in messages[1]["content"]


# --- malformed output ----------------------------------------------------------------------------------
def test_malformed_output_once_is_retried_without_cache_then_passes(tmp_path):
    replies = iter(["Tôi nghĩ câu trả lời này đạt."])

    def flaky(body):
        return next(replies, None) or scripted_judge(body)

    with OpenAIServer(responder=flaky) as srv:
        client = make_client(srv, tmp_path)
        result = run_judge(client, RIGHT)
        assert result.status == "pass"
        assert srv.calls["chat"] == 2
        assert client.usage()["calls"] == {"judge": 2}
        # the good reply replaced the bad one in the cache: the next identical run costs nothing
        again = run_judge(make_client(srv, tmp_path), RIGHT)
        assert again.status == "pass" and srv.calls["chat"] == 2


@pytest.mark.parametrize("reply", [
    "Câu trả lời sai vì 30 ngày.",                                     # prose
    json.dumps({"verdict": "mostly pass", "wrong_claims": []}),        # not pass/fail
    json.dumps({"verdict": 8, "wrong_claims": []}),                    # a score
    json.dumps({"verdict": "fail", "wrong_claims": "30 ngày"}),        # not a list
    json.dumps({"verdict": "pass", "wrong_claims": ["30 ngày"]}),      # contradicts itself
    json.dumps(["pass"]),                                              # not an object
])
def test_malformed_output_twice_is_an_error_never_a_pass(tmp_path, reply):
    with OpenAIServer(responder=lambda body: reply) as srv:
        result = run_judge(make_client(srv, tmp_path), RIGHT)
        assert srv.calls["chat"] == 2
    assert result.status == "error" and result.passed is None and result.score is None
    assert result.reason.startswith("the judge returned malformed output twice: ")


def test_a_failed_model_call_is_an_error_check(server, tmp_path):
    server.faults.append(Fault.server_error(500, times=3))
    result = run_judge(make_client(server, tmp_path, max_retries=1), RIGHT)
    assert result.status == "error" and "500" in result.reason and result.details["model"] == JUDGE_MODEL


@pytest.mark.parametrize("text, expected", [
    ('{"verdict": "pass", "wrong_claims": [], "missing": []}', {"verdict": "pass", "wrong_claims": [], "missing": []}),
    ('```json\n{"verdict": "FAIL", "wrong_claims": ["30 ngày"]}\n```',
     {"verdict": "fail", "wrong_claims": ["30 ngày"], "missing": []}),
    ('```\n{"verdict": "fail", "missing": ["7 ngày"]}\n```', {"verdict": "fail", "wrong_claims": [], "missing": ["7 ngày"]}),
])
def test_parse_verdict_accepts_json_and_a_fence(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text, message", [
    ("đạt", "not JSON"),
    ("```json\n{\"verdict\": \"pass\"", "not JSON"),
    ('"pass"', "expected a JSON object"),
    ('{"wrong_claims": []}', "'verdict' must be \"pass\" or \"fail\", got null"),
    ('{"verdict": "7/10"}', "'verdict' must be"),
    ('{"verdict": "fail", "missing": [7]}', "'missing' must be a list of strings"),
    ('{"verdict": "pass", "wrong_claims": ["x"]}', "verdict \"pass\" but wrong_claims lists 1 claim"),
])
def test_parse_verdict_rejects_malformed_output(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_verdict(text)


# --- pairwise ------------------------------------------------------------------------------------------
def test_pairwise_asks_both_orders_and_a_position_biased_judge_does_not_count(tmp_path):
    with OpenAIServer(responder=biased_pair) as srv:
        result = judge_pair(make_client(srv, tmp_path), JUDGE_MODEL, QUESTION, EXPECTED, DT1, RIGHT, WRONG,
                            case_id="q01")
        first, second = srv.bodies("chat")
    assert (block(first, "answer_A"), block(first, "answer_B")) == (RIGHT, WRONG)
    assert (block(second, "answer_A"), block(second, "answer_B")) == (WRONG, RIGHT)
    assert result == {"winner": None, "agreed": False, "first": "a", "second": "b", "error": None}


@pytest.mark.parametrize("a, b, winner", [(RIGHT, WRONG, "a"), (WRONG, RIGHT, "b"), (RIGHT, EXPECTED, "tie")])
def test_pairwise_a_consistent_judge_counts(server, tmp_path, a, b, winner):
    result = judge_pair(make_client(server, tmp_path), JUDGE_MODEL, QUESTION, EXPECTED, DT1, a, b, case_id="q01")
    assert result == {"winner": winner, "agreed": True, "first": winner, "second": winner, "error": None}
    assert server.calls["chat"] == 2


def test_pairwise_malformed_twice_does_not_count(tmp_path):
    with OpenAIServer(responder=lambda body: '{"better": "both"}') as srv:
        result = judge_pair(make_client(srv, tmp_path), JUDGE_MODEL, QUESTION, EXPECTED, DT1, RIGHT, WRONG,
                            case_id="q01")
    assert result["winner"] is None and result["agreed"] is False and result["first"] is None
    assert "malformed output twice" in result["error"]


@pytest.mark.parametrize("text, expected", [('{"better": "A"}', "A"), ('{"better": " b "}', "B"),
                                            ('{"better": "TIE"}', "tie")])
def test_parse_pair(text, expected):
    assert parse_pair(text) == expected


def test_parse_pair_rejects_anything_else():
    with pytest.raises(ValueError, match="'better' must be"):
        parse_pair('{"better": "A, slightly"}')


# --- agreement with people -----------------------------------------------------------------------------
def table(a: int, b: int, c: int, d: int) -> tuple[dict[str, bool], dict[str, bool]]:
    """labels/verdicts with a both-pass, b person-pass/judge-fail, c person-fail/judge-pass, d both-fail."""
    cells = [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d
    labels = {f"c{i:03d}": h for i, (h, _) in enumerate(cells)}
    verdicts = {f"c{i:03d}": j for i, (_, j) in enumerate(cells)}
    return labels, verdicts


def test_kappa_on_the_classic_table():
    # po = (20 + 15) / 50 = 0.7; pe = (25·30 + 25·20) / 2500 = 0.5; kappa = (0.7 − 0.5) / 0.5 = 0.4
    result = judge_agreement(*table(20, 5, 10, 15))
    assert result["n"] == 50 and result["agreement"] == 0.7 and result["kappa"] == pytest.approx(0.4)
    assert result["confusion"] == {"pass_pass": 20, "pass_fail": 5, "fail_pass": 10, "fail_fail": 15}
    assert len(result["disagreements"]) == 15 and result["disagreements"] == sorted(result["disagreements"])


@pytest.mark.parametrize("cells, agreement, kappa", [
    ((0, 5, 5, 0), 0.0, -1.0),        # always disagrees: pe = 0.5, kappa = -1
    ((6, 0, 0, 4), 1.0, 1.0),         # perfect agreement, both classes present
    ((10, 0, 0, 0), 1.0, 1.0),        # degenerate: pe = 1, perfect agreement -> 1.0 (not NaN)
    ((0, 0, 0, 7), 1.0, 1.0),
    ((9, 1, 0, 0), 0.9, 0.0),         # person always pass, judge fails one: pe = 0.9, kappa = 0
])
def test_kappa_edges(cells, agreement, kappa):
    result = judge_agreement(*table(*cells))
    assert result["agreement"] == agreement and result["kappa"] == pytest.approx(kappa)


def test_kappa_matches_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    for cells in [(20, 5, 10, 15), (3, 7, 2, 9), (12, 1, 4, 0)]:
        labels, verdicts = table(*cells)
        ids = sorted(labels)
        ref = metrics.cohen_kappa_score([labels[i] for i in ids], [verdicts[i] for i in ids])
        assert judge_agreement(labels, verdicts)["kappa"] == pytest.approx(ref, abs=1e-6)


def test_agreement_uses_common_ids_and_lists_the_rest():
    labels = {"q03": True, "q01": False, "q02": True, "q09": False}
    verdicts = {"q02": False, "q01": False, "q03": True, "q07": True}
    result = judge_agreement(labels, verdicts)
    assert result["n"] == 3 and result["agreement"] == pytest.approx(2 / 3, abs=1e-6)
    assert result["disagreements"] == ["q02"]
    assert result["missing_verdicts"] == ["q09"] and result["missing_labels"] == ["q07"]


def test_agreement_with_nothing_in_common_is_none_not_nan():
    result = judge_agreement({"q01": True}, {"q02": True})
    assert result["n"] == 0 and result["agreement"] is None and result["kappa"] is None


def test_agreement_rejects_non_boolean_verdicts():
    with pytest.raises(ValueError, match="verdicts: case 'q01' is not True/False"):
        judge_agreement({"q01": True}, {"q01": "pass"})


# --- labels (pure parsing; files are read by rageval.pipeline.judging.load_labels) -------------------------------
def test_parse_labels_jsonl_and_mapping():
    text = '{"id": "q01", "label": "pass"}\n\n{"id": "q02", "label": "FAIL"}\n{"id": 3, "label": false}\n'
    assert parse_labels(text, "labels.jsonl", jsonl=True) == {"q01": True, "q02": False, "3": False}
    assert parse_labels("q01: pass\nq02: fail\n", "labels.yaml", jsonl=False) == {"q01": True, "q02": False}
    assert parse_labels('{"q01": "pass", "q02": "fail"}', "labels.json", jsonl=False) == {"q01": True, "q02": False}


@pytest.mark.parametrize("text, jsonl, message", [
    ('{"id": "q01", "label": "pass"}\n{"id": "q02", "label": "ok"}\n', True,
     "labels:2: label \"ok\" for case 'q02' must be \"pass\" or \"fail\""),
    ('{"id": "q01", "label": "pass"}\nq02 pass\n', True, "labels:2: not a JSON object"),
    ('{"label": "pass"}\n', True, "labels:1: each line needs an \"id\""),
    ('{"id": "q01"}\n', True, "labels:1: case 'q01' has no \"label\""),
    ('{"id": "q01", "label": "pass"}\n{"id": "q01", "label": "fail"}\n', True,
     "labels:2: case 'q01' is labelled again (first on line 1)"),
    ("\n\n", True, "labels: no labels found"),
    ("q01: pass\nq02: maybe\n", False, "labels:2: label \"maybe\" for case 'q02'"),
    ("q01: pass\nq01: fail\n", False, "labels:2: case 'q01' is labelled again (first on line 1)"),
    ("- q01\n- q02\n", False, "labels: expected a mapping of case id to pass/fail"),
    ("q01: [pass\n", False, "labels:2: not valid YAML/JSON"),
])
def test_parse_labels_names_the_file_and_line_of_a_bad_entry(text, jsonl, message):
    with pytest.raises(DatasetError, match=re.escape(message)):
        parse_labels(text, "labels", jsonl=jsonl)
