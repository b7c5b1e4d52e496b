"""The LLM judge: a correctness verdict per case, pairwise preference, and judge–human agreement.

Rules (DESIGN.md "Judge", seed article section 5):

* the judge always gets the question, the **expected answer** and the **expected source
  sections**, then the answer to grade; it returns ``pass`` or ``fail`` with the wrong claims and
  what is missing — never a 1–10 score;
* numbers and units must match the sources exactly ("5 ngày" is not "5 ngày làm việc"); a claim the
  sources do not contain is wrong even when it sounds plausible; declining to answer is correct
  only when the sources do not answer the question;
* pairwise comparisons are asked in both orders (the answers swap positions) and count only when
  the two verdicts agree — judges favour a position (Zheng et al. 2023: GPT-4 kept its verdict
  after a swap in 65 % of cases);
* malformed judge output is retried once with the cache bypassed, then reported as an ``error``
  check — never a silent pass; a failed model call is an ``error`` too.

Prompt builders and parsers are pure functions. The call functions take the model client as an
argument (``rageval.pipeline.llm.LLMClient`` or anything with its ``chat`` signature) and do no other I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import yaml

from rageval.errors import DatasetError, MalformedOutput, ModelError
from rageval.metrics.base import CheckResult

STAGE_JUDGE = "judge"
VERDICTS = ("pass", "fail")
PAIR_CHOICES = ("A", "B", "tie")
NO_SOURCES = "(none: the documents do not cover this question)"
MALFORMED_TWICE = "{what} returned malformed output twice: {problem}"
SNIPPET_CHARS = 200

JUDGE_SYSTEM = """\
You grade one answer of a retrieval-augmented assistant against a reference. You get the user's \
question, the expected answer written by a person, the source sections the expected answer comes \
from, and the answer to grade.

Rules:
1. The source sections are the truth. A claim in the answer that the sources do not state is a \
wrong claim, even if it sounds plausible or is true elsewhere.
2. Every number and unit must match the sources exactly: a different number, a different unit \
or a dropped qualifier is wrong ("5 days" is not "5 business days", "30 days" is not "7 days", \
a condition such as "members only" that the answer leaves out makes the claim wrong).
3. Declining to answer ("the documents do not say") is correct only when the sources do not \
answer the question; when they do, declining fails and the expected facts are missing.
4. The answer passes only if it has no wrong claim and contains the facts of the expected answer \
that the question asks for. Wording, language and length do not matter.

Reply with one JSON object and nothing else:
{"verdict": "pass" or "fail", "wrong_claims": [short strings quoting each wrong claim and what \
the sources say instead], "missing": [short strings naming each expected fact the answer leaves out]}
A "pass" has an empty "wrong_claims" list. Do not give a score."""

PAIR_SYSTEM = """\
You compare two answers of a retrieval-augmented assistant to the same question, against a \
reference. You get the question, the expected answer written by a person, the source sections it \
comes from, and two answers labelled A and B.

The better answer is the one that is more correct against the sources: wrong numbers, wrong \
units, claims the sources do not state and missing expected facts count against an answer. \
Declining is correct only when the sources do not answer the question. Wording, length and the \
order in which the answers are shown do not matter. If they are equally correct, say "tie".

Reply with one JSON object and nothing else:
{"better": "A" or "B" or "tie", "reason": "one short sentence"}"""


# --- prompts --------------------------------------------------------------------------------

def tag_block(tag: str, text: str) -> str:
    return f"<{tag}>\n{text.strip()}\n</{tag}>"


def _reference(question: str, expected_answer: str, expected_sections_text: str) -> list[str]:
    return [tag_block("question", question),
            tag_block("expected_answer", expected_answer or "(none given)"),
            tag_block("sources", expected_sections_text if expected_sections_text.strip() else NO_SOURCES)]


def judge_messages(question: str, expected_answer: str, expected_sections_text: str, answer: str) -> list[dict[str, str]]:
    """The judge request: rules in the system message; question, expected answer, the expected
    sections' text and the answer, each in its own tagged block, in the user message."""
    user = "\n\n".join(_reference(question, expected_answer, expected_sections_text)
                       + [tag_block("answer", answer), "Grade the answer. Reply with the JSON object only."])
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def pair_messages(question: str, expected_answer: str, expected_sections_text: str,
                  first: str, second: str) -> list[dict[str, str]]:
    """A pairwise request showing ``first`` as answer A and ``second`` as answer B."""
    user = "\n\n".join(_reference(question, expected_answer, expected_sections_text)
                       + [tag_block("answer_A", first), tag_block("answer_B", second),
                          "Which answer is better? Reply with the JSON object only."])
    return [{"role": "system", "content": PAIR_SYSTEM}, {"role": "user", "content": user}]


# --- parsers --------------------------------------------------------------------------------

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model reply, tolerating one surrounding ```json fence. ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        raise ValueError(f"not JSON: {_snippet(text)!r}") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}: {_snippet(text)!r}")
    return data


def _snippet(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def _string_list(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"'{key}' must be a list of strings, got {json.dumps(value, ensure_ascii=False)[:SNIPPET_CHARS]}")
    return [v.strip() for v in value if v.strip()]


def parse_verdict(text: str) -> dict[str, Any]:
    """``{"verdict": "pass"|"fail", "wrong_claims": [str], "missing": [str]}`` from a judge reply.

    Raises ValueError when the reply is not a JSON object, the verdict is not pass/fail, the lists
    are not lists of strings, or a "pass" lists wrong claims (a contradiction, never read as pass).
    Missing list keys count as empty lists.
    """
    data = parse_json_object(text)
    verdict = data.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in VERDICTS:
        raise ValueError(f"'verdict' must be \"pass\" or \"fail\", got {json.dumps(verdict, ensure_ascii=False)}")
    verdict = verdict.strip().lower()
    wrong = _string_list(data, "wrong_claims")
    missing = _string_list(data, "missing")
    if verdict == "pass" and wrong:
        raise ValueError(f"verdict \"pass\" but wrong_claims lists {len(wrong)} claim(s)")
    return {"verdict": verdict, "wrong_claims": wrong, "missing": missing}


def parse_pair(text: str) -> str:
    """"A", "B" or "tie" from a pairwise reply (key ``better``); ValueError otherwise."""
    data = parse_json_object(text)
    better = data.get("better")
    if isinstance(better, str):
        for choice in PAIR_CHOICES:
            if better.strip().lower() == choice.lower():
                return choice
    raise ValueError(f"'better' must be \"A\", \"B\" or \"tie\", got {json.dumps(better, ensure_ascii=False)}")


# --- calls ----------------------------------------------------------------------------------

T = TypeVar("T")


def call_json(client: Any, messages: list[dict[str, str]], parse: Callable[[str], T], *, model: str, stage: str,
              case_id: str | None, fresh: bool = False, what: str = "the judge") -> tuple[T, str]:
    """One JSON-mode chat call at temperature 0, parsed by ``parse``. Malformed output (``parse``
    raises ValueError) is asked again once with the cache bypassed; a second malformed reply raises
    :class:`MalformedOutput`. Returns (parsed value, model name reported by the endpoint).
    ``fresh`` bypasses the response cache for the first attempt too. ModelError propagates."""
    problem = ""
    for attempt in range(2):
        result = client.chat(messages, model=model, temperature=0.0, response_format={"type": "json_object"},
                             stage=stage, case_id=case_id, use_cache=not fresh and attempt == 0)
        try:
            return parse(result.text), result.model
        except ValueError as exc:
            problem = str(exc)
    raise MalformedOutput(MALFORMED_TWICE.format(what=what, problem=problem))


def judge_case(client: Any, model: str, question: str, expected_answer: str, expected_text: str, answer: str, *,
               case_id: str | None, fresh: bool = False) -> CheckResult:
    """The judge's verdict on one answer as a check: pass / fail (score 1 / 0, reason naming the
    wrong claims and missing facts) or error (model call failed, or malformed output twice).
    Details: ``wrong_claims``, ``missing``, ``model``."""
    messages = judge_messages(question, expected_answer, expected_text, answer)
    try:
        verdict, served_by = call_json(client, messages, parse_verdict, model=model, stage=STAGE_JUDGE,
                                       case_id=case_id, fresh=fresh)
    except (MalformedOutput, ModelError) as exc:
        return CheckResult.error(str(exc), wrong_claims=[], missing=[], model=model)
    details = {"wrong_claims": verdict["wrong_claims"], "missing": verdict["missing"], "model": served_by or model}
    if verdict["verdict"] == "pass":
        return CheckResult.ok(f"judge ({model}): correct", 1.0, **details)
    parts = []
    if verdict["wrong_claims"]:
        parts.append("wrong: " + "; ".join(verdict["wrong_claims"]))
    if verdict["missing"]:
        parts.append("missing: " + "; ".join(verdict["missing"]))
    return CheckResult.fail(f"judge ({model}): " + (" | ".join(parts) or "marked incorrect, no claim named"),
                            0.0, **details)


def judge_pair(client: Any, model: str, question: str, expected_answer: str, expected_text: str,
               answer_a: str, answer_b: str, *, case_id: str | None, fresh: bool = False) -> dict[str, Any]:
    """Which of two answers is better, asked in both orders.

    The first request shows ``answer_a`` as A and ``answer_b`` as B; the second swaps them. Each
    verdict is mapped back to "a" | "b" | "tie". Returns ``{"winner", "agreed", "first", "second",
    "error"}``: ``winner`` is the shared verdict when both orders agree, else None (a position-biased
    or undecided judge does not count). ``error`` names a failed call or malformed output (then
    the missing verdict is None and the pair does not count).
    """
    first = second = None
    error = None
    try:
        raw_first, _ = call_json(client, pair_messages(question, expected_answer, expected_text, answer_a, answer_b),
                                 parse_pair, model=model, stage=STAGE_JUDGE, case_id=case_id, fresh=fresh,
                                 what="the pairwise judge")
        first = {"A": "a", "B": "b", "tie": "tie"}[raw_first]
        raw_second, _ = call_json(client, pair_messages(question, expected_answer, expected_text, answer_b, answer_a),
                                  parse_pair, model=model, stage=STAGE_JUDGE, case_id=case_id, fresh=fresh,
                                  what="the pairwise judge")
        second = {"A": "b", "B": "a", "tie": "tie"}[raw_second]
    except (MalformedOutput, ModelError) as exc:
        error = str(exc)
    agreed = first is not None and first == second
    return {"winner": first if agreed else None, "agreed": agreed, "first": first, "second": second, "error": error}


# --- agreement with people ------------------------------------------------------------------

def judge_agreement(labels: Mapping[str, bool], verdicts: Mapping[str, bool]) -> dict[str, Any]:
    """How often the judge agrees with people, on the case ids both have.

    ``labels``: case id -> the person's verdict (True = pass); ``verdicts``: case id -> the judge's.
    With a = both pass, b = person pass / judge fail, c = person fail / judge pass, d = both fail
    and n = a + b + c + d::

        agreement p_o = (a + d) / n
        chance    p_e = ((a + b)(a + c) + (c + d)(b + d)) / n²
        kappa         = (p_o − p_e) / (1 − p_e)          (Cohen 1960)

    When p_e = 1 (both raters put every case in the same class) kappa is 0/0; we report 1.0 if
    agreement is perfect and 0.0 otherwise (scikit-learn returns NaN there; we never do). With no
    common ids, agreement and kappa are None.

    Returns ``n``, ``agreement``, ``kappa``, ``confusion`` (keys ``pass_pass``, ``pass_fail``,
    ``fail_pass``, ``fail_fail`` = person_judge), ``disagreements`` (sorted ids),
    ``missing_verdicts`` (labelled ids the judge did not grade), ``missing_labels`` (graded ids with
    no label).
    """
    for name, mapping in (("labels", labels), ("verdicts", verdicts)):
        bad = [k for k, v in mapping.items() if not isinstance(v, bool)]
        if bad:
            raise ValueError(f"{name}: case {sorted(map(str, bad))[0]!r} is not True/False")
    common = sorted(set(labels) & set(verdicts))
    a = sum(1 for i in common if labels[i] and verdicts[i])
    b = sum(1 for i in common if labels[i] and not verdicts[i])
    c = sum(1 for i in common if not labels[i] and verdicts[i])
    d = sum(1 for i in common if not labels[i] and not verdicts[i])
    n = len(common)
    agreement = kappa = None
    if n:
        p_o = (a + d) / n
        p_e = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
        if p_e >= 1.0:
            kappa = 1.0 if p_o == 1.0 else 0.0
        else:
            kappa = (p_o - p_e) / (1.0 - p_e)
        agreement = round(p_o, 6)
        kappa = round(kappa, 6)
    return {
        "n": n,
        "agreement": agreement,
        "kappa": kappa,
        "confusion": {"pass_pass": a, "pass_fail": b, "fail_pass": c, "fail_fail": d},
        "disagreements": [i for i in common if labels[i] != verdicts[i]],
        "missing_verdicts": sorted(set(labels) - set(verdicts)),
        "missing_labels": sorted(set(verdicts) - set(labels)),
    }


LABEL_VALUES = {"pass": True, "fail": False}
BAD_LABEL = ("{where}: label {got} for case {case!r} must be \"pass\" or \"fail\" "
             "(or true/false). Fix that entry in the labels file.")


def label_value(value: Any, case: str, where: str) -> bool:
    """"pass"/"fail" (any case) or a boolean → bool; DatasetError naming ``where`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in LABEL_VALUES:
        return LABEL_VALUES[value.strip().lower()]
    raise DatasetError(BAD_LABEL.format(where=where, got=json.dumps(value, ensure_ascii=False), case=case))


def parse_labels(text: str, name: str, *, jsonl: bool) -> dict[str, bool]:
    """Human labels from a file's text (``name`` is used in messages; no I/O here).

    JSONL: one ``{"id": …, "label": "pass"|"fail"}`` per line (blank lines ignored).
    Otherwise YAML or JSON: a mapping ``{case id: pass|fail}``. Errors name the file and line.
    """
    if jsonl:
        return _labels_jsonl(text, name)
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise DatasetError(f"{name}{line}: not valid YAML/JSON ({getattr(exc, 'problem', exc)}). "
                           "Write the labels as a mapping `case-id: pass` or as JSONL.") from None
    if not isinstance(data, dict) or not data:
        raise DatasetError(f"{name}: expected a mapping of case id to pass/fail, e.g. `q01: pass`, "
                           f"got {type(data).__name__ if data is not None else 'an empty file'}.")
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            case, line = str(key_node.value), key_node.start_mark.line + 1
            if case in lines:
                raise DatasetError(f"{name}:{line}: case {case!r} is labelled again (first on line {lines[case]}). "
                                   "Keep one label per case.")
            lines[case] = line
    out: dict[str, bool] = {}
    for key, value in data.items():
        case = str(key)
        where = f"{name}:{lines[case]}" if case in lines else name
        out[case] = label_value(value, case, where)
    return out


def _labels_jsonl(text: str, name: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            item = json.loads(line)
        except ValueError:
            raise DatasetError(f"{where}: not a JSON object. Each line must look like "
                               "{\"id\": \"q01\", \"label\": \"pass\"}.") from None
        if not isinstance(item, dict) or not isinstance(item.get("id"), (str, int)) or isinstance(item.get("id"), bool):
            raise DatasetError(f"{where}: each line needs an \"id\" (the golden case id) and a \"label\", "
                               "e.g. {\"id\": \"q01\", \"label\": \"pass\"}.")
        case = str(item["id"])
        if case in seen:
            raise DatasetError(f"{where}: case {case!r} is labelled again (first on line {seen[case]}). "
                               "Keep one label per case.")
        if "label" not in item:
            raise DatasetError(f"{where}: case {case!r} has no \"label\"; add \"label\": \"pass\" or \"fail\".")
        seen[case] = lineno
        out[case] = label_value(item["label"], case, where)
    if not out:
        raise DatasetError(f"{name}: no labels found. Add one line per case: {{\"id\": \"q01\", \"label\": \"pass\"}}.")
    return out
