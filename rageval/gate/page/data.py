"""The HTML report's data block: every case the page can open, as one JSON value the page's script
reads (``docs/report-html.md`` describes it; a golden file in the tests holds it for a fixed gate).

Per case: its question, expected answer and sections, slice labels, what changed between the runs,
and per run its status, answer, first relevant rank, retrieved chunks (indices into one chunk
table, so a chunk retrieved by many cases is written once), every check with its reason, and the
numbers that differ between the two answers (UTF-16 offsets, as the page's script counts, and
the quantities themselves). Cases tagged ``holdout`` are left out entirely: only their count is
kept. Every string goes through the caller's ``clean`` (control and bidi characters made visible,
secrets redacted) and is cut at ``TEXT_MAX_CHARS``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rageval.gate.markdown import cut, printable
from rageval.gate.verdict import Verdict
from rageval.golden.set import is_holdout
from rageval.metrics.number_words import Reader as NumberReader
from rageval.metrics.numbers import extract_quantities
from rageval.records import CaseResult
from rageval.results import RunResult

SCHEMA = 1
TEXT_MAX_CHARS = 20_000          # an answer, question, reason or chunk text in the page
WINDOW_WORDS = 5                 # a quantity spans at most this many words ("5 ngày làm việc")
_WORD = re.compile(r"\S+")
_TRAILING = ".,;:!?)]}\"'”’»…"

Clean = Callable[[str], str]


def default_clean(text: str) -> str:
    return printable(cut(text, TEXT_MAX_CHARS), newlines=True)


def status_of(case: CaseResult | None) -> str | None:
    """pass | fail | error | n/a, or None when the run has no such case."""
    if case is None:
        return None
    if case.error:
        return "error"
    return {True: "pass", False: "fail"}.get(case.passed, "n/a")  # type: ignore[arg-type]


def change_of(case_id: str, before: CaseResult | None, after: CaseResult | None, verdict: Verdict | None) -> str:
    """What happened to a case between the runs, as the page's status filter names it."""
    if verdict is None:
        return ""
    for ids, name in ((verdict.pass_to_fail, "pass_to_fail"), (verdict.fail_to_pass, "fail_to_pass"),
                      (verdict.flaky, "flaky")):
        if case_id in ids:
            return name
    if before is None:
        return "added"
    if after is None:
        return "removed"
    return "still_failing" if status_of(after) in ("fail", "error") else "still_passing"


# --- numbers that differ ----------------------------------------------------------------------

_DIGIT_OR_DOLLAR = re.compile(r"[\d$]")
_NOT_WORD = re.compile(r"\W")


@functools.lru_cache(maxsize=8192)
def _is_number_word(word: str) -> bool:
    """"bảy", "seven", "a": a word the number reader reads (answers repeat their words: memoised)."""
    bare = _NOT_WORD.sub("", word.casefold())
    return bool(bare) and NumberReader([bare]).number(0) is not None


def _starts_number(word: str) -> bool:
    return _DIGIT_OR_DOLLAR.search(word) is not None or _is_number_word(word)


def _utf16(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2


def _mention(text: str, words: list[tuple[int, int]], i: int) -> tuple[int, set[str]] | None:
    """The quantity mention starting at word ``i``: (index of its last word, its quantities), the
    longest reading ("5 ngày làm việc", not "5 ngày") cut to the fewest words that give it."""
    readings: list[set[str]] = []
    for j in range(i, min(i + WINDOW_WORDS, len(words))):
        found = {str(q) for q in extract_quantities(text[words[i][0]:words[j][1]])}
        if readings and readings[-1] and len(found) != len(readings[-1]):
            break
        readings.append(found)
    final = readings[-1]
    if not final:
        return None
    last = i + readings.index(final)
    if last > i and {str(q) for q in extract_quantities(text[words[i + 1][0]:words[last][1]])} == final:
        return None                     # the mention starts at a later word ("2026 trả 3-5 ngày")
    return last, final


def _spans(text: str, wanted: set[str]) -> Iterator[tuple[int, int]]:
    """(start, end) character spans of the mentions of ``wanted`` quantities in ``text``: from each
    word that can start a number, the run of words that reads as a quantity."""
    numeric = {w for w in set(text.split()) if _starts_number(w)}
    if not numeric:
        return
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    free = 0                                   # the first word not inside a mention already read
    for i, (a, b) in enumerate(words):
        if i < free or text[a:b] not in numeric:
            continue
        found = _mention(text, words, i)
        if found is None:
            continue
        last, quantities = found
        if quantities & wanted:
            yield a, a + len(text[a:words[last][1]].rstrip(_TRAILING))
        free = last + 1


def number_marks(text: str | None, other: str | None) -> tuple[list[list[int]], list[str]]:
    """The quantities of ``text`` that ``other`` does not state: their UTF-16 spans in ``text``
    and their canonical forms ("30 ngày")."""
    if not text or other is None:
        return [], []
    differ = sorted({str(q) for q in extract_quantities(text)} - {str(q) for q in extract_quantities(other)})
    if not differ:
        return [], []
    spans = [[_utf16(text, a), _utf16(text, b)] for a, b in _spans(text, set(differ))]
    return spans, differ


# --- cases and chunks -------------------------------------------------------------------------

class _Chunks:
    """The chunk table: each distinct retrieved chunk (id, sections, text) once."""

    def __init__(self, clean: Clean) -> None:
        self.clean = clean
        self.index: dict[tuple[str, tuple[str, ...], str], int] = {}
        self.rows: list[dict[str, Any]] = []

    def ref(self, chunk_id: str, sections: Sequence[str], text: str) -> int:
        key = (chunk_id, tuple(sections), text)
        if key not in self.index:
            self.index[key] = len(self.rows)
            self.rows.append({"id": self.clean(chunk_id), "sections": [self.clean(s) for s in sections],
                              "text": self.clean(text)})
        return self.index[key]


def _side(case: CaseResult | None, other_answer: str | None, chunks: _Chunks, clean: Clean) -> dict[str, Any] | None:
    if case is None:
        return None
    answer = None if case.answer is None else clean(case.answer)
    marks, differ = number_marks(answer, None if other_answer is None else clean(other_answer))
    retrieved = None if case.retrieved is None else [
        [chunks.ref(r.chunk_id, r.sections, r.text), None if r.score is None else round(r.score, 4)]
        for r in case.retrieved]
    return {"status": status_of(case), "answer": answer, "rank": case.first_relevant_rank,
            "retrieved": retrieved, "checks": [[clean(n), c.status, clean(c.reason)] for n, c in case.checks.items()],
            "error": None if case.error is None else clean(case.error), "marks": marks, "differ": differ}


def shown_ids(candidate: RunResult, baseline: RunResult | None) -> tuple[list[str], int]:
    """The case ids the page shows — the candidate's order, then cases only the baseline has —
    and how many holdout cases were left out."""
    after = candidate.case_map
    before = baseline.case_map if baseline is not None else {}
    ids = list(dict.fromkeys([*after, *before]))
    shown = [i for i in ids if not is_holdout(after.get(i), before.get(i))]
    return shown, len(ids) - len(shown)


def page_data(candidate: RunResult, baseline: RunResult | None = None, verdict: Verdict | None = None,
              clean: Clean = default_clean) -> dict[str, Any]:
    """The data block: ``{"schema", "mode", "cases", "chunks", "hidden"}`` (see the module doc).
    Gate mode (a verdict or a baseline): both runs side by side, the numbers that differ between
    the two answers marked. Run mode: one run (``after``), the numbers of its answer that the
    expected answer does not state marked."""
    gate = verdict is not None or baseline is not None
    after, before = candidate.case_map, baseline.case_map if baseline is not None else {}
    ids, hidden = shown_ids(candidate, baseline)
    chunks = _Chunks(clean)
    cases = []
    for case_id in ids:
        b, a = before.get(case_id), after.get(case_id)
        shown = next(c for c in (a, b) if c is not None)          # every id comes from one of the runs
        if gate:
            sides = (_side(b, a.answer if a else None, chunks, clean), _side(a, b.answer if b else None, chunks, clean))
        else:
            sides = (None, _side(a, shown.expected_answer or None, chunks, clean))
        cases.append({
            "id": clean(case_id), "question": clean(shown.question), "expected": clean(shown.expected_answer),
            "sections": [clean(s) for s in shown.expected_sections],
            "slice": [clean(s) for s in shown.slice_labels], "change": change_of(case_id, b, a, verdict),
            "before": sides[0], "after": sides[1]})
    return {"schema": SCHEMA, "mode": "gate" if gate else "run", "cases": cases, "chunks": chunks.rows,
            "hidden": hidden}
