"""The seed article's worked incident, replayed through `rageval run`: the printed table and the
per-case verdicts must be the article's (shared/seeds/000_…, sections 4 and 5)."""

import json

import pytest

# The article's table, 2 decimals: hit@1, hit@3, recall@3, mrr@5.
SEED_TABLE = {"chunk-200": {"hit@1": "0.80", "hit@3": "1.00", "recall@3": "1.00", "mrr@5": "0.90"},
              "chunk-800": {"hit@1": "0.40", "hit@3": "1.00", "recall@3": "1.00", "mrr@5": "0.63"}}
SEED_RANKS = {"chunk-200": {"q01": 1, "q02": 1, "q03": 1, "q04": 2, "q05": 1},
              "chunk-800": {"q01": 3, "q02": 1, "q03": 3, "q04": 2, "q05": 1}}


def printed_table(stdout):
    """Metric name → printed value, from the header/value line pairs `rageval run` prints."""
    lines = stdout.splitlines()
    table = {}
    for head, values in zip(lines, lines[1:]):
        names, vals = head.split(), values.split()
        if names and "@" in names[0] and len(names) == len(vals):
            table.update(zip(names, vals))
    return table


@pytest.mark.parametrize("config", ["chunk-200", "chunk-800"])
def test_run_prints_and_writes_the_seed_table(seed_project, run_cli, tmp_path, config):
    out = tmp_path / f"{config}.json"
    code, stdout, _ = run_cli("run", "--config", seed_project[config], "--out", out)
    assert code == 0
    table = printed_table(stdout)
    for metric, value in SEED_TABLE[config].items():
        assert table[metric] == value, metric
    result = json.loads(out.read_text(encoding="utf-8"))
    for metric, value in SEED_TABLE[config].items():
        assert f"{result['summary']['metrics'][metric]:.2f}" == value
    ranks = {c["id"]: c["first_relevant_rank"] for c in result["cases"]}
    assert ranks == SEED_RANKS[config]


def test_ndcg_of_q05_at_chunk_800(seed_project, run_cli, tmp_path):
    out = tmp_path / "r.json"
    run_cli("run", "--config", seed_project["chunk-800"], "--out", out)
    q05 = next(c for c in json.loads(out.read_text())["cases"] if c["id"] == "q05")
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) ≈ 1.631 → ≈ 0.92 (the article's value)
    assert q05["metrics"]["ndcg@5"] == pytest.approx(1.5 / (1 + 1 / 1.5849625007211562), abs=1e-6)
    assert f"{q05['metrics']['ndcg@5']:.2f}" == "0.92"
    # L2 holds DT-3 (rank 1), L1 holds DT-2 (rank 3): recall@1 = 1/2
    assert q05["metrics"]["recall@1"] == 0.5


@pytest.mark.parametrize("case_id, config, passed, missing, outside", [
    ("q01", "chunk-200", True, [], []),
    ("q01", "chunk-800", False, ["7 ngày"], ["30 ngày"]),
    ("q03", "chunk-800", False, ["5 ngày làm việc"], ["5 ngày"]),
    ("q04", "chunk-800", True, [], []),
    ("q05", "chunk-800", True, [], []),
])
def test_number_rule_verdicts_on_the_seed_answers(seed_project, run_cli, tmp_path, case_id, config, passed,
                                                 missing, outside):
    out = tmp_path / "r.json"
    run_cli("run", "--config", seed_project[config], "--out", out)
    case = next(c for c in json.loads(out.read_text())["cases"] if c["id"] == case_id)
    numbers = case["checks"]["numbers"]
    assert numbers["passed"] is passed
    assert numbers["missing"] == missing
    assert numbers["outside_source"] == outside
    assert case["passed"] is passed


def test_seed_q05_at_chunk_200_shows_hit_vs_recall(seed_project, run_cli, tmp_path):
    # The article: q05 at chunk-200 returns c03 (DT-3) then c02 (DT-2): hit@1 = 1, recall@1 = 0.5, RR = 1.
    out = tmp_path / "r.json"
    run_cli("run", "--config", seed_project["chunk-200"], "--out", out)
    cases = {c["id"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases["q05"]["metrics"]["hit@1"] == 1.0
    assert cases["q05"]["metrics"]["recall@1"] == 0.5
    assert cases["q05"]["metrics"]["recall@3"] == 1.0
    assert cases["q05"]["metrics"]["mrr@5"] == 1.0
    # q04: the relevant chunk is at rank 2: hit@1 = 0, RR = 0.5.
    assert cases["q04"]["metrics"]["hit@1"] == 0.0
    assert cases["q04"]["metrics"]["mrr@5"] == 0.5
