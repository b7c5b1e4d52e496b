"""The offline engine gives the same results as before it was made fast, and the same bytes
whatever the process's hash seed.

- The builtin app's per-case results on the demo (both configs) and on the seed incident's
  policy match those the engine computed before it was made fast (made with :func:`capture` on
  main at commit 3a91833: tests/data/engine-reference/builtin-results.json): retrieved chunks and
  scores, first relevant ranks, metrics, answers, verdicts.
- `rageval run --reproducible` on the demo under two PYTHONHASHSEED values writes the same
  RunResult, byte for byte (the clock left out: created_at from SOURCE_DATE_EPOCH, no timings,
  no latencies).
- The extractive generator breaks exact ties by position, never by set iteration order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import seed_data

from rageval.config import load_config
from rageval.pipeline.generation import ExtractiveGenerator
from rageval.pipeline.runner import prepare
from rageval.records import Retrieved

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "data" / "engine-reference" / "builtin-results.json"


def capture(cfg_path: Path, subset: str | None = None) -> dict:
    """What the reference file holds for one config: summary metrics and, per case, the
    retrieved (chunk id, score) pairs, first relevant rank, metrics, answer and verdict."""
    result = prepare(load_config(cfg_path), env={}, subset=subset).run()
    cases = {c.id: {"retrieved": [[r.chunk_id, r.score] for r in (c.retrieved or ())],
                    "first_relevant_rank": c.first_relevant_rank, "metrics": dict(c.metrics),
                    "answer": c.answer, "passed": c.passed} for c in result.cases}
    return {"summary": dict(result.summary.to_dict()["metrics"]), "cases": cases}


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("config", ["rageval.yml", "rageval-800.yml"])
def test_demo_results_are_those_of_the_engine_before(reference, config):
    now = capture(ROOT / "examples" / "banhang" / config)
    before = reference[f"banhang/{config}"]
    assert now["summary"] == before["summary"]
    assert set(now["cases"]) == set(before["cases"])
    for case_id, case in before["cases"].items():
        assert now["cases"][case_id] == case, case_id


@pytest.mark.parametrize("size", [30, 80])
def test_seed_incident_builtin_results_are_those_of_the_engine_before(reference, tmp_path, size):
    seed_data.write_project(tmp_path)
    cfg = tmp_path / f"builtin-{size}.yml"
    cfg.write_text(f"golden: golden.json\ncorpus: corpus.yaml\nchunking: {{size: {size}, merge_sections: true}}\n"
                   "retrieval: {top_k: 5, k: [1, 3, 5]}\n", encoding="utf-8")
    assert capture(cfg) == reference[f"seed/builtin-{size}"]


# --- hash seeds and clocks -------------------------------------------------------------------

def test_demo_run_is_byte_identical_under_two_hash_seeds(tmp_path):
    """Two `rageval run --reproducible` of the demo, under different hash seeds and working
    folders, with SOURCE_DATE_EPOCH set: the two files are the same bytes, as they are written."""
    procs = []
    for seed in ("1", "2"):
        out, cwd = tmp_path / f"seed-{seed}.json", tmp_path / f"cwd-{seed}"
        cwd.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed, "SOURCE_DATE_EPOCH": "1764547200"}
        procs.append((out, subprocess.Popen(
            [sys.executable, "-m", "rageval", "run", "--config", str(ROOT / "examples/banhang/rageval.yml"),
             "--out", str(out), "--reproducible"], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)))
    files = []
    for out, proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        files.append(out.read_bytes())
    data = json.loads(files[0])
    assert len(data["cases"]) == 123
    assert data["created_at"] == "2025-12-01T00:00:00Z"       # date -u -d @1764547200
    assert data["timings"] == {} and {c["latency_ms"] for c in data["cases"]} == {None}
    assert files[0] == files[1]


# --- ties in the extractive generator --------------------------------------------------------

def _tie(i: int) -> tuple[str, str]:
    """A question and a context where two sentences cover the question exactly equally: the
    first states words of document frequency 1, 2 and 3, the second three other words with the
    same document frequencies. Summed in set order, the two equal totals can differ in the last
    bit, and which one wins then depends on the hash seed."""
    a, b, c, d, e, f = (f"{w}{i}" for w in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot"))
    context = "\n".join([f"{a} {b} {c} one.", f"{d} {e} {f} two.", f"{b} {e} three.", f"{c} {f} four.",
                         f"{c} {f} five."])
    return f"{a} {b} {c} {d} {e} {f}", context


def test_exact_ties_go_to_the_earlier_sentence():
    generator = ExtractiveGenerator(max_sentences=1)
    answers = set()
    for i in range(200):
        question, context = _tie(i)
        chunk = Retrieved("c1", ("S-1",), context, 1.0, 20)
        answers.add(generator.generate(question, [chunk], case_id=f"t{i}").answer.split()[-1])
    assert answers == {"one."}
