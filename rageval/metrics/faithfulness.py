"""Faithfulness: the answer's claims checked against the retrieved context and the expected sections.

Each claim gets, per source, ``supported`` (the source states it or it follows from the source),
``unsupported`` (the source does not say) or ``contradicted`` (the source says otherwise). Three
readings of the same per-claim verdicts (docs/judge.md, "What the scores mean"):

    groundedness = claims supported by the retrieved context / claims      (Ragas faithfulness)
    faithfulness = claims supported by the expected sections / claims      (correctness)
    contradicted = claims contradicted by the retrieved context / claims   (DeepEval: 1 − this)

"Unsupported" counts against a claim in the first two just as "contradicted" does; DeepEval's
faithfulness counts only contradictions, so it reads higher. The per-claim verdicts are kept in
``claims`` so every reading can be recomputed.

Two ways to get the verdicts, the same states and scores either way:

* **with the judge** (:func:`judge_with_claims`, the default): the judge's one call returns its
  verdict and the claims with their support (``rageval.metrics.judge.JUDGE_CLAIMS_SYSTEM``), so a
  case costs generation + one judge call;
* **separate** (:func:`check_faithfulness`, ``judge.faithfulness_calls: separate``): one call
  splits the answer into claims, one more checks every claim against both sources at once — two
  calls of its own, as Ragas does.

The two scores answer different questions: a wrong answer can be perfectly grounded in a wrongly
retrieved chunk ("30 ngày" from the Plus-member section, seed article q01: groundedness 1.0,
faithfulness 0.0). The check **passes iff faithfulness == 1.0** — every claim is supported by the
expected sections; groundedness is reported, it does not gate.

States, not scores (seed article on Ragas vs DeepEval):

* ``no_claims`` — the answer states nothing checkable (empty, a greeting, a question back): both
  scores None, status skipped. Having no wrong claim is not evidence of a good answer.
* ``empty_context`` — nothing was retrieved: groundedness None; faithfulness is still computed
  when there are expected sections (status pass/fail from it), otherwise skipped.
* ``no_expected_sections`` — the case has no expected sections (out of scope): faithfulness None,
  groundedness computed, status skipped.
* ``scored`` — both computed. ``error`` — a model call failed or its output was unreadable twice;
  ``refused`` — the model refused (an error, never a pass).

Pure prompt builders and parsers; the check functions take the model client as an argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rageval.errors import MalformedOutput, ModelError
from rageval.metrics.judge import (
    CLAIM_SOURCES,
    DATA_NOT_INSTRUCTIONS,
    REFUSED_STATE,
    STAGE_JUDGE,
    call_json,
    claim_keys,
    judge_messages,
    numbered_context,
    read_verdict,
    refused_check,
    tag_block,
    verdict_check,
)
from rageval.metrics.replies import SNIPPET_CHARS, claim_word, deciding_object
from rageval.records import CheckResult

STAGE = "faithfulness"
CLAIM_VERDICTS = ("supported", "unsupported", "contradicted")
SCORED, NO_CLAIMS, EMPTY_CONTEXT, NO_EXPECTED, ERROR_STATE = (
    "scored", "no_claims", "empty_context", "no_expected_sections", "error")
STATES = (SCORED, NO_CLAIMS, EMPTY_CONTEXT, NO_EXPECTED, ERROR_STATE, REFUSED_STATE)

EXTRACT_SYSTEM = """\
You split an assistant's answer into claims. A claim is one short, self-contained statement of \
fact made by the answer, checkable on its own: keep its numbers, units and conditions exactly as \
written, resolve pronouns, and write it in the answer's language. Greetings, questions back to \
the user, offers of help and statements that the documents do not cover the question are not \
claims. Do not add anything the answer does not say.

Reply with one JSON object and nothing else: {"claims": ["claim 1", "claim 2", ...]}
An answer with nothing checkable gives {"claims": []}.
""" + DATA_NOT_INSTRUCTIONS

VERIFY_SYSTEM = """\
You check claims against source texts. For every numbered claim and every source asked for, \
decide:
- "supported": the source states the claim or it follows directly from the source;
- "contradicted": the source states something incompatible (another number, another unit, \
another condition);
- "unsupported": the source does not say, even if the claim sounds plausible.
Numbers and units must match exactly ("5 days" is not "5 business days"); a claim that drops a \
condition the source attaches (e.g. "members only") is not supported by that source.

Reply with one JSON object and nothing else, one entry per claim, in the claims' order:
{"claims": [{"claim": "...", <one key per source asked for>: "supported" | "unsupported" | "contradicted"}]}
""" + DATA_NOT_INSTRUCTIONS

_VERIFY_TAGS = {"in_context": "context", "in_expected": "expected_sections"}


# --- prompts (the separate path) ------------------------------------------------------------

def extract_messages(question: str, answer: str) -> list[dict[str, str]]:
    """The claim-extraction request: the question (to resolve references) and the answer."""
    user = "\n\n".join([tag_block("question", question), tag_block("answer", answer),
                        "List the answer's claims. Reply with the JSON object only."])
    return [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": user}]


def verify_messages(claims: Sequence[str], context: Sequence[str], expected_text: str) -> list[dict[str, str]]:
    """One request checking every claim against the non-empty sources among the retrieved
    ``context`` (chunk texts, in rank order) and the ``expected_text``."""
    keys = claim_keys(context, expected_text)
    if not keys:
        raise ValueError("verify_messages needs a non-empty context or expected text")
    numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    parts = [tag_block("claims", numbered)]
    if "in_context" in keys:
        parts.append(tag_block("context", numbered_context(context)))
    if "in_expected" in keys:
        parts.append(tag_block("expected_sections", expected_text))
    asked = "; ".join(f'"{k}" for <{_VERIFY_TAGS[k]}>, {CLAIM_SOURCES[k][1]}' for k in keys)
    parts.append(f"For each of the {len(claims)} claims give {asked}. Reply with the JSON object only.")
    return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


# --- parsers --------------------------------------------------------------------------------

def _claim_texts(data: Mapping[str, Any]) -> list[str]:
    claims = data.get("claims")
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise ValueError(f"'claims' must be a list of strings, got {json.dumps(claims, ensure_ascii=False)[:SNIPPET_CHARS]}")
    return [c.strip() for c in claims if c.strip()]


def parse_claims(text: str) -> list[str]:
    """The claims list from an extraction reply; blank claims dropped, order kept. ValueError on
    anything but ``{"claims": [str, ...]}`` (read as ``rageval.metrics.replies.deciding_object``
    says: several objects with claims must agree)."""
    return deciding_object(text, "claims", _claim_texts, tuple)


def claim_verdicts(items: Any, keys: Sequence[str]) -> list[dict[str, str]]:
    """One dict per claim with a verdict for each of ``keys`` (verdict words read by
    ``rageval.metrics.replies.claim_word``); ValueError naming the first bad entry."""
    if not isinstance(items, list):
        raise ValueError("'claims' must be a list with one entry per claim")
    out = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise ValueError(f"claim {i}: expected an object, got {json.dumps(item, ensure_ascii=False)[:SNIPPET_CHARS]}")
        verdicts = {}
        for key in keys:
            verdict = claim_word(item.get(key))
            if verdict is None:
                raise ValueError(f"claim {i}: '{key}' must be one of {', '.join(CLAIM_VERDICTS)}, "
                                 f"got {json.dumps(item.get(key), ensure_ascii=False)}")
            verdicts[key] = verdict
        out.append(verdicts)
    return out


def parse_verification(text: str, n_claims: int, keys: Sequence[str]) -> list[dict[str, str]]:
    """Per-claim verdicts (one dict per claim with each of ``keys``) from a verification reply.
    ValueError when the count differs from ``n_claims`` or a verdict is not a claim verdict."""
    def read(data: Mapping[str, Any]) -> list[dict[str, str]]:
        items = data.get("claims")
        if isinstance(items, list) and len(items) != n_claims:
            raise ValueError(f"expected verdicts for {n_claims} claims, got {len(items)}")
        return claim_verdicts(items, keys)
    return deciding_object(text, "claims", read, lambda rows: json.dumps(rows, sort_keys=True))


def parse_judged(text: str, keys: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(verdict, claim rows) of a judge-with-claims reply: the verdict as
    ``rageval.metrics.judge.parse_verdict`` reads it, and one ``{"claim", "in_context",
    "in_expected"}`` row per claim (None for a source not asked for). ValueError otherwise."""
    def read(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        verdict = read_verdict(data)
        items = data.get("claims")
        verdicts = claim_verdicts(items, keys)
        texts = [item.get("claim") for item in items]
        bad = next((i for i, t in enumerate(texts, 1) if not isinstance(t, str) or not t.strip()), None)
        if bad is not None:
            raise ValueError(f"claim {bad}: 'claim' must be the claim's text")
        return verdict, [_row(t.strip(), v) for t, v in zip(texts, verdicts)]
    return deciding_object(text, "verdict", read, lambda found: found[0]["verdict"])


def _row(claim: str, verdicts: Mapping[str, str]) -> dict[str, Any]:
    return {"claim": claim, "in_context": verdicts.get("in_context"), "in_expected": verdicts.get("in_expected")}


def share(verdicts: Iterable[str | None], value: str = "supported") -> float | None:
    """claims with ``value`` / claims, over the claims checked against one source; None when none were."""
    checked = [v for v in verdicts if v is not None]
    if not checked:
        return None
    return round(sum(1 for v in checked if v == value) / len(checked), 6)


# --- scores and states ----------------------------------------------------------------------

def _details(state: str, claims: list[dict[str, Any]], faithfulness: float | None = None,
             groundedness: float | None = None, model: str | None = None,
             contradicted: float | None = None) -> dict[str, Any]:
    return {"faithfulness": faithfulness, "groundedness": groundedness, "contradicted": contradicted,
            "state": state, "claims": claims, "model": model}


def score_claims(rows: list[dict[str, Any]], keys: Sequence[str], model: str) -> CheckResult:
    """The faithfulness check of per-claim verdicts ``rows`` checked against the sources ``keys``
    (``in_context``, ``in_expected``): scores, state and status as the module docstring says."""
    if not rows:
        return CheckResult.skipped("no claims to check: the answer states nothing checkable",
                                   **_details(NO_CLAIMS, [], model=model))
    faithfulness = share(r["in_expected"] for r in rows)
    groundedness = share(r["in_context"] for r in rows)
    n = len(rows)
    ctx_part = ("nothing retrieved" if groundedness is None
                else f"{sum(r['in_context'] == 'supported' for r in rows)}/{n} supported by the retrieved context")
    state = EMPTY_CONTEXT if "in_context" not in keys else NO_EXPECTED if "in_expected" not in keys else SCORED
    details = _details(state, rows, faithfulness, groundedness, model,
                       share((r["in_context"] for r in rows), "contradicted"))
    if faithfulness is None:
        return CheckResult.skipped(f"no expected sections to check {n} claim(s) against; {ctx_part}", **details)
    bad = [f"{r['claim']} ({r['in_expected']})" for r in rows if r["in_expected"] != "supported"]
    exp_part = f"{n - len(bad)}/{n} claims supported by the expected sections"
    if not bad:
        return CheckResult.ok(f"{exp_part}; {ctx_part}", faithfulness, **details)
    return CheckResult.fail(f"{exp_part}; {ctx_part}; not supported: " + "; ".join(bad), faithfulness, **details)


def _empty_answer(answer: str | None, model: str) -> CheckResult | None:
    if answer is None or not answer.strip():
        return CheckResult.skipped("no claims to check: the answer is empty", **_details(NO_CLAIMS, [], model=model))
    return None


# --- the checks -----------------------------------------------------------------------------

def judge_with_claims(client: Any, model: str, question: str, expected_answer: str, expected_text: str,
                      answer: str | None, context: Sequence[str], *, case_id: str | None,
                      fresh: bool = False) -> tuple[CheckResult, CheckResult]:
    """(judge check, faithfulness check) from one judge call that returns the verdict and the
    answer's claims with their support in ``context`` and in ``expected_text``. A failed call,
    a reply unreadable twice or a refusal makes both checks errors (never a pass)."""
    keys = claim_keys(context, expected_text)
    messages = judge_messages(question, expected_answer, expected_text, answer or "", context)
    try:
        reply = call_json(client, messages, lambda text: parse_judged(text, keys), model=model, stage=STAGE_JUDGE,
                          case_id=case_id, fresh=fresh)
    except (MalformedOutput, ModelError) as exc:
        return (CheckResult.error(str(exc), wrong_claims=[], missing=[], model=model),
                CheckResult.error(str(exc), **_details(ERROR_STATE, [], model=model)))
    if reply.refusal is not None:
        return (refused_check(reply.refusal, {"wrong_claims": [], "missing": [], "model": model}),
                refused_check(reply.refusal, _details(REFUSED_STATE, [], model=model)))
    verdict, rows = reply.value
    faithfulness = _empty_answer(answer, reply.model) or score_claims(rows, keys, reply.model)
    return verdict_check(verdict, model, reply.model), faithfulness


def check_faithfulness(client: Any, model: str, question: str, answer: str | None, context: Sequence[str],
                       expected_text: str, *, case_id: str | None, fresh: bool = False) -> CheckResult:
    """The separate path: extract the answer's claims (one call), check them against ``context``
    (retrieved chunk texts) and ``expected_text`` (the expected sections) in one more call, and
    report the scores, state and per-claim verdicts. None for an empty answer, one call when there
    are no claims or no source at all."""
    empty = _empty_answer(answer, model)
    if empty is not None:
        return empty
    try:
        reply = call_json(client, extract_messages(question, answer or ""), parse_claims, model=model, stage=STAGE,
                          case_id=case_id, fresh=fresh, what="claim extraction")
        claims, served_by = reply.value or [], reply.model
        keys = claim_keys(context, expected_text)
        verdicts: list[dict[str, str]] = [{} for _ in claims]
        if claims and keys and reply.refusal is None:
            reply = call_json(client, verify_messages(claims, context, expected_text),
                              lambda text: parse_verification(text, len(claims), keys),
                              model=model, stage=STAGE, case_id=case_id, fresh=fresh, what="claim verification")
            verdicts, served_by = reply.value or verdicts, reply.model
    except (MalformedOutput, ModelError) as exc:
        return CheckResult.error(str(exc), **_details(ERROR_STATE, [], model=model))
    if reply.refusal is not None:
        return refused_check(reply.refusal, _details(REFUSED_STATE, [], model=model))
    return score_claims([_row(c, v) for c, v in zip(claims, verdicts)], keys, served_by)


# --- the readings, over a run ---------------------------------------------------------------

def claim_readings(checks: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Means over cases of the three readings of per-claim verdicts (module docstring), computed
    from each faithfulness check's ``claims`` (its details as a dict), so any RunResult that has
    them can be read this way. None when no case has claims."""
    per_case: dict[str, list[float]] = {"groundedness": [], "faithfulness": [], "contradicted": []}
    for details in checks:
        claims = (details or {}).get("claims") or []
        rows = [c for c in claims if isinstance(c, Mapping)]
        for name, key, value in (("groundedness", "in_context", "supported"),
                                 ("faithfulness", "in_expected", "supported"),
                                 ("contradicted", "in_context", "contradicted")):
            reading = share((r.get(key) for r in rows), value)
            if reading is not None:
                per_case[name].append(reading)
    if not any(per_case.values()):
        return None
    means = {k: round(sum(v) / len(v), 6) if v else None for k, v in per_case.items()}
    return {**means, "n_cases": max(len(v) for v in per_case.values())}
