"""Rule checks on an answer's wording: required phrases, forbidden phrases, and refusal.

* ``must_include`` / ``must_not_include`` compare on :func:`rageval.text.normalize` (NFC,
  casefolded, whitespace collapsed), so case and spacing do not matter but diacritics do. A phrase
  that starts or ends with a letter or digit must sit on a word boundary there: "7 ngày" is not
  found in "17 ngày".
* refusal: :func:`declines` recognises an answer that says the documents do not cover the
  question. Markers are compared on folded words (no diacritics, no punctuation), so
  "khong co thong tin" and "I don’t know" (curly apostrophe) are recognised too.

Nothing here does I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from rageval.records import CheckResult
from rageval.text import folded_words, normalize

#: Phrases that mean "the documents do not say". Vietnamese first, then English. They are kept
#: specific on purpose: a bare "không tìm thấy" would also match an in-scope instruction such as
#: "nếu không tìm thấy hóa đơn, hãy liên hệ CSKH".
DEFAULT_REFUSAL_MARKERS: tuple[str, ...] = (
    "không có thông tin", "chưa có thông tin", "không có dữ liệu",
    "không tìm thấy thông tin", "tôi không tìm thấy", "không tìm thấy trong tài liệu",
    "không đề cập", "không được đề cập", "chưa được đề cập", "chưa đề cập",
    "không nêu", "không được nêu", "tài liệu không nói", "không có trong tài liệu",
    "không có quy định", "ngoài phạm vi", "xin lỗi, tôi không", "tôi không biết",
    "không thể trả lời", "không trả lời được",
    "i don't know", "i do not know", "not covered", "no information", "no relevant information",
    "not mentioned", "does not mention", "doesn't mention", "do not mention", "don't mention",
    "does not say", "doesn't say", "do not have information", "don't have information",
    "don't have any information", "do not have any information", "not in the documents",
    "not in the provided", "outside the scope", "out of scope", "cannot answer", "can't answer",
    "unable to answer", "not specified", "could not find", "couldn't find",
    # specific on purpose: "the warranty does not cover water damage" answers the question
    "documents do not cover", "documents don't cover", "document does not cover", "document doesn't cover",
    "isn't covered in the documents", "is not covered in the documents",
    "information is not available", "i can't help with that", "i cannot help with that",
)

def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    head = r"(?<!\w)" if re.match(r"\w", phrase) else ""
    tail = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return re.compile(head + re.escape(phrase) + tail)


def _normalised_phrases(phrases: Sequence[str], key: str) -> list[tuple[str, str]]:
    if isinstance(phrases, str):
        raise ValueError(f"{key} must be a list of phrases, got the string {phrases!r}")
    out = []
    for n, phrase in enumerate(phrases, 1):
        if not isinstance(phrase, str) or not normalize(phrase):
            raise ValueError(f"{key} phrase #{n} is empty or not a string ({phrase!r}); remove it")
        out.append((phrase, normalize(phrase)))
    return out


def _present(answer: str, phrases: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    text = normalize(answer)
    present = [p for p, norm in phrases if _phrase_pattern(norm).search(text)]
    absent = [p for p, norm in phrases if p not in present]
    return present, absent


def _quoted(phrases: Sequence[str]) -> str:
    return ", ".join(f"'{p}'" for p in phrases)


def check_phrases(answer: str | None, phrases: Sequence[str], key: str, *, inverse: bool = False) -> CheckResult:
    """``must_include`` (pass iff every phrase occurs in the answer; details ``missing``) or, with
    ``inverse``, ``must_not_include`` (pass iff none occurs; details ``present``), both in the
    given order. Score: share of phrases as wanted. Skipped with no answer or no phrases; ``key``
    names the list in messages."""
    checked = _normalised_phrases(phrases, key)
    if answer is None:
        return CheckResult.skipped("no answer: retrieval-only case")
    if not checked:
        return CheckResult.skipped(f"no {key} phrases")
    present, absent = _present(answer, checked)
    wrong, right = (present, absent) if inverse else (absent, present)
    detail = "present" if inverse else "missing"
    score = len(right) / len(checked)
    if wrong:
        what = "contains forbidden" if inverse else "missing required"
        return CheckResult.fail(f"{what} {_quoted(wrong)}", score=score, **{detail: wrong})
    return CheckResult.ok(f"{'avoids' if inverse else 'includes'} {_quoted(right)}", score=score, **{detail: []})


def _listed(markers: Sequence[str] | None) -> tuple[str, ...]:
    """A ``checks.refusal_markers`` value as a tuple (the defaults for None); ValueError on a bare string."""
    if markers is None:
        return DEFAULT_REFUSAL_MARKERS
    if isinstance(markers, str):
        raise ValueError(f"checks.refusal_markers must be a list of phrases, got the string {markers!r}")
    return tuple(markers)


def _markers(markers: Sequence[str] | None) -> list[tuple[str, str]]:
    return list(_folded_markers(_listed(markers)))


@functools.lru_cache(maxsize=16)
def _folded_markers(markers: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each marker with its folded words joined by spaces and padded with one, so that it matches
    whole words of an answer folded the same way; computed once per marker list (not once per case)."""
    out = []
    for n, marker in enumerate(markers, 1):
        words = folded_words(marker) if isinstance(marker, str) else []
        if not words:
            raise ValueError(f"checks.refusal_markers entry #{n} ({marker!r}) has no words; remove it")
        out.append((marker, f" {' '.join(words)} "))
    if not out:
        raise ValueError("checks.refusal_markers is empty, so no answer could ever decline; "
                         "leave the key out to use the built-in markers")
    return tuple(out)


def validate_refusal_markers(markers: Sequence[str] | None) -> tuple[str, ...]:
    """The markers a check will use (the defaults for None); ValueError on an empty list, a bare
    string or a marker with no words. The config loader calls this to fail early."""
    return tuple(marker for marker, _ in _markers(markers))


@functools.lru_cache(maxsize=16)
def _by_first_word(markers: tuple[str, ...]) -> dict[str, tuple[tuple[int, str, str], ...]]:
    """The markers by their first folded word: (place in the list, marker, its padded folded words).
    An answer can hold only the markers whose first word is one of its words."""
    out: dict[str, list[tuple[int, str, str]]] = {}
    for n, (marker, words) in enumerate(_folded_markers(markers)):
        out.setdefault(words.split(" ", 2)[1], []).append((n, marker, words))
    return {first: tuple(found) for first, found in out.items()}


def refusal_marker(answer: str, markers: Sequence[str] | None = None) -> str | None:
    """The first marker (as given) found in the answer, or None."""
    index = _by_first_word(_listed(markers))
    words = folded_words(answer)
    firsts = index.keys() & words
    if not firsts:
        return None
    text = f" {' '.join(words)} "
    found = [(n, marker) for first in firsts for n, marker, padded in index[first] if padded in text]
    return min(found)[1] if found else None


def declines(answer: str, markers: Sequence[str] | None = None) -> bool:
    """True when the answer says the documents do not cover the question."""
    return refusal_marker(answer, markers) is not None


def check_refusal(answer: str | None, out_of_scope: bool,
                  markers: Sequence[str] | None = None) -> CheckResult:
    """Out-of-scope case: pass iff the answer declines. In-scope case: fail if it declines.

    Details: ``declined`` (bool) and ``marker`` (the phrase that matched, or None).
    Skipped when there is no answer (a retrieval-only case).
    """
    if answer is None:
        _markers(markers)                        # bad markers fail on a retrieval-only case too
        return CheckResult.skipped("no answer: retrieval-only case")
    marker = refusal_marker(answer, markers)     # reads the markers: bad ones fail here as well
    declined = marker is not None
    if out_of_scope:
        if declined:
            return CheckResult.ok(f"declined as expected ('{marker}')", declined=True, marker=marker)
        return CheckResult.fail("answered a question the documents do not cover", declined=False,
                                marker=None)
    if declined:
        return CheckResult.fail(f"declined a question the documents answer ('{marker}')",
                                declined=True, marker=marker)
    return CheckResult.ok("answered", declined=False, marker=None)
