"""Faithfulness (rageval.metrics.faithfulness) over real HTTP: the scripted model splits answers
into claims and checks them against the sources it is sent, like a real one would — in the
judge's one call (the default) or in two calls of its own (the separate path)."""

from __future__ import annotations

import json
import re

import pytest
from openai_server import OpenAIServer, Refusal  # tests/ is on sys.path (conftest.py)
from seed_data import POLICY
from test_judge import NUMBER, SHAPES, block, grade, make_client, shaped, system

from rageval.metrics.faithfulness import (
    EXTRACT_SYSTEM,
    VERIFY_SYSTEM,
    check_faithfulness,
    claim_readings,
    judge_with_claims,
    parse_claims,
    parse_judged,
    parse_verification,
    share,
    verify_messages,
)
from rageval.metrics.judge import JUDGE_CLAIMS_SYSTEM, NO_CONTEXT, NO_SOURCES

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


def scripted_judge_with_claims(body: dict) -> str:
    """The judge's one call with claims: the number-checking verdict, the answer's claims, and each
    claim's support in the sources the request asks about."""
    assert system(body) == JUDGE_CLAIMS_SYSTEM, "not a judge-with-claims request"
    answer, sources, context = block(body, "answer"), block(body, "sources"), block(body, "context")
    user = body["messages"][-1]["content"]
    asked = {key: text for key, text, tag in (("in_context", context, "context"), ("in_expected", sources, "sources"))
             if f'"{key}" for <{tag}>' in user}
    assert ("in_context" in asked) == (context != NO_CONTEXT) and ("in_expected" in asked) == (sources != NO_SOURCES)
    claims = [{"claim": c, **{k: verdict(c, text) for k, text in asked.items()}} for c in split_claims(answer)]
    return json.dumps({**grade(answer, block(body, "expected_answer"), sources), "claims": claims}, ensure_ascii=False)


def scripted_model(body: dict) -> str:
    if system(body) == JUDGE_CLAIMS_SYSTEM:
        return scripted_judge_with_claims(body)
    return scripted_faithfulness(body)


@pytest.fixture
def server(model_server):
    return model_server(responder=scripted_model)


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
    (EXTRACT_SYSTEM, "Câu trả lời có một khẳng định.",
     "claim extraction returned malformed output twice: no JSON object in the reply: 'Câu trả lời có một khẳng định.'"),
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


def test_share_of_supported_claims():
    assert share(["supported", "unsupported", "contradicted", "supported"]) == 0.5
    assert share([None, None]) is None and share([]) is None


def test_verify_messages_needs_a_source():
    with pytest.raises(ValueError, match="non-empty context or expected text"):
        verify_messages(["a"], [" "], "")


# --- in the judge's one call ---------------------------------------------------------------------------
def with_judge(client, answer, context, expected, *, question=Q01, expected_answer="Trong 7 ngày.", **kw):
    return judge_with_claims(client, MODEL, question, expected_answer, expected, answer, context,
                             case_id=kw.pop("case_id", "c1"), **kw)


def test_one_judge_call_gives_the_verdict_and_the_same_claim_scores_as_the_two_call_path(server, tmp_path):
    client = make_client(server, tmp_path)
    judge, faith = with_judge(client, A_30, CTX_L2, EXPECTED_DT1, case_id="q01")
    assert server.calls["chat"] == 1 and client.usage()["by_case"] == {"q01": {"judge": 1}}
    (body,) = server.bodies("chat")
    assert system(body) == JUDGE_CLAIMS_SYSTEM and body["temperature"] == 0
    assert block(body, "context") == "[1] " + CTX_L2[0] and block(body, "sources") == EXPECTED_DT1
    assert judge.status == "fail" and judge.details["wrong_claims"] == ["30 ngày (the sources say 7 ngày)"]
    separate = check(make_client(server, tmp_path / "other"), Q01, A_30, CTX_L2, EXPECTED_DT1)
    assert server.calls["chat"] == 3                                    # the separate path: two more
    assert faith == separate
    assert faith.details["claims"] == [{"claim": A_30, "in_context": "supported", "in_expected": "contradicted"}]
    assert (faith.details["groundedness"], faith.details["faithfulness"], faith.details["state"]) == (1.0, 0.0, "scored")


def test_seed_001_in_one_call_two_of_three_claims_grounded_one_contradicted_none(server, tmp_path):
    judge, faith = with_judge(make_client(server, tmp_path), A_001, [CTX_001], "", question=Q_001,
                              expected_answer="Đổi trong 7 ngày, cần hóa đơn.")
    assert faith.details["groundedness"] == pytest.approx(0.666667) and faith.details["contradicted"] == 0.0
    assert faith.details["state"] == "no_expected_sections" and faith.status == "skipped"
    assert judge.status in ("pass", "fail")


@pytest.mark.parametrize("answer, context, expected, state, calls", [
    ("Bạn cần hỏi thêm điều gì không?", CTX_L2, EXPECTED_DT1, "no_claims", 1),
    ("", CTX_L2, EXPECTED_DT1, "no_claims", 1),            # the judge still grades an empty answer
    (A_30, [], EXPECTED_DT1, "empty_context", 1),
    (A_30, ["  "], "", "empty_context", 1),
])
def test_one_call_keeps_the_states(server, tmp_path, answer, context, expected, state, calls):
    _, faith = with_judge(make_client(server, tmp_path), answer, context, expected)
    assert faith.details["state"] == state and server.calls["chat"] == calls
    if state == "no_claims":
        assert faith.status == "skipped" and faith.details["faithfulness"] is None and faith.details["claims"] == []
    else:
        assert faith.details["groundedness"] is None and faith.details["contradicted"] is None


@pytest.mark.parametrize("shape", SHAPES)
def test_one_call_reads_every_reply_shape(tmp_path, shape):
    with OpenAIServer(responder=lambda body: shaped(shape, json.loads(scripted_judge_with_claims(body)))) as srv:
        judge, faith = with_judge(make_client(srv, tmp_path), A_30, CTX_L2, EXPECTED_DT1)
        assert srv.calls["chat"] == 1
    assert judge.status == "fail" and faith.status == "fail"
    assert faith.details["claims"] == [{"claim": A_30, "in_context": "supported", "in_expected": "contradicted"}]


def test_a_refusal_makes_both_checks_refused_never_a_pass(tmp_path):
    with OpenAIServer(responder=lambda body: Refusal("I can't assist with that.")) as srv:
        judge, faith = with_judge(make_client(srv, tmp_path), A_30, CTX_L2, EXPECTED_DT1)
        separate = check(make_client(srv, tmp_path / "separate"), Q01, A_30, CTX_L2, EXPECTED_DT1)
        assert srv.calls["chat"] == 2                                   # one each, neither retried
    for result in (judge, faith, separate):
        assert result.status == "error" and result.passed is None
        assert result.details["state"] == "refused" and result.reason == "judge refused: I can't assist with that."


@pytest.mark.parametrize("text, message", [
    ('{"verdict": "fail"}', "'claims' must be a list with one entry per claim"),
    ('{"verdict": "fail", "claims": [{"claim": "x", "in_context": "maybe", "in_expected": "supported"}]}',
     "claim 1: 'in_context' must be one of supported, unsupported, contradicted"),
    ('{"verdict": "fail", "claims": [{"in_context": "supported", "in_expected": "supported"}]}',
     "claim 1: 'claim' must be the claim's text"),
    ('{"verdict": "good", "claims": []}', "'verdict' must be"),
])
def test_parse_judged_rejects_what_it_cannot_read(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_judged(text, ["in_context", "in_expected"])


def test_parse_judged_reads_claim_words_in_english_and_vietnamese():
    text = ("{'verdict': 'không đạt', 'claims': [{'claim': 'a', 'in_context': 'Có căn cứ', 'in_expected': 'MÂU THUẪN'},"
            " {'claim': 'b', 'in_context': 'not supported', 'in_expected': 'Supported'}]}")
    verdict, rows = parse_judged(text, ["in_context", "in_expected"])
    assert verdict["verdict"] == "fail"
    assert rows == [{"claim": "a", "in_context": "supported", "in_expected": "contradicted"},
                    {"claim": "b", "in_context": "unsupported", "in_expected": "supported"}]


# --- what the scores mean: three readings of the same per-claim verdicts ---------------------------------
def test_claim_readings_groundedness_faithfulness_and_the_deepeval_reading():
    # case 1: 4 claims — context: S S U C; expected: S U C C
    # case 2: 2 claims — context: C C;     expected: S S
    # case 3: no claims (a refusal): left out of every mean
    rows1 = [{"in_context": c, "in_expected": e} for c, e in [("supported", "supported"), ("supported", "unsupported"),
                                                              ("unsupported", "contradicted"),
                                                              ("contradicted", "contradicted")]]
    rows2 = [{"in_context": "contradicted", "in_expected": "supported"}] * 2
    readings = claim_readings([{"claims": rows1}, {"claims": rows2}, {"claims": []}, None])
    # groundedness: (2/4 + 0/2) / 2 = 0.25; faithfulness: (1/4 + 2/2) / 2 = 0.625;
    # contradicted: (1/4 + 2/2) / 2 = 0.625 -> DeepEval's faithfulness reads 1 − 0.625 = 0.375
    assert readings == {"groundedness": 0.25, "faithfulness": 0.625, "contradicted": 0.625, "n_cases": 2}
    assert claim_readings([{"claims": []}, {}]) is None
