"""text.PieceCache: what ``cut`` makes of each piece, in order, whether the piece is remembered, new,
or dropped by a restart (the cache is bounded)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.text import PieceCache, fold, folded_words, folded_words_once


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "bb", "Đổi", "7", "x.", "", "ß"]), max_size=8), max_size=6),
       st.integers(0, 4))
def test_each_and_joined_are_cut_of_each_piece_whatever_the_cache_holds(texts, limit):
    cut_calls = []

    def cut(piece: str) -> tuple[str, ...]:
        cut_calls.append(piece)
        return (piece.upper(), str(len(piece)))

    cache = PieceCache(cut, limit=limit)
    for pieces in texts:
        assert cache.each(pieces) == [(p.upper(), str(len(p))) for p in pieces]
        assert cache.joined(pieces) == [w for p in pieces for w in (p.upper(), str(len(p)))]
        assert len(cache._known) <= limit + 8       # bounded: over the limit, the next new piece clears it


def test_a_piece_is_cut_once_while_the_cache_holds_it():
    calls = []
    cache = PieceCache(lambda p: calls.append(p) or (p,))
    cache.each(["a", "b", "a"])
    cache.each(["b", "a", "c"])
    assert calls == ["a", "b", "c"]


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("aĐđổỜßſİ\u0301\u0323 \t\n\u00a0\u2003.,-_7²½ǅ"))
               | st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_the_words_of_a_text_folded_at_once_are_those_read_piece_by_piece(text):
    """folded_words_once (the extractive generator's reading of a sentence) gives folded_words's
    words, and both are re.findall(r"\\w+", fold(text)): combining marks, ß, dotted İ, titlecase
    digraphs, no-break and em spaces, digits and marks included."""
    assert folded_words_once(text) == folded_words(text) == re.findall(r"\w+", fold(text))
