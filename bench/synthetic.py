"""Synthetic projects for the benchmarks: a policy-like corpus of N sections and golden sets of M
cases over it, written as a rageval project (rageval.yml, corpus.json, golden file).

Two languages. ``zipf=False`` (the default, as bench_scale, bench_html and bench_results_io measured
their published figures): words drawn uniformly from 2,756 two-syllable words (a topic's 12 words
six times in ten), a case asks four words of a sentence of its section among four random ones.
``zipf=True`` (bench_offline, issue 25 §3: a uniform corpus hides the memory a lexical engine spends
on long postings): word frequencies are Zipfian, as in real text: word ranks are drawn with probability ∝
1 / (rank + 2.7) (Zipf–Mandelbrot, exponent 1) from 12,000 Vietnamese-looking syllables written with
their diacritics (about 3,400 words once folded: "đổi", "dỗi" and "doi" are one word, as for a
customer typing without them), so a handful of words sit in almost every chunk — which is what
makes a query's postings long and a lexical engine's memory grow. One token in forty is a product
code ("sp40213"), the long tail of words seen once or twice. Each section is a heading and 6–9
sentences of 12–20 tokens; three tokens in ten come from the section's topic (12 words of its
own, drawn from the middle and the tail of the ranking), the rest from the whole language; about
one sentence in three states a quantity ("trong 7 ngày", "phí 30.000 đồng", "giảm 15%"), so the
extractive generator, the number rule and policy-drift snapshots have real work.

A case asks four words of one sentence of its section and three common words ("cho hỏi … được
không"), half of the questions typed without diacritics; it expects that section and the sentence
as its answer. Everything is drawn from seeded generators: the same arguments give the same bytes.
"""

from __future__ import annotations

import json
import random
import sys
import unicodedata
from pathlib import Path

import numpy as np

ONSETS = ("", "b", "c", "ch", "d", "đ", "g", "gi", "h", "k", "kh", "l", "m", "n", "ng", "nh", "p", "ph", "qu",
          "r", "s", "t", "th", "tr", "v", "x")
NUCLEI = ("a", "ă", "â", "e", "ê", "i", "o", "ô", "ơ", "u", "ư", "y", "ia", "iê", "ua", "uô", "ưa", "ươ", "oa",
          "oe", "uy")
CODAS = ("", "c", "ch", "m", "n", "ng", "nh", "p", "t", "i", "o", "u")
TONES = ("", "\u0300", "\u0301", "\u0309", "\u0303", "\u0323")     # ngang, huyền, sắc, hỏi, ngã, nặng
QUANTITIES = ("trong {n} ngày", "trong {n} ngày làm việc", "phí {k}.000 đồng", "giảm {p}%", "sau {n} tháng")
VOCABULARY = 12_000          # distinct syllables, as written
ZIPF_SHIFT = 2.7             # Zipf–Mandelbrot: p(rank) ∝ 1 / (rank + 2.7)
TOPIC_SHARE = 0.3            # share of a sentence's tokens drawn from its section's topic
CODE_SHARE = 0.025           # share of tokens that are product codes


def _syllable(onset: str, nucleus: str, coda: str, tone: str) -> str:
    """The syllable with its tone mark on the nucleus's last vowel (NFC)."""
    return unicodedata.normalize("NFC", onset + nucleus + tone + coda)


def vocabulary(seed: int = 0) -> list[str]:
    """The language's syllables, most frequent first (a seeded shuffle of every combination)."""
    every = sorted({_syllable(o, n, c, t) for o in ONSETS for n in NUCLEI for c in CODAS for t in TONES})
    random.Random(seed).shuffle(every)
    return every[:VOCABULARY]


def zipf_weights(size: int) -> np.ndarray:
    weights = 1.0 / (np.arange(1, size + 1) + ZIPF_SHIFT)
    return weights / weights.sum()


def strip_diacritics(text: str) -> str:
    """The text as typed without diacritics (đ → d), case kept."""
    bare = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return bare.replace("đ", "d").replace("Đ", "D")


class _Language:
    """Token draws: the whole language by Zipf rank, a section's topic uniformly, product codes."""

    def __init__(self, seed: int) -> None:
        self.words = vocabulary()
        self.rng = np.random.default_rng(seed)
        self.cumulative = np.cumsum(zipf_weights(len(self.words)))

    def common(self, count: int) -> np.ndarray:
        """Ranks drawn from the Zipf distribution."""
        return np.minimum(np.searchsorted(self.cumulative, self.rng.random(count)), len(self.words) - 1)

    def topic(self) -> np.ndarray:
        """12 words of a section's own, from the middle and the tail of the ranking."""
        return self.rng.choice(np.arange(200, len(self.words)), 12, replace=False)

    def sentence(self, topic: np.ndarray) -> str:
        rng, size = self.rng, int(self.rng.integers(12, 21))
        ranks = self.common(size)
        own = rng.random(size) < TOPIC_SHARE
        ranks[own] = topic[rng.integers(0, len(topic), int(own.sum()))]
        body = [self.words[r] for r in ranks.tolist()]
        for i in np.flatnonzero(rng.random(size) < CODE_SHARE).tolist():
            body[i] = f"sp{int(rng.integers(0, 100_000)):05d}"
        if rng.random() < 0.35:
            body.append(QUANTITIES[int(rng.integers(0, len(QUANTITIES)))].format(
                n=int(rng.integers(1, 31)), k=int(rng.integers(10, 100)), p=int(rng.integers(5, 51))))
        return " ".join(body).capitalize() + "."


def _zipf_corpus(n_sections: int, seed: int) -> dict[str, dict[str, str]]:
    language = _Language(seed)
    corpus = {}
    for i in range(n_sections):
        topic = language.topic()
        sentences = [language.sentence(topic) for _ in range(int(language.rng.integers(6, 10)))]
        corpus[f"S-{i}"] = {"title": " ".join(language.words[r] for r in topic[:3].tolist()),
                            "text": " ".join(sentences)}
    return corpus


def _zipf_cases(corpus: dict[str, dict[str, str]], n_cases: int, seed: int) -> list[dict]:
    language = _Language(seed)
    rng = random.Random(seed)
    ids = list(corpus)
    cases = []
    for j in range(n_cases):
        target = rng.choice(ids)
        sentence = rng.choice(corpus[target]["text"].split(". ")).rstrip(".")
        tokens = [t for t in sentence.split() if t.isalpha()]
        asked = rng.sample(tokens, min(4, len(tokens)))
        filler = [language.words[r] for r in language.common(3).tolist()]
        question = " ".join(["cho hỏi", *asked, *filler, "được không"]) + "?"
        if j % 2:
            question = strip_diacritics(question)
        cases.append({"id": f"b{j}", "question": question, "expected_sections": [target],
                      "expected_answer": sentence + ".", "source": "bench",
                      "slice": {"type": "lookup", "numeric": any(c.isdigit() for c in sentence)},
                      "tags": ["pr"] if j % 4 == 0 else []})
    return cases


SYLLABLES = ("doi tra hang hoan tien giao van chuyen bao hanh thanh vien phi don kho ngay thang "
             "dien thoai laptop may tinh bang ao quan giay the qua tang thuc pham do lot ma giam "
             "gia tri noi thanh lien tinh hoa toc dia chi kiem tra phu kien sua chua linh kien "
             "hoa don tem nhan loi nha san xuat khach hang cua hang tai khoan thanh toan").split()


def _uniform_vocabulary(rng: random.Random) -> list[str]:
    words = sorted({a + b for a in SYLLABLES for b in SYLLABLES if a != b})
    rng.shuffle(words)
    return words


def _uniform_sentence(rng: random.Random, topic: list[str], words: list[str]) -> str:
    body = [rng.choice(topic if rng.random() < 0.6 else words) for _ in range(rng.randint(12, 20))]
    if rng.random() < 0.35:
        body.append(rng.choice(QUANTITIES).format(n=rng.randint(1, 30), k=rng.randint(10, 99), p=rng.randint(5, 50)))
    return " ".join(body).capitalize() + "."


def _uniform_corpus(n_sections: int, seed: int) -> dict[str, dict[str, str]]:
    rng = random.Random(seed)
    words = _uniform_vocabulary(rng)
    corpus = {}
    for i in range(n_sections):
        topic = rng.sample(words, 12)
        sentences = [_uniform_sentence(rng, topic, words) for _ in range(rng.randint(6, 9))]
        corpus[f"S-{i}"] = {"title": " ".join(topic[:3]), "text": " ".join(sentences)}
    return corpus


def _uniform_cases(corpus: dict[str, dict[str, str]], n_cases: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    words = _uniform_vocabulary(rng)
    ids = list(corpus)
    cases = []
    for j in range(n_cases):
        target = rng.choice(ids)
        sentence = rng.choice(corpus[target]["text"].split(". "))
        tokens = [t for t in sentence.rstrip(".").split() if t.isalpha()]
        question = " ".join(rng.sample(tokens, min(4, len(tokens))) + rng.sample(words, 4)) + "?"
        cases.append({"id": f"b{j}", "question": question, "expected_sections": [target],
                      "expected_answer": sentence.rstrip(".") + ".", "source": "bench",
                      "slice": {"type": "lookup", "numeric": any(c.isdigit() for c in sentence)},
                      "tags": ["pr"] if j % 4 == 0 else []})
    return cases


def make_corpus(n_sections: int, seed: int = 0, *, zipf: bool = False) -> dict[str, dict[str, str]]:
    return (_zipf_corpus if zipf else _uniform_corpus)(n_sections, seed)


def make_cases(corpus: dict[str, dict[str, str]], n_cases: int, seed: int = 1, *, zipf: bool = False) -> list[dict]:
    return (_zipf_cases if zipf else _uniform_cases)(corpus, n_cases, seed)


def _yaml_case(case: dict) -> str:
    d = json.dumps
    numeric = "true" if case["slice"]["numeric"] else "false"
    return (f"  - id: {case['id']}\n    question: {d(case['question'], ensure_ascii=False)}\n"
            f"    expected_sections: [{case['expected_sections'][0]}]\n"
            f"    expected_answer: {d(case['expected_answer'], ensure_ascii=False)}\n"
            f"    source: {case['source']}\n    slice: {{type: lookup, numeric: {numeric}}}\n"
            f"    tags: [{', '.join(case['tags'])}]\n")


def write_golden(folder: Path, corpus: dict[str, dict[str, str]], n_cases: int, *, golden_format: str = "json",
                 top_k: int = 5, name: str = "", zipf: bool = False) -> Path:
    """A golden set of ``n_cases`` over ``corpus`` and the rageval{name}.yml that runs it; returns the config."""
    cases = make_cases(corpus, n_cases, zipf=zipf)
    if golden_format == "yaml":
        golden = folder / f"golden{name}.yaml"
        golden.write_text("dataset: bench\nversion: 1\ncases:\n" + "".join(_yaml_case(c) for c in cases),
                          encoding="utf-8")
    else:
        golden = folder / f"golden{name}.json"
        golden.write_text(json.dumps({"dataset": "bench", "version": 1, "cases": cases}, ensure_ascii=False),
                          encoding="utf-8")
    cfg = folder / f"rageval{name}.yml"
    cfg.write_text(f"golden: {golden.name}\ncorpus: corpus.json\nchunking: {{size: 200}}\n"
                   f"retrieval: {{top_k: {top_k}, k: [1, 3, 5]}}\napp: {{concurrency: 2}}\n", encoding="utf-8")
    return cfg


def write_project(folder: Path, n_sections: int, n_cases: int | list[int], *, golden_format: str = "json",
                  top_k: int = 5, zipf: bool = False) -> Path:
    """corpus.json, then for one number of cases golden.json (or .yaml) and rageval.yml; for a list,
    golden-{M}.json and rageval-{M}.yml for each M. Returns the (first) config path."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = make_corpus(n_sections, zipf=zipf)
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    if isinstance(n_cases, int):
        return write_golden(folder, corpus, n_cases, golden_format=golden_format, top_k=top_k, zipf=zipf)
    return [write_golden(folder, corpus, m, golden_format=golden_format, top_k=top_k, name=f"-{m}", zipf=zipf)
            for m in n_cases][0]


if __name__ == "__main__":
    # python bench/synthetic.py FOLDER SECTIONS CASES [json|yaml] [zipf]: golden.json, rageval.yml;
    # CASES with a comma ("1000,5000" or "1000,"): golden-M.json and rageval-M.yml for each M
    folder, sections, cases, *rest = sys.argv[1:]
    counts = [int(c) for c in cases.split(",") if c]
    print(write_project(Path(folder), int(sections), counts if "," in cases else counts[0],
                        golden_format=next((r for r in rest if r in ("json", "yaml")), "json"), zipf="zipf" in rest))
