"""The leak check (leaks.find_leaks, vectorised with numpy) against a plain reference: for every
question and place, the share of the question's distinct word 3-grams that the place's own 3-grams
hold, with Python sets. Random texts mix diacritics, punctuation stuck to words, numbers written
"30.000" (two words once folded), line breaks, whitespace other than ASCII, long pieces, a lone surrogate
and texts too short for a 3-gram."""

from __future__ import annotations

import random

import pytest

from rageval.golden import leaks
from rageval.golden.set import Case
from rageval.text import folded_words

WORDS = ["đổi", "trả", "doi", "tra", "hàng", "trong", "7", "ngày", "ngày,", "30.000", "đồng.", "phí", "(hóa", "đơn)",
         "khách", "sp-40", "Hàng", "TRẢ", "mấy", "?", "được", "không", "ngày\u3000trả", "7\xa0ngày", "a\x1cb",
         "https://shop.vn/đổi-trả/chính-sách-bảo-hành-7-ngày", "x" * 31, "y" * 32, "ả" * 16, "đ" * 15 + "ổi",
         "lỗi\ud800mã"]       # other whitespace, long pieces, a lone surrogate


def grams(text):
    words = folded_words(text)
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def reference(cases, places, min_overlap):
    found = []
    for case in cases:
        mine = grams(case.question)
        if len(folded_words(case.question)) < leaks.LEAK_MIN_WORDS or not mine:
            continue
        for label, text, by_line in places:
            share = len(mine & grams(text)) / len(mine)
            if not share or share + 1e-9 < min_overlap:     # a place holding none is never a leak
                continue
            if by_line:
                lines = text.splitlines()
                best = max(range(len(lines)), key=lambda i: len(mine & grams(lines[i])))
                label = f"{label} line {best + 1}"
            found.append((case.id, label, round(share, 3), "holdout" in case.tags))
    return found


def text(rng, n):
    return "".join(rng.choice(WORDS) + rng.choice([" ", " ", " ", "\n", "  "]) for _ in range(n))


@pytest.mark.parametrize("seed", range(12))
def test_find_leaks_equals_the_set_reference(seed, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.setattr(leaks, "_PASS_CHARS", rng.choice([1, 300, 4_000_000]))   # characters per numpy pass
    places = [(f"p{i}", text(rng, rng.choice([0, 2, 5, 30, 200])), rng.random() < 0.2) for i in range(40)]
    places = [(label, body if not by_line or body.strip() else "x", by_line) for label, body, by_line in places]
    cases = []
    for i in range(60):
        source = rng.choice(places)[1].split()
        start = rng.randrange(max(1, len(source)))
        words = source[start:start + rng.randrange(3, 9)] + ([rng.choice(WORDS)] if rng.random() < 0.5 else [])
        cases.append(Case(id=f"q{i}", question=" ".join(words) or "?", tags=("holdout",) if i % 7 == 0 else ()))
    for min_overlap in (0.0, 0.3, 0.6, 1.0):
        got = [(x.case, x.where, x.overlap, x.holdout) for x in leaks.find_leaks(cases, places, min_overlap)]
        assert got == sorted(reference(cases, places, min_overlap), key=lambda x: int(x[0][1:]))
        assert min_overlap > 0.0 or got          # the random texts do hold questions


def test_no_question_or_no_place():
    assert leaks.find_leaks([], [("p", "a b c d", False)], 0.5) == []
    assert leaks.find_leaks([Case(id="q", question="đổi trả hàng trong 7 ngày")], [], 0.5) == []

