"""The number rule's scanner reads a text once, cheaply: its tokens piece by piece, where a mention
may start through one memo per distinct token, a mention "as written" from the pieces it spans,
and the source only when the answer states a quantity. Each shortcut must give what the plain
way gives — the reference implementations below are that plain way (how the scanner read texts
before), kept here, not in the package."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics import numbers
from rageval.metrics.number_words import _FIRST_WORDS, TOKEN, Reader, tokens
from rageval.metrics.numbers import Quantity, check_numbers, extract_quantities

PIECES = ["7", "ngày", "NGÀY", "Ngày", "30.000", "đồng", "30.000đ", "$5", "$", "5", "tuần", "a", "week", "İ",
          "ß", "Straße", "ﬁ", "ǅ", "_", "__", "a_b", "3-5", "mười", "lăm", "m²", "km", "1,5", "triệu", "k",
          "(7", "ngày)", "e\u0301", "…", "hai", "mươi", "mốt", "giờ", "%", "15%", "x", "ΣΑΣ", "business",
          "days"]
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u2003", "\x1f"]
texts = st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(SPACES)), max_size=14).map(
    lambda parts: "".join(p + s for p, s in parts))


def reference_cut(text: str, first: int, end: int) -> str:
    """Tokens first .. end-1 as written: the spans of the token expression over the whole folded
    text, applied to the written text when folding kept its length, whitespace collapsed."""
    written = unicodedata.normalize("NFC", text)
    folded = written.casefold()
    source = written if len(folded) == len(written) else folded
    spans = [m.span() for m in TOKEN.finditer(folded)]
    return " ".join(source[spans[first][0]:spans[end - 1][1]].split())


def reference_starts(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if t[0].isdecimal() or t in _FIRST_WORDS or t == "$"]


@settings(max_examples=400, deadline=None)
@given(texts | st.text(max_size=40))
def test_every_mention_is_cut_as_the_whole_text_spans_say(text):
    read = numbers._Text(text)
    assert read.toks == tokens(text)
    n = len(read.toks)
    for first in range(n):
        for end in range(first + 1, min(n, first + 6) + 1):
            assert read.cut(first, end) == reference_cut(text, first, end)


@settings(max_examples=300, deadline=None)
@given(texts | st.text(max_size=40))
def test_starts_are_those_of_a_token_by_token_look(text):
    toks = tokens(text)
    assert Reader(toks).starts == reference_starts(toks)
    assert Reader(toks).starts == reference_starts(toks)        # the second time from memory


def test_mentions_keep_the_writers_case_and_spacing_collapsed():
    assert [q.shown for q in extract_quantities("Giao trong 7\u00a0 NGÀY;  phí $5\tK và 3 -\n5 Ngày")] == [
        "7 NGÀY", "$5 K", "3 Ngày", "5 Ngày"]
    # "ß" folds to "ss": the lengths differ, so the folded text is shown
    assert [q.shown for q in extract_quantities("Straße 7 Ngày")] == ["7 ngày"]


def reference_check(answer: str | None, expected: str, source: str) -> dict:
    """The number rule with every text read: expected, answer and source."""
    if answer is None:
        return {"status": "skipped"}
    want, found, held = (extract_quantities(t) for t in (expected, answer, source))
    if not want and not found:
        return {"status": "skipped"}
    missing = [q for q in want if q not in set(found)]
    outside = [q for q in found if q not in set(held)]

    def listing(qs: list[Quantity]) -> list[str]:
        first: dict[Quantity, Quantity] = {}
        for q in qs:
            first.setdefault(q, q)
        return [q.shown for q in sorted(first.values(), key=Quantity.sort_key)]
    total = len(set(want)) + len(set(found))
    return {"status": "fail" if missing or outside else "pass", "missing": listing(missing),
            "outside_source": listing(outside), "score": (total - len(set(missing)) - len(set(outside))) / total}


@settings(max_examples=300, deadline=None)
@given(answer=st.none() | texts, expected=texts, source=texts)
def test_the_rule_reads_the_source_only_when_it_needs_it_and_judges_the_same(answer, expected, source):
    got = check_numbers(answer, expected, source)
    want = reference_check(answer, expected, source)
    assert got.status == want["status"]
    if got.status != "skipped":
        assert got.details["missing"] == want["missing"]
        assert got.details["outside_source"] == want["outside_source"]
        assert got.score == want["score"]
