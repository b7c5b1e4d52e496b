"""The leak check read with numpy (rageval.golden.leaks, word_index) equals the implementation it
replaced (tests/golden/leaks_reference.py, the per-text, per-piece reader of rageval 3e2f8a7) on
random corpora and questions: Vietnamese with and without diacritics, composed and decomposed
(combining marks fold to nothing), upper case, punctuation stuck to words, "30.000", characters
folding to several letters ("ß", "ﬁ"), letters no question has, words longer than one packed code,
whitespace other than ASCII, a lone surrogate, empty texts, near-misses (one word changed, another
tone), questions repeating a 3-gram, passes of 1 character to a million. Same leaks, same order,
same fields.

The pieces are checked on their own too: ``WordReader.read`` gives, word for word, what
``folded_words`` gives; ``IntMap.get`` what a dict gives."""

from __future__ import annotations

import unicodedata
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from leaks_reference import find_leaks as reference_find_leaks

from rageval.golden import leaks
from rageval.golden.corpus import Corpus, Section
from rageval.golden.set import Case
from rageval.golden.word_index import IntMap, WordReader
from rageval.text import folded_words

SYLLABLES = ["đổi", "trả", "hàng", "trong", "ngày", "phí", "giao", "bảo", "hành", "được", "không", "khách", "mấy",
             "tháng", "đồng", "giảm", "sản", "phẩm", "lỗi", "nhà"]


def _spellings(word: str) -> list[str]:
    """The word as people type it: as is, decomposed, without diacritics, upper case, with the
    tone changed (a near-miss that folds the same), with punctuation stuck to it."""
    bare = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
    bare = bare.replace("đ", "d")
    return [word, unicodedata.normalize("NFD", word), bare, word.upper(), word.capitalize(), word + ",",
            "(" + word, word + ".", bare + "?"]


WORDS = st.one_of(
    st.sampled_from(SYLLABLES).flatmap(lambda w: st.sampled_from(_spellings(w))),
    st.sampled_from(["7", "30.000", "15%", "sp-40", "a\x1cb", "ngày\u3000trả", "7\xa0ngày", "lỗi\ud800mã", "?", "—",
                     "Straße", "ﬁle", "İstanbul", "ŉ", "\u0301", "x" * 13, "bảohànhsảnphẩmđổitrả", "ж", "中文字",
                     "https://shop.vn/đổi-trả/chính-sách-7-ngày", "Σίσυφος", "_", "a_b"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6),
)
SPACES = st.sampled_from([" ", " ", " ", "\n", "  ", "\t", "\u3000", "\n\n"])


@st.composite
def texts(draw: st.DrawFn, max_words: int = 40) -> str:
    words = draw(st.lists(WORDS, max_size=max_words))
    return "".join(w + draw(SPACES) for w in words)


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Case], list[tuple[str, str, bool]]]:
    bodies = draw(st.lists(texts(), min_size=0, max_size=12))
    places = []
    for i, body in enumerate(bodies):
        by_line = draw(st.booleans()) and i < 3
        places.append((f"p{i}", body if not by_line or body.strip() else "x", by_line))
    cases = []
    for i in range(draw(st.integers(0, 10))):
        source, start = [], 0
        if bodies and draw(st.booleans()):
            at = draw(st.integers(0, len(bodies) - 1))
            source = bodies[at].split()
            start = draw(st.integers(0, max(0, len(source) - 1)))
            if draw(st.booleans()):                                # across the end of a place into the next
                start = max(0, len(source) - draw(st.integers(1, 3)))
                source += " ".join(bodies[at + 1:at + 2]).split()
        words = source[start:start + draw(st.integers(3, 9))]
        if draw(st.booleans()):                                    # a near-miss: one word replaced
            words[draw(st.integers(0, max(0, len(words) - 1))):][:1] = [draw(WORDS)]
        if draw(st.booleans()):                                    # a question repeating its 3-grams
            words = words + words
        words += draw(st.lists(WORDS, max_size=3))
        holdout = ("holdout",) if draw(st.booleans()) else ()
        cases.append(Case(id=f"q{i}", question=" ".join(words) or "?", tags=holdout))
    return cases, places


@settings(max_examples=400, deadline=None)
@given(corpora(), st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]), st.sampled_from([1, 2, 7, 60, 1_000_000]))
def test_find_leaks_equals_the_implementation_it_replaced(corpus, min_overlap, pass_chars):
    cases, places = corpus
    with mock.patch.object(leaks, "_PASS_CHARS", pass_chars):
        got = leaks.find_leaks(cases, places, min_overlap)
    assert [x.to_dict() for x in got] == [x.to_dict() for x in reference_find_leaks(cases, places, min_overlap)]


@settings(max_examples=400, deadline=None)
@given(st.lists(texts(), max_size=8), st.lists(WORDS, max_size=30))
def test_the_word_reader_reads_what_folded_words_cuts(bodies, asked):
    vocabulary: dict[str, int] = {}
    for word in folded_words(" ".join(asked)):
        vocabulary.setdefault(word, len(vocabulary))
    words, text = WordReader(vocabulary).read(bodies) if bodies else (np.zeros(0), np.zeros(0))
    want = [(vocabulary.get(w, -1), t) for t, body in enumerate(bodies) for w in folded_words(body)]
    got = sorted(zip(text.tolist(), range(len(text)), words.tolist()))   # by text, then as read
    assert [(i, t) for t, _, i in got] == want


def test_a_question_split_over_two_places_leaks_into_neither_by_the_gram_across():
    """No 3-gram spans two places: "doi tra hang" starts in p0 and ends in p1, so p0 holds none of
    the question's 3-grams and p1 one of three (hand-counted)."""
    cases = [Case(id="q", question="đổi trả hàng trong ngày")]
    places = [("p0", "khách hỏi đổi trả", False), ("p1", "hàng trong ngày", False), ("p2", "x", False)]
    for pass_chars in (1, 1_000_000):
        with mock.patch.object(leaks, "_PASS_CHARS", pass_chars):
            assert [(x.where, x.overlap) for x in leaks.find_leaks(cases, places, 0.0)] == [("p1", 0.333)]


def test_a_vocabulary_of_long_words_and_many_letters():
    """Letters enough for 15 bits each (four letters to a code): most words go the long way."""
    letters = [chr(0x4E00 + i) for i in range(20_000)]
    vocabulary = {"".join(letters[i:i + n]): i for i, n in zip(range(0, 20_000, 7), [2, 4, 5, 9] * 1000)}
    reader = WordReader(vocabulary)
    assert reader.width == 4
    words = list(vocabulary)[:50] + ["".join(letters[1:6]), "x", letters[3] * 5]
    ids, text = reader.read([" ".join(words[:20]), "", " ".join(words[20:])])
    assert ids.tolist() == [vocabulary.get(w, -1) for w in words]
    assert text.tolist() == [0] * 20 + [2] * (len(words) - 20)


@settings(max_examples=300, deadline=None)
@given(st.sets(st.one_of(st.integers(0, 64), st.integers(0, 2**63 - 1)), max_size=300),
       st.lists(st.one_of(st.integers(0, 64), st.integers(0, 2**63 - 1)), max_size=300))
def test_int_map_finds_exactly_the_keys_it_holds(keys, queries):
    keys = sorted(keys)
    held = {k: 3 * n + 1 for n, k in enumerate(keys)}
    found = IntMap(np.array(keys, dtype=np.int64), np.array([held[k] for k in keys], dtype=np.int64))
    asked = queries + keys
    assert found.get(np.array(asked, dtype=np.int64)).tolist() == [held.get(q, -1) for q in asked]


def test_places_are_the_files_then_every_section_labelled_as_the_report_names_it(tmp_path):
    (tmp_path / "few-shot.md").write_text("Q: đổi trả?\nA: 7 ngày", encoding="utf-8")
    sections = (Section("DT-1", "Đổi trả", "DT-1 Đổi trả\nTrong 7 ngày.", "doi-tra"),
                Section("VC-2", "Phí", "VC-2 Phí\n30.000 đồng", "van-chuyen"))
    places = leaks.leak_places(None, [tmp_path / "few-shot.md"], Corpus(sections, ()), tmp_path)
    every = [("few-shot.md", "Q: đổi trả?\nA: 7 ngày", True),
             ("corpus DT-1 (doi-tra)", "DT-1 Đổi trả\nTrong 7 ngày.", False),
             ("corpus VC-2 (van-chuyen)", "VC-2 Phí\n30.000 đồng", False)]
    assert list(places) == every and len(places) == 3
    assert [places[i] for i in range(-3, 3)] == every + every
    with pytest.raises(IndexError):
        places[3]
