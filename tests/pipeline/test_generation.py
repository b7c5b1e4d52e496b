"""The extractive generator reads each chunk's sentences once and matches the question's terms
against them on the fly; its answers are those of the rule written out plainly (below, the way
the generator computed it before: every sentence's full term set, intersected per case), on
generated questions and contexts with headings, bullets, underscores and repeated sentences."""

from __future__ import annotations

import collections
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.pipeline import generation
from rageval.pipeline.generation import CACHE_MIN, STOP_WORDS, ExtractiveGenerator
from rageval.records import Retrieved
from rageval.text import folded_words, sentences


def plain_answer(question: str, chunks: list[Retrieved], stop: frozenset[str], decline: str,
                 max_sentences: int = 2, min_coverage: float = 0.2) -> str:
    """The extractive rule with nothing kept between cases."""
    def terms(text: str) -> frozenset[str]:
        words = [w for w in folded_words(text) if w not in stop]
        return frozenset(words) | {f"{a}_{b}" for a, b in zip(words, words[1:])}

    candidates = []                                    # (origin, sentence, terms)
    for ci, chunk in enumerate(chunks):
        section = ""
        for line in chunk.text.splitlines():
            first = line.strip().split(" ", 1)[0]
            if first in chunk.sections:
                section = first
                continue
            for sent in sentences(line.lstrip("-*• ").strip()) if line.strip() else ():
                candidates.append(((ci, section), sent, terms(sent)))
    q = terms(question)
    if not candidates or not q:
        return decline
    df = {t: sum(1 for c in candidates if t in c[2]) for t in q}
    idf = {t: math.log(1 + len(candidates) / max(df[t], 1)) for t in q}
    uni = {t for t in q if "_" not in t}
    total = math.fsum(idf[t] for t in uni) or 1.0
    scored = sorted(((math.fsum(idf[t] for t in c[2] & uni) / total, math.fsum(idf[t] for t in c[2] & q), -i)
                     for i, c in enumerate(candidates)), reverse=True)
    if scored[0][0] < min_coverage:
        return decline
    home = candidates[-scored[0][2]][0]
    best = [-s[2] for s in scored if candidates[-s[2]][0] == home and s[0] >= min_coverage][:max_sentences]
    return " ".join(candidates[i][1] for i in sorted(best))


WORDS = ["đổi", "trả", "doi", "tra", "hàng", "7", "ngày", "30", "phí", "a_b", "a", "b", "the", "is", "DT-1",
         "giao", "hoa_don", "x"]
sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(lambda ws: " ".join(ws) + ".")
line = st.tuples(st.sampled_from(["", "- ", "* ", "DT-1 ", "DT-2 "]),
                 st.lists(sentence, min_size=1, max_size=3)).map(lambda t: t[0] + " ".join(t[1]))
chunk_text = st.lists(line, min_size=1, max_size=5).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(question=st.lists(st.sampled_from(WORDS), max_size=7).map(" ".join),
       texts=st.lists(chunk_text, max_size=4), language=st.sampled_from(["vi", "en"]),
       min_coverage=st.sampled_from([0.2, 0.0, 0.6]))
def test_answers_are_those_of_the_plain_rule(question, texts, language, min_coverage):
    chunks = [Retrieved(f"c{i}", ("DT-1",), text, 1.0, 10) for i, text in enumerate(texts)]
    generator = ExtractiveGenerator(2, min_coverage, language=language)
    want = plain_answer(question, chunks, STOP_WORDS[language], generator.decline, min_coverage=min_coverage)
    assert generator.generate(question, chunks, case_id="q").answer == want
    assert generator.generate(question, chunks, case_id="q").answer == want      # read from its cache
    ahead = ExtractiveGenerator(2, min_coverage, language=language)
    ahead.read_ahead(chunks)                       # as the builtin app does before its workers fork
    assert [ahead.generate(question, chunks, case_id="q").answer for _ in range(2)] == [want, want]


def test_the_cache_holds_the_index_and_stays_bounded():
    generator = ExtractiveGenerator(cache_size=CACHE_MIN + 10)
    chunks = [Retrieved(f"c{i}", ("S",), f"Trả hàng {i} ngày. Phí {i} đồng.", 1.0, 8) for i in range(CACHE_MIN + 25)]
    first = [generator.sentences_of(c) for c in chunks[: CACHE_MIN + 10]]
    assert all(generator.sentences_of(c) is s for c, s in zip(chunks, first))     # each chunk read once
    for c in chunks:
        generator.sentences_of(c)
    assert len(generator._read) <= CACHE_MIN + 10
    heading, start, end, words = generator.sentences_of(chunks[7])[1]
    assert chunks[7].text[start:end] == "Phí 7 đồng." and words == ("phi", "7", "dong")


def test_chunks_read_ahead_are_read_as_on_first_use_up_to_the_cache_size():
    chunks = [Retrieved(f"c{i}", ("S",), f"S\nTrả hàng {i} ngày. Phí {i} đồng.", 1.0, 8) for i in range(CACHE_MIN + 5)]
    plain, ahead = ExtractiveGenerator(), ExtractiveGenerator()
    ahead.read_ahead(chunks)
    assert len(ahead._read) == CACHE_MIN                          # the cache's size, never more
    for c in chunks[:3]:
        first, second = ahead._chunk(c), ahead._chunk(c)
        assert first == plain._chunk(c) and first[1] is None       # a first use: no word masks yet
        assert second == plain._chunk(c) and second[1]             # a second use: its masks
    assert ahead._chunk(chunks[-1]) == plain._chunk(chunks[-1])   # past the cache's size: read on use


def plain_sentences(text: str, sections: tuple[str, ...], stop: frozenset[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(heading, sentence, content words) of a chunk, by text.sentences and folded_words sentence by sentence."""
    out, section = [], ""
    for line in text.splitlines():
        first = line.strip().split(" ", 1)[0]
        if first in sections:
            section = first
            continue
        for sent in sentences(line.lstrip("-*• ").strip()) if line.strip() else ():
            out.append((section, sent, tuple(w for w in folded_words(sent) if w not in stop)))
    return out


ODD = ["Đổi", "trả", "hàng.", "…", "30.000đ.", "v1.2", "(7", "ngày)!", "Phí?", "giao\u00a0hàng", "ĐƠN.", "tại",
       "the.", "is", "a_b.", "!!", "ǅ", "Straße", "1,5", "triệu…", "x\u2003y.", "-", "•", "*"]
odd_line = st.tuples(st.sampled_from(["", "- ", "* ", "• ", "DT-1 ", "  "]),
                     st.lists(st.sampled_from(ODD), min_size=0, max_size=10),
                     st.sampled_from([" ", "  ", "\t", " \u00a0"])).map(lambda t: t[0] + t[2].join(t[1]))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(odd_line, min_size=1, max_size=4).map("\n".join), min_size=1, max_size=3),
       language=st.sampled_from(["vi", "en"]))
def test_a_chunk_is_read_as_sentence_by_sentence(texts, language):
    # one generator reads every text, so pieces met in an earlier chunk come from its memory
    generator = ExtractiveGenerator(language=language)
    for text in texts:
        read = generator.sentences_of(Retrieved("c", ("DT-1",), text, 1.0, 10))
        want = plain_sentences(text, ("DT-1",), STOP_WORDS[language])
        assert [(h, text[a:b], w) for h, a, b, w in read] == want


def test_a_chunk_with_diacritics_numbers_and_odd_punctuation():
    text = "DT-1 Đổi trả\n- Đổi trả trong 7 ngày… Phí 30.000đ! Bản v1.2 (mới)?  Xong.\n• the cat is here."
    read = ExtractiveGenerator(language="en").sentences_of(Retrieved("c", ("DT-1",), text, 1.0, 10))
    assert [(h, text[a:b], w) for h, a, b, w in read] == [
        ("DT-1", "Đổi trả trong 7 ngày…", ("doi", "tra", "7", "ngay")),       # "trong" is a function word
        ("DT-1", "Phí 30.000đ!", ("phi", "30", "000d")),
        ("DT-1", "Bản v1.2 (mới)?", ("v1", "2", "moi")),                  # so is "ban"
        ("DT-1", "Xong.", ("xong",)),
        ("DT-1", "the cat is here.", ("cat",)),
    ]


def reference_holding(q_terms: frozenset[str], read: list[tuple]) -> dict[int, frozenset[str]]:
    """Position → the terms each sentence holds, sentence by sentence: its words, and each pair term
    whose split a_b (at any "_") has b right after a among its words."""
    held = {}
    for pos, (_, _, _, words) in enumerate(read):
        pairs = {t for t in q_terms for i, ch in enumerate(t) if ch == "_"
                 and any(x == t[:i] and y == t[i + 1:] for x, y in zip(words, words[1:]))}
        terms = (q_terms & set(words)) | pairs
        if terms:
            held[pos] = frozenset(terms)
    return held


UNDERSCORED = ["a", "b", "c", "a_b", "b_c", "a_b_c", "_", "x", "doi", "tra", "doi_tra"]


@settings(max_examples=400, deadline=None)
@given(question=st.lists(st.sampled_from(UNDERSCORED), max_size=6).map(" ".join),
       texts=st.lists(st.tuples(st.lists(st.lists(st.sampled_from(UNDERSCORED), min_size=1, max_size=7).map(
           lambda ws: " ".join(ws) + "."), min_size=1, max_size=9).map(" ".join), st.integers(1, 3)),
           min_size=1, max_size=4))
def test_the_word_masks_find_the_sentences_a_plain_look_finds(question, texts):
    # words holding "_" make a pair term like "a_b_c" splittable two ways: both are tried; a chunk read
    # once is matched sentence by sentence, read again through its word masks
    generator = ExtractiveGenerator(language="en")
    chunks, seen = [], collections.Counter()
    for i, (text, uses) in enumerate(texts):
        for _ in range(uses):
            read = generator._chunk(Retrieved(f"c{i}", (), text, 1.0, 10))
        seen[text] += uses                          # the cache knows a chunk by its text and sections
        assert (read[1] is None) == (seen[text] == 1)
        chunks.append(read)
    firsts = [0]
    for sentences, _ in chunks:
        firsts.append(firsts[-1] + len(sentences))
    q_terms = generation._terms(question, generator.stop)
    flat = [s for sentences, _ in chunks for s in sentences]
    order, keys, df = generation._holding(q_terms, chunks, firsts)
    held = {pos: frozenset(t for j, t in enumerate(order) if key >> j & 1) for pos, key in enumerate(keys) if key}
    want = reference_holding(q_terms, flat)
    assert held == want
    assert df == [sum(1 for terms in want.values() if t in terms) for t in order]
    for sentences, masks in chunks:
        assert masks is None or masks == {w: sum(1 << i for i, s in enumerate(sentences) if w in s[3])
                                          for s in sentences for w in s[3]}


@settings(max_examples=500, deadline=None)
@given(values=st.lists(st.floats(min_value=1e-300, max_value=1e300) | st.sampled_from([1.0, 1e16, 1e-16, 0.1, 3.0]),
                       min_size=1, max_size=12),
       mask=st.integers(0, 2**12 - 1))
def test_a_sentences_weight_is_the_exact_sum_of_its_terms(values, mask):
    """The coverage and weight sums (one or two terms added, more through fsum) are math.fsum's,
    bit for bit, whatever the values' magnitudes."""
    mask &= (1 << len(values)) - 1
    assert generation._sum(values, mask) == math.fsum(v for j, v in enumerate(values) if mask >> j & 1)
