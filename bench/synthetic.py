"""Synthetic projects for the benchmarks: a policy-like corpus of N sections and a golden set of
M cases over it, written as a rageval project (rageval.yml, corpus.json, golden file).

Each section is a heading and 6–9 sentences of Vietnamese-looking words drawn from a topic
vocabulary (~150 tokens); about one sentence in three states a quantity ("trong 7 ngày", "phí
30.000 đồng", "giảm 15%"), so the extractive generator, the number rule and policy-drift
snapshots have real work. A case asks four words of one sentence of its section among four
unrelated ones, expects that section, and expects the sentence as its answer. Everything is
drawn from one seeded generator: the same arguments give the same bytes.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SYLLABLES = ("doi tra hang hoan tien giao van chuyen bao hanh thanh vien phi don kho ngay thang "
             "dien thoai laptop may tinh bang ao quan giay the qua tang thuc pham do lot ma giam "
             "gia tri noi thanh lien tinh hoa toc dia chi kiem tra phu kien sua chua linh kien "
             "hoa don tem nhan loi nha san xuat khach hang cua hang tai khoan thanh toan").split()
QUANTITIES = ("trong {n} ngày", "trong {n} ngày làm việc", "phí {k}.000 đồng", "giảm {p}%", "sau {n} tháng")


def _vocabulary(rng: random.Random) -> list[str]:
    words = sorted({a + b for a in SYLLABLES for b in SYLLABLES if a != b})
    rng.shuffle(words)
    return words


def _sentence(rng: random.Random, topic: list[str], words: list[str]) -> str:
    body = [rng.choice(topic if rng.random() < 0.6 else words) for _ in range(rng.randint(12, 20))]
    if rng.random() < 0.35:
        body.append(rng.choice(QUANTITIES).format(n=rng.randint(1, 30), k=rng.randint(10, 99), p=rng.randint(5, 50)))
    return " ".join(body).capitalize() + "."


def make_corpus(n_sections: int, seed: int = 0) -> dict[str, dict[str, str]]:
    rng = random.Random(seed)
    words = _vocabulary(rng)
    corpus = {}
    for i in range(n_sections):
        topic = rng.sample(words, 12)
        sentences = [_sentence(rng, topic, words) for _ in range(rng.randint(6, 9))]
        corpus[f"S-{i}"] = {"title": " ".join(topic[:3]), "text": " ".join(sentences)}
    return corpus


def make_cases(corpus: dict[str, dict[str, str]], n_cases: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    words = _vocabulary(rng)
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


def _yaml_case(case: dict) -> str:
    d = json.dumps
    numeric = "true" if case["slice"]["numeric"] else "false"
    return (f"  - id: {case['id']}\n    question: {d(case['question'], ensure_ascii=False)}\n"
            f"    expected_sections: [{case['expected_sections'][0]}]\n"
            f"    expected_answer: {d(case['expected_answer'], ensure_ascii=False)}\n"
            f"    source: {case['source']}\n    slice: {{type: lookup, numeric: {numeric}}}\n"
            f"    tags: [{', '.join(case['tags'])}]\n")


def write_project(folder: Path, n_sections: int, n_cases: int, *, golden_format: str = "json",
                  top_k: int = 5) -> Path:
    """corpus.json, golden.json or golden.yaml, rageval.yml in ``folder``; returns the config path."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = make_corpus(n_sections)
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    cases = make_cases(corpus, n_cases)
    if golden_format == "yaml":
        golden = folder / "golden.yaml"
        golden.write_text("dataset: bench\nversion: 1\ncases:\n" + "".join(_yaml_case(c) for c in cases),
                          encoding="utf-8")
    else:
        golden = folder / "golden.json"
        golden.write_text(json.dumps({"dataset": "bench", "version": 1, "cases": cases}, ensure_ascii=False),
                          encoding="utf-8")
    cfg = folder / "rageval.yml"
    cfg.write_text(f"golden: {golden.name}\ncorpus: corpus.json\nchunking: {{size: 200}}\n"
                   f"retrieval: {{top_k: {top_k}, k: [1, 3, 5]}}\napp: {{concurrency: 2}}\n", encoding="utf-8")
    return cfg


if __name__ == "__main__":          # python bench/synthetic.py FOLDER SECTIONS CASES [json|yaml]
    folder, sections, cases, *fmt = sys.argv[1:]
    print(write_project(Path(folder), int(sections), int(cases), golden_format=fmt[0] if fmt else "json"))
