"""The LLM judge (rageval.metrics.judge) over real HTTP: tests/openai_server.py answers as a
scripted judge that decides from what it receives, through the real openai client (LLMClient)."""

from __future__ import annotations

import json
import random
import re

import pytest
from openai_server import Fault, OpenAIServer, Refusal  # tests/ is on sys.path (conftest.py)
from seed_data import GOLDEN, POLICY

from rageval.config import load_config
from rageval.errors import ConfigError, DatasetError
from rageval.metrics.judge import (
    JUDGE_PARAMETERS,
    JUDGE_PROMPT_VERSION,
    JUDGE_SYSTEM,
    PAIR_SYSTEM,
    judge_agreement,
    judge_case,
    judge_messages,
    judge_pair,
    judge_signature,
    pair_messages,
    parse_pair,
    parse_verdict,
)
from rageval.metrics.labels import parse_labels
from rageval.models import model_key, same_model
from rageval.pipeline.llm import LLMClient
from rageval.settings import LLMConfig

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
def server(model_server):
    return model_server(responder=scripted_judge)


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


# --- the shapes real endpoints reply in, over HTTP -------------------------------------------------------
VERDICT_FAIL = {"verdict": "fail", "wrong_claims": ["30 ngày (the sources say 7 ngày)"], "missing": ["7 ngày"]}


def shaped(shape: str, verdict: dict):
    """The scripted judge's verdict the way an endpoint that ignores response_format writes it."""
    if shape == "refusal":
        return Refusal("I'm sorry, but I can't help with grading this content.")
    if shape == "single quotes":
        return repr({**verdict, "confident": True, "note": None})
    if shape == "vietnamese verdict":
        verdict = {**verdict, "verdict": {"pass": "đạt", "fail": "không đạt"}[verdict["verdict"]]}
    text = json.dumps(verdict, ensure_ascii=False)
    return {
        "bare JSON": text, "vietnamese verdict": text,
        "json fence": f"```json\n{text}\n```",
        "prose around": f"Đây là đánh giá của tôi: {text}\nNếu cần tôi có thể giải thích thêm {{chi tiết}}.",
        "prose and fence": f"Sure! Here is the grading.\n\n```json\n{text}\n```\n\nThe answer was checked.",
    }[shape]


SHAPES = ("bare JSON", "json fence", "prose around", "prose and fence", "single quotes", "vietnamese verdict")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("answer", [RIGHT, WRONG])
def test_each_reply_shape_gives_the_verdict_the_judge_meant(tmp_path, shape, answer):
    with OpenAIServer(responder=lambda body: shaped(shape, json.loads(scripted_judge(body)))) as srv:
        result = run_judge(make_client(srv, tmp_path), answer)
        assert srv.calls["chat"] == 1                                  # read at once, no retry
    if answer == RIGHT:
        assert (result.status, result.score, result.details["wrong_claims"]) == ("pass", 1.0, [])
    else:
        assert (result.status, result.score) == ("fail", 0.0)
        assert {k: result.details[k] for k in ("wrong_claims", "missing")} == {
            "wrong_claims": VERDICT_FAIL["wrong_claims"], "missing": VERDICT_FAIL["missing"]}


@pytest.mark.parametrize("answer", [RIGHT, WRONG])
def test_a_refusal_is_its_own_state_never_a_pass_and_is_not_asked_again(tmp_path, answer):
    with OpenAIServer(responder=lambda body: shaped("refusal", {})) as srv:
        client = make_client(srv, tmp_path)
        result = run_judge(client, answer)
        assert srv.calls["chat"] == 1
        assert srv.bodies("chat")[0]["response_format"] == {"type": "json_object"}
        again = run_judge(make_client(srv, tmp_path), answer)           # cached like any answer
        assert srv.calls["chat"] == 1 and again == result
    assert result.status == "error" and result.passed is None and result.score is None
    assert result.details["state"] == "refused"
    assert result.reason == "judge refused: I'm sorry, but I can't help with grading this content."


def test_an_unreadable_reply_is_an_error_showing_its_first_200_characters(tmp_path):
    reply = "Câu trả lời này đúng một phần " * 10 + "TAIL-NOT-SHOWN"          # 310 characters, no JSON
    with OpenAIServer(responder=lambda body: reply) as srv:
        result = run_judge(make_client(srv, tmp_path), RIGHT)
        assert srv.calls["chat"] == 2                                  # asked again once, cache bypassed
    assert result.status == "error" and result.passed is None
    shown = " ".join(reply.split())[:200]
    assert f"no JSON object in the reply: '{shown}…'" in result.reason
    assert "TAIL-NOT-SHOWN" not in result.reason


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
    json.dumps({"verdict": "mostly pass", "wrong_claims": []}),        # not a verdict word
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
    ('Kết quả: {"verdict": "Đạt."}', {"verdict": "pass", "wrong_claims": [], "missing": []}),
    ('{"verdict": " KHÔNG ĐẠT ", "missing": ["7 ngày"]}', {"verdict": "fail", "wrong_claims": [], "missing": ["7 ngày"]}),
    # "đạt" with a combining dot below and a combining grave accent (NFD), as some tokenizers emit it
    ('{"verdict": "đa\u0323t"}', {"verdict": "pass", "wrong_claims": [], "missing": []}),
    ("{'verdict': 'incorrect', 'wrong_claims': ['It\\'s \"30 ngày\"'], 'missing': None,}",
     {"verdict": "fail", "wrong_claims": ['It\'s "30 ngày"'], "missing": []}),
    ('Format: {verdict}. Answer: {"verdict": "correct", "note": "brace } in a string"} done',
     {"verdict": "pass", "wrong_claims": [], "missing": []}),
])
def test_parse_verdict_reads_the_shapes_and_words(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text, message", [
    ("đạt", "no JSON object in the reply: 'đạt'"),
    ("   ", "the reply is empty"),
    ("```json\n{\"verdict\": \"pass\"", "no JSON object in the reply"),
    ('"pass"', "no JSON object in the reply"),
    ('{"wrong_claims": []}', "'verdict' must be \"pass\" or \"fail\" (also read: đạt / không đạt, correct / incorrect), got null"),
    ('{"verdict": "7/10"}', "'verdict' must be"),
    ('{"verdict": "đạt một phần"}', "'verdict' must be"),
    ('{"verdict": true}', "'verdict' must be"),
    ('{"verdict": "fail", "missing": [7]}', "'missing' must be a list of strings"),
    ('{"verdict": "pass", "wrong_claims": ["x"]}', "verdict \"pass\" but wrong_claims lists 1 claim"),
    ("{'verdict': __import__('os').system('true')}", "no JSON object in the reply"),   # never evaluated
])
def test_parse_verdict_rejects_what_it_cannot_read(text, message):
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


# --- labels (rageval.metrics.labels: pure parsing; files are read by rageval.pipeline.judging.load_labels) -------
def test_parse_labels_jsonl_and_mapping():
    text = '{"id": "q01", "label": "pass"}\n\n{"id": "q02", "label": "FAIL"}\n{"id": 3, "label": false}\n'
    assert parse_labels(text, "labels.jsonl", jsonl=True) == {"q01": True, "q02": False, "3": False}
    assert parse_labels("q01: pass\nq02: fail\n", "labels.yaml", jsonl=False) == {"q01": True, "q02": False}
    assert parse_labels('{"q01": "pass", "q02": "fail"}', "labels.json", jsonl=False) == {"q01": True, "q02": False}


@pytest.mark.parametrize("text, jsonl, message", [
    ('{"id": "q01", "label": "pass"}\n{"id": "q02", "label": "ok"}\n', True,
     "labels: line 2: label \"ok\" for case 'q02' must be \"pass\" or \"fail\""),
    ('{"id": "q01", "label": "pass"}\nq02 pass\n', True, "labels: line 2: not valid JSON"),
    ('{"id": "q01", "label": "pass"}\n[1]\n', True, "labels: line 2: not a JSON object"),
    ('{"label": "pass"}\n', True, "labels: line 1: each line needs an \"id\""),
    ('{"id": "q01"}\n', True, "labels: line 1: case 'q01' has no \"label\""),
    ('{"id": "q01", "label": "pass"}\n{"id": "q01", "label": "fail"}\n', True,
     "labels: line 2: case 'q01' is labelled again (first on line 1)"),
    ("\n\n", True, "labels: no labels found"),
    ("q01: pass\nq02: maybe\n", False, "labels: line 2: label \"maybe\" for case 'q02'"),
    ("q01: pass\nq01: fail\n", False, "labels: line 2: key 'q01' appears twice (lines 1 and 2)"),
    ("1: pass\n'1': fail\n", False, "labels: line 2: case '1' is labelled twice (keys 1 and '1' are one case id)"),
    ("- q01\n- q02\n", False, "labels: expected a mapping of case id to pass/fail"),
    ("q01: [pass\n", False, "labels: line 2: not valid YAML"),
    # read by rageval.parse like every other input: the same refusals, naming file and line
    ('{"id": "q01", "label": "pass"}\n{"id": "q02", "id": "q03", "label": "fail"}\n', True,
     "labels: line 2: key 'id' appears twice"),
    ('{"id": "q01", "label": "pass", "score": NaN}\n', True, "labels: line 1: NaN is not a finite number"),
    ('{"id": "q01", "label": "pass"}\n{"id": "q02", "label": ' + "[" * 100_000 + "]" * 100_000 + "}\n", True,
     "labels: line 2: nested more than 64 levels deep"),
    ("q01: &p pass\nq02: *p\n", False, "labels: line 2: YAML alias '*p'"),
    ("q01: pass\nq02: " + "[" * 100_000 + "]" * 100_000 + "\n", False, "labels: line 2: nested more than 64 levels deep"),
    ("q01: 2024-01-01\n", False, "labels: line 1: label datetime.date(2024, 1, 1) for case 'q01'"),
])
def test_parse_labels_names_the_file_and_line_of_a_bad_entry(text, jsonl, message):
    with pytest.raises(DatasetError, match=re.escape(message)):
        parse_labels(text, "labels", jsonl=jsonl)


# --- evaluator identity --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt-4o-mini", "GPT-4o-mini", "gpt-4o-mini-2024-07-18", "openai/gpt-4o-mini",
                                  " OpenAI/GPT-4o-Mini-2024-07-18 ", "gpt-4o-mini:latest", "openai:gpt-4o-mini",
                                  "gpt-4o-mini@2024-07-18", "azure:gpt-4o-mini-20240718"])
def test_model_key_sets_aside_case_provider_prefix_and_date_suffix(name):
    assert model_key(name) == "gpt-4o-mini"


@pytest.mark.parametrize("judge, generator", [
    ("openai:gpt-4o-mini", "gpt-4o-mini"), ("gpt-4o-mini@2024-07-18", "gpt-4o-mini"),
    ("llama3.1", "llama3.1:8b"), ("llama3.1:8b", "llama3.1:8b-instruct-q4_K_M"),
    ("llama3.1", "llama3.1:8b-instruct-q4_K_M"),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022"), ("gemini-1.5-pro", "gemini-1.5-pro-002"),
    ("models/gemini-1.5-pro-latest", "gemini-1.5-pro-001"), ("gpt-4", "gpt-4-0613"),
])
def test_judge_and_generator_under_other_names_are_the_same_model(judge, generator, tmp_path):
    assert same_model(judge, generator) and same_model(generator, judge)
    (tmp_path / "p.j2").write_text("{{ question }}", encoding="utf-8")
    (tmp_path / "rageval.yml").write_text(f"golden: g.yaml\ncorpus: docs/*.md\ngeneration: {{provider: openai, "
                                          f"model: '{generator}', prompt: p.j2}}\njudge: {{model: '{judge}'}}\n",
                                          encoding="utf-8")
    with pytest.raises(ConfigError, match="are the same model"):
        load_config(tmp_path / "rageval.yml")


@pytest.mark.parametrize("a, b", [("llama3.1:8b", "llama3.1:70b"), ("gemini-1.5-pro", "gemini-1.5-flash"),
                                  ("claude-3-5-sonnet-latest", "claude-3-5-haiku-latest"), ("gpt-4o", "gpt-4o-mini")])
def test_different_models_stay_different(a, b):
    assert not same_model(a, b)


@pytest.mark.parametrize("a, b", [("gpt-4o-mini", "gpt-4o"), ("gpt-4.1", "gpt-4.1-mini"), ("llama3:8b", "llama3:70b"),
                                  ("claude-3-5-sonnet-20241022", "claude-3-5-haiku-20241022")])
def test_model_key_keeps_different_models_apart(a, b):
    assert model_key(a) != model_key(b)


def judged_config(**judge):
    return {"generation": {"model": "gpt-4o-mini"}, "judge": {"model": "gpt-4o", "faithfulness": True,
                                                              "faithfulness_calls": "judge", "always": False,
                                                              **JUDGE_PARAMETERS, **judge}}


def test_judge_signature_is_what_must_match_for_judge_metrics_to_compare():
    assert judge_signature(judged_config()) == {
        "model": "gpt-4o", "prompt_version": JUDGE_PROMPT_VERSION, "temperature": 0.0, "faithfulness": True,
        "faithfulness_calls": "judge", "always": False}
    assert judge_signature(judged_config(model="openai/GPT-4o-2024-08-06")) == judge_signature(judged_config())
    for change in ({"model": "gpt-4.1"}, {"prompt_version": "1"}, {"temperature": 0.7}, {"faithfulness": False},
                   {"faithfulness_calls": "separate"}, {"always": True}):
        assert judge_signature(judged_config(**change)) != judge_signature(judged_config()), change


def test_judge_signature_without_a_judge_and_of_a_run_from_before_prompt_versions():
    assert judge_signature({"judge": {"model": None}}) is None
    assert judge_signature({}) is None and judge_signature(None) is None
    old = {"judge": {"model": "gpt-4o", "allow_same_model": False, "faithfulness": True}}   # rageval 0.1.0
    assert judge_signature(old) == {"model": "gpt-4o", "prompt_version": None, "temperature": 0.0,
                                    "faithfulness": True, "faithfulness_calls": "separate", "always": True}
    assert judge_signature(old) != judge_signature(judged_config())


def test_a_release_0_1_0_runresult_has_no_judge_signature():
    from conftest import ROOT
    data = json.loads((ROOT / "tests" / "data" / "release-0.1.0" / "runresult.json").read_text(encoding="utf-8"))
    assert judge_signature(data["config"]) is None          # no judge model configured there


#: sha256 of every judge-family prompt, rendered for fixed inputs. It changes whenever a prompt
#: does: then bump JUDGE_PROMPT_VERSION (runs judged by other prompts must not be compared) and
#: update this value.
PROMPTS_SHA256 = "b13ce2e3b4f3a25674547bbec377ecd1681ea5d61d1520d5fd1279db502e61b1"


def rendered_prompts() -> str:
    from rageval.metrics.faithfulness import extract_messages, verify_messages
    msgs = [judge_messages("Q?", "E.", "S.", "A."), judge_messages("Q?", "E.", "S.", "A.", ["C1", "C2"]),
            judge_messages("Q?", "E.", "", "A.", []), pair_messages("Q?", "E.", "S.", "A1", "A2"),
            extract_messages("Q?", "A."), verify_messages(["c1", "c2"], ["C1"], "S.")]
    return json.dumps(msgs, ensure_ascii=False, sort_keys=True)


def test_the_judge_prompts_carry_their_version():
    import hashlib
    digest = hashlib.sha256(rendered_prompts().encode("utf-8")).hexdigest()
    assert (digest, JUDGE_PROMPT_VERSION) == (PROMPTS_SHA256, "3"), (
        "a judge prompt changed: bump JUDGE_PROMPT_VERSION in rageval/metrics/judge.py and update PROMPTS_SHA256")
