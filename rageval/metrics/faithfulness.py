"""Faithfulness: the answer's claims checked against the retrieved context and the expected sections.

The model splits the answer into short atomic claims (one call), then checks every claim against
both sources at once (one more call), so a case costs two calls. Each claim gets, per source,
``supported`` (the source states it or it follows from the source), ``unsupported`` (the source
does not say) or ``contradicted`` (the source says otherwise). Scores follow the Ragas definition:

    groundedness = claims supported by the retrieved context / claims
    faithfulness = claims supported by the expected sections / claims     (correctness)

"Unsupported" counts against a claim just as "contradicted" does (DeepEval's llm mode only counts
contradictions; its score would be higher). The per-claim verdicts are kept in ``claims`` so
either reading can be recomputed.

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
* ``scored`` — both computed. ``error`` — a model call failed or its output was malformed twice.

Pure prompt builders and parsers; :func:`check_faithfulness` takes the model client as an argument.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rageval.errors import MalformedOutput, ModelError
from rageval.metrics.base import CheckResult
from rageval.metrics.judge import call_json, parse_json_object, tag_block

STAGE = "faithfulness"
CLAIM_VERDICTS = ("supported", "unsupported", "contradicted")
SCORED, NO_CLAIMS, EMPTY_CONTEXT, NO_EXPECTED, ERROR_STATE = (
    "scored", "no_claims", "empty_context", "no_expected_sections", "error")
STATES = (SCORED, NO_CLAIMS, EMPTY_CONTEXT, NO_EXPECTED, ERROR_STATE)

EXTRACT_SYSTEM = """\
You split an assistant's answer into claims. A claim is one short, self-contained statement of \
fact made by the answer, checkable on its own: keep its numbers, units and conditions exactly as \
written, resolve pronouns, and write it in the answer's language. Greetings, questions back to \
the user, offers of help and statements that the documents do not cover the question are not \
claims. Do not add anything the answer does not say.

Reply with one JSON object and nothing else: {"claims": ["claim 1", "claim 2", ...]}
An answer with nothing checkable gives {"claims": []}."""

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
{"claims": [{"claim": "...", <one key per source asked for>: "supported" | "unsupported" | "contradicted"}]}"""

_SOURCES = {"in_context": ("context", "the retrieved context (what the assistant was given)"),
            "in_expected": ("expected_sections", "the expected source sections (the reference)")}


# --- prompts --------------------------------------------------------------------------------

def extract_messages(question: str, answer: str) -> list[dict[str, str]]:
    """The claim-extraction request: the question (to resolve references) and the answer."""
    user = "\n\n".join([tag_block("question", question), tag_block("answer", answer),
                        "List the answer's claims. Reply with the JSON object only."])
    return [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": user}]


def verify_messages(claims: Sequence[str], context: Sequence[str], expected_text: str) -> list[dict[str, str]]:
    """One request checking every claim against the non-empty sources among the retrieved
    ``context`` (chunk texts, in rank order) and the ``expected_text``."""
    keys = _keys(context, expected_text)
    if not keys:
        raise ValueError("verify_messages needs a non-empty context or expected text")
    numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    parts = [tag_block("claims", numbered)]
    if "in_context" in keys:
        parts.append(tag_block("context", "\n\n".join(f"[{i}] {t.strip()}" for i, t in enumerate(_nonblank(context), 1))))
    if "in_expected" in keys:
        parts.append(tag_block("expected_sections", expected_text))
    asked = "; ".join(f'"{k}" for <{_SOURCES[k][0]}>, {_SOURCES[k][1]}' for k in keys)
    parts.append(f"For each of the {len(claims)} claims give {asked}. Reply with the JSON object only.")
    return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _nonblank(context: Sequence[str]) -> list[str]:
    return [t for t in context if isinstance(t, str) and t.strip()]


def _keys(context: Sequence[str], expected_text: str) -> list[str]:
    keys = []
    if _nonblank(context):
        keys.append("in_context")
    if expected_text and expected_text.strip():
        keys.append("in_expected")
    return keys


# --- parsers --------------------------------------------------------------------------------

def parse_claims(text: str) -> list[str]:
    """The claims list from an extraction reply; blank claims dropped, order kept. ValueError on
    anything but ``{"claims": [str, ...]}``."""
    data = parse_json_object(text)
    claims = data.get("claims")
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise ValueError(f"'claims' must be a list of strings, got {json.dumps(claims, ensure_ascii=False)[:200]}")
    return [c.strip() for c in claims if c.strip()]


def parse_verification(text: str, n_claims: int, keys: Sequence[str]) -> list[dict[str, str]]:
    """Per-claim verdicts (one dict per claim with each of ``keys``) from a verification reply.
    ValueError when the count differs from ``n_claims`` or a verdict is not one of
    supported / unsupported / contradicted."""
    data = parse_json_object(text)
    items = data.get("claims")
    if not isinstance(items, list):
        raise ValueError("'claims' must be a list with one entry per claim")
    if len(items) != n_claims:
        raise ValueError(f"expected verdicts for {n_claims} claims, got {len(items)}")
    out = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise ValueError(f"claim {i}: expected an object, got {json.dumps(item, ensure_ascii=False)[:200]}")
        verdicts = {}
        for key in keys:
            value = item.get(key)
            if not isinstance(value, str) or value.strip().lower() not in CLAIM_VERDICTS:
                raise ValueError(f"claim {i}: '{key}' must be one of {', '.join(CLAIM_VERDICTS)}, "
                                 f"got {json.dumps(value, ensure_ascii=False)}")
            verdicts[key] = value.strip().lower()
        out.append(verdicts)
    return out


def supported_share(verdicts: Sequence[str | None]) -> float | None:
    """supported / claims over the claims checked against one source; None when none were."""
    checked = [v for v in verdicts if v is not None]
    if not checked:
        return None
    return round(sum(1 for v in checked if v == "supported") / len(checked), 6)


# --- the check ------------------------------------------------------------------------------

def _details(state: str, claims: list[dict[str, Any]], faithfulness: float | None = None,
             groundedness: float | None = None, model: str | None = None) -> dict[str, Any]:
    return {"faithfulness": faithfulness, "groundedness": groundedness, "state": state, "claims": claims,
            "model": model}


def check_faithfulness(client: Any, model: str, question: str, answer: str | None, context: Sequence[str],
                       expected_text: str, *, case_id: str | None, fresh: bool = False) -> CheckResult:
    """Extract the answer's claims, check them against ``context`` (retrieved chunk texts) and
    ``expected_text`` (the expected sections), and report the scores, state and per-claim verdicts
    (see the module docstring). Two calls per case at most; none for an empty answer, one when
    there are no claims or no source at all."""
    if answer is None or not answer.strip():
        return CheckResult.skipped("no claims to check: the answer is empty", **_details(NO_CLAIMS, [], model=model))
    try:
        claims, served_by = call_json(client, extract_messages(question, answer), parse_claims, model=model,
                                      stage=STAGE, case_id=case_id, fresh=fresh, what="claim extraction")
        if not claims:
            return CheckResult.skipped("no claims to check: the answer states nothing checkable",
                                       **_details(NO_CLAIMS, [], model=served_by))
        keys = _keys(context, expected_text)
        verdicts: list[dict[str, str]] = [{} for _ in claims]
        if keys:
            verdicts, served_by = call_json(
                client, verify_messages(claims, context, expected_text),
                lambda text: parse_verification(text, len(claims), keys),
                model=model, stage=STAGE, case_id=case_id, fresh=fresh, what="claim verification")
    except (MalformedOutput, ModelError) as exc:
        return CheckResult.error(str(exc), **_details(ERROR_STATE, [], model=model))

    rows = [{"claim": c, "in_context": v.get("in_context"), "in_expected": v.get("in_expected")}
            for c, v in zip(claims, verdicts)]
    faithfulness = supported_share([r["in_expected"] for r in rows])
    groundedness = supported_share([r["in_context"] for r in rows])
    n = len(rows)
    ctx_part = ("nothing retrieved" if groundedness is None
                else f"{sum(r['in_context'] == 'supported' for r in rows)}/{n} supported by the retrieved context")
    if "in_context" not in keys:
        state = EMPTY_CONTEXT
    elif "in_expected" not in keys:
        state = NO_EXPECTED
    else:
        state = SCORED
    details = _details(state, rows, faithfulness, groundedness, served_by)
    if faithfulness is None:
        return CheckResult.skipped(f"no expected sections to check {n} claim(s) against; {ctx_part}", **details)
    bad = [f"{r['claim']} ({r['in_expected']})" for r in rows if r["in_expected"] != "supported"]
    exp_part = f"{n - len(bad)}/{n} claims supported by the expected sections"
    if not bad:
        return CheckResult.ok(f"{exp_part}; {ctx_part}", faithfulness, **details)
    return CheckResult.fail(f"{exp_part}; {ctx_part}; not supported: " + "; ".join(bad), faithfulness, **details)
