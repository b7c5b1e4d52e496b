"""Faithfulness (rageval.metrics.faithfulness) over real HTTP: the scripted model splits answers
into claims and checks them against the sources it is sent, like a real one would."""

from __future__ import annotations

import json
import re

import pytest
from openai_server import OpenAIServer  # tests/ is on sys.path (conftest.py)
from seed_data import POLICY
from test_judge import NUMBER, block, make_client, system

from rageval.metrics.faithfulness import (
    EXTRACT_SYSTEM,
    VERIFY_SYSTEM,
    check_faithfulness,
    parse_claims,
    parse_verification,
    supported_share,
    verify_messages,
)

MODEL = "judge-model"
# Seed 001's fixture (a made-up exchange policy)
Q_001 = "Tôi cần gì để đổi sản phẩm và có thể liên hệ qua điện thoại không?"
A_001 = ("Bạn có thể đổi sản phẩm trong 7 ngày kể từ khi nhận hàng, cần có hóa đơn và được hỗ trợ qua "
         "điện thoại.")
CTX_001 = "Khách hàng có thể đổi sản phẩm trong 7 ngày kể từ ngày nhận hàng. Việc đổi sản phẩm cần có hóa đơn."
# Seed 000's incident: a wrong answer grounded in the wrongly retrieved chunk (DT-3 + DT-4)
Q01 = "Mua áo mặc không vừa thì được trả trong mấy ngày?"
A_30 = "Bạn có 30 ngày để đổi trả áo"
CTX_L2 = [POLICY["DT-3"] + "\n\n" + POLICY["DT-4"]]
EXPECTED_DT1 = POLICY["DT-1"]


# --- scripted model ----------------------------------------------------------------------------------
def split_claims(answer: str) -> list[str]:
    """Sentences split at commas and "và"; pieces under three words rejoin the previous one;
    questions and exclamations are not claims."""
    claims: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", answer.strip()):
        if not sentence or sentence.endswith(("?", "!")):
            continue
        for piece in re.split(r",\s*|\s+và\s+", sentence.rstrip(".")):
            if claims and len(piece.split()) < 3:
                claims[-1] += " và " + piece
            elif piece.strip():
                claims.append(piece.strip())
    return claims


def syllables(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def verdict(claim: str, source: str) -> str:
    """A claim with a number+unit: supported if the source has it, contradicted if the source has
    another number with that unit. Otherwise supported when ≥ 60 % of its words are in the source."""
    said = NUMBER.findall(claim.lower())
    src = NUMBER.findall(source.lower())
    if said:
        if all(x in src for x in said):
            return "supported"
        units = {u for _, u in src}
        return "contradicted" if any(u in units for _, u in said) else "unsupported"
    words = syllables(claim)
    return "supported" if len(words & syllables(source)) >= 0.6 * len(words) else "unsupported"


def scripted_faithfulness(body: dict) -> str:
    if system(body) == EXTRACT_SYSTEM:
        return json.dumps({"claims": split_claims(block(body, "answer"))}, ensure_ascii=False)
    assert system(body) == VERIFY_SYSTEM, "not a faithfulness request"
    claims = [line.split(". ", 1)[1] for line in block(body, "claims").splitlines()]
    context, expected = block(body, "context"), block(body, "expected_sections")
    rows = []
    for claim in claims:
        row = {"claim": claim}
        if context is not None:
            row["in_context"] = verdict(claim, context)
        if expected is not None:
            row["in_expected"] = verdict(claim, expected)
        rows.append(row)
    return json.dumps({"claims": rows}, ensure_ascii=False)


@pytest.fixture
def server():
    with OpenAIServer(responder=scripted_faithfulness) as srv:
        yield srv


def check(client, question, answer, context, expected, **kw):
    return check_faithfulness(client, MODEL, question, answer, context, expected, case_id=kw.pop("case_id", "c1"), **kw)


# --- the seeds' fixtures -------------------------------------------------------------------------------
def test_seed_001_two_of_three_claims_are_grounded(server, tmp_path):
    client = make_client(server, tmp_path)
    result = check(client, Q_001, A_001, [CTX_001], "")
    assert result.details["groundedness"] == pytest.approx(2 / 3, abs=1e-6) == pytest.approx(0.667, abs=5e-4)
    assert [(c["claim"], c["in_context"]) for c in result.details["claims"]] == [
        ("Bạn có thể đổi sản phẩm trong 7 ngày kể từ khi nhận hàng", "supported"),
        ("cần có hóa đơn", "supported"),
        ("được hỗ trợ qua điện thoại", "unsupported"),
    ]
    # no expected sections: correctness cannot be judged, so the check does not gate
    assert result.details["faithfulness"] is None and result.details["state"] == "no_expected_sections"
    assert result.status == "skipped" and "2/3 supported by the retrieved context" in result.reason


def test_seed_001_against_the_policy_as_expected_section_fails_on_the_phone_claim(server, tmp_path):
    result = check(make_client(server, tmp_path), Q_001, A_001, [CTX_001], CTX_001)
    assert result.status == "fail" and result.passed is False
    assert result.score == result.details["faithfulness"] == pytest.approx(0.666667)
    assert result.details["state"] == "scored"
    assert "được hỗ trợ qua điện thoại (unsupported)" in result.reason


def test_seed_000_a_wrong_answer_perfectly_grounded_in_a_wrongly_retrieved_chunk(server, tmp_path):
    result = check(make_client(server, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1)
    assert result.details["groundedness"] == 1.0
    assert result.details["faithfulness"] == 0.0
    assert result.details["claims"] == [{"claim": A_30, "in_context": "supported", "in_expected": "contradicted"}]
    assert result.status == "fail" and result.score == 0.0
    assert "0/1 claims supported by the expected sections; 1/1 supported by the retrieved context" in result.reason


def test_a_correct_grounded_answer_passes(server, tmp_path):
    answer = "Bạn được đổi hoặc trả trong 7 ngày kể từ ngày nhận hàng"
    result = check(make_client(server, tmp_path), Q01, answer, [EXPECTED_DT1], EXPECTED_DT1)
    assert result.status == "pass" and result.score == 1.0
    assert (result.details["faithfulness"], result.details["groundedness"], result.details["state"]) == (1.0, 1.0, "scored")


# --- calls ---------------------------------------------------------------------------------------------
def test_two_calls_per_case_extract_then_verify_both_sources_at_once(server, tmp_path):
    client = make_client(server, tmp_path)
    check(client, Q01, A_30, CTX_L2, EXPECTED_DT1, case_id="q01")
    extract, verify = server.bodies("chat")
    assert server.calls["chat"] == 2 and client.usage()["by_case"] == {"q01": {"faithfulness": 2}}
    for body in (extract, verify):
        assert body["temperature"] == 0 and body["response_format"] == {"type": "json_object"}
    assert block(extract, "answer") == A_30 and block(extract, "question") == Q01
    assert block(verify, "claims") == f"1. {A_30}"
    assert block(verify, "context") == "[1] " + CTX_L2[0]
    assert block(verify, "expected_sections") == EXPECTED_DT1


def test_an_identical_rerun_is_served_from_cache_and_fresh_calls_again(server, tmp_path):
    first = check(make_client(server, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1)
    again = check(make_client(server, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1)
    assert server.calls["chat"] == 2 and again == first
    fresh = check(make_client(server, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1, fresh=True)
    assert server.calls["chat"] == 4 and fresh == first


# --- states --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, calls", [("Bạn cần hỏi thêm điều gì không?", 1), ("", 0), ("   ", 0), (None, 0)])
def test_an_answer_without_claims_is_a_state_not_a_score(server, tmp_path, answer, calls):
    result = check(make_client(server, tmp_path), Q01, answer, CTX_L2, EXPECTED_DT1)
    assert result.status == "skipped" and result.score is None
    assert result.details["state"] == "no_claims" and result.details["claims"] == []
    assert result.details["faithfulness"] is None and result.details["groundedness"] is None
    assert server.calls["chat"] == calls


@pytest.mark.parametrize("context", [[], ["", "  \n"]])
def test_empty_context_has_no_groundedness_but_correctness_is_still_checked(server, tmp_path, context):
    result = check(make_client(server, tmp_path), Q01, A_30, context, EXPECTED_DT1)
    assert result.details["state"] == "empty_context" and result.details["groundedness"] is None
    assert result.details["faithfulness"] == 0.0 and result.status == "fail"
    assert result.details["claims"] == [{"claim": A_30, "in_context": None, "in_expected": "contradicted"}]
    verify = server.bodies("chat")[1]
    assert block(verify, "context") is None and block(verify, "expected_sections") == EXPECTED_DT1
    assert '"in_context"' not in verify["messages"][1]["content"]
    assert "nothing retrieved" in result.reason


def test_empty_context_and_no_expected_sections_skips_the_verification_call(server, tmp_path):
    result = check(make_client(server, tmp_path), Q01, A_30, [], "")
    assert result.status == "skipped" and result.details["state"] == "empty_context"
    assert result.details["faithfulness"] is None and result.details["groundedness"] is None
    assert result.details["claims"] == [{"claim": A_30, "in_context": None, "in_expected": None}]
    assert server.calls["chat"] == 1


# --- malformed output ----------------------------------------------------------------------------------
def test_malformed_verification_once_is_retried(tmp_path):
    bad = iter(['{"claims": [{"claim": "x", "in_context": "yes"}]}'])

    def flaky(body):
        if system(body) == VERIFY_SYSTEM:
            reply = next(bad, None)
            if reply:
                return reply
        return scripted_faithfulness(body)

    with OpenAIServer(responder=flaky) as srv:
        result = check(make_client(srv, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1)
        assert srv.calls["chat"] == 3
    assert result.status == "fail" and result.details["groundedness"] == 1.0


@pytest.mark.parametrize("stage_system, reply, problem", [
    (EXTRACT_SYSTEM, "Câu trả lời có một khẳng định.", "claim extraction returned malformed output twice: not JSON"),
    (VERIFY_SYSTEM, '{"claims": []}', "claim verification returned malformed output twice: expected verdicts for 1 claims, got 0"),
    (VERIFY_SYSTEM, '{"claims": [{"in_context": "supported", "in_expected": "true"}]}',
     "claim 1: 'in_expected' must be one of supported, unsupported, contradicted"),
])
def test_malformed_output_twice_is_an_error(tmp_path, stage_system, reply, problem):
    def broken(body):
        return reply if system(body) == stage_system else scripted_faithfulness(body)

    with OpenAIServer(responder=broken) as srv:
        result = check(make_client(srv, tmp_path), Q01, A_30, CTX_L2, EXPECTED_DT1)
    assert result.status == "error" and result.passed is None and result.score is None
    assert problem in result.reason
    assert result.details["state"] == "error" and result.details["faithfulness"] is None


# --- pure parts ----------------------------------------------------------------------------------------
def test_parse_claims_tolerates_a_fence_and_drops_blanks():
    assert parse_claims('```json\n{"claims": ["a", " ", "b "]}\n```') == ["a", "b"]
    with pytest.raises(ValueError, match="'claims' must be a list of strings"):
        parse_claims('{"claims": "a"}')


def test_parse_verification_reads_only_the_sources_asked_for():
    text = '{"claims": [{"claim": "a", "in_expected": "Supported"}, {"in_expected": "contradicted"}]}'
    assert parse_verification(text, 2, ["in_expected"]) == [{"in_expected": "supported"}, {"in_expected": "contradicted"}]
    with pytest.raises(ValueError, match="'in_context' must be one of"):
        parse_verification(text, 2, ["in_context", "in_expected"])


def test_supported_share():
    assert supported_share(["supported", "unsupported", "contradicted", "supported"]) == 0.5
    assert supported_share([None, None]) is None and supported_share([]) is None


def test_verify_messages_needs_a_source():
    with pytest.raises(ValueError, match="non-empty context or expected text"):
        verify_messages(["a"], [" "], "")
