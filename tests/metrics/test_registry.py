"""The registry of checks and metrics: one declaration is enough for a new check or metric to be
made by the runner, kept in the RunResult, validated in gate thresholds, gated and shown in the
comment — shown here with toy declarations registered by a test, no other file touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rageval.config import load_config
from rageval.errors import ConfigError
from rageval.metrics import registry
from rageval.metrics.registry import (
    MODEL,
    REGISTRY,
    RULE,
    Check,
    Metric,
    RetrievalFamily,
    parse_metric,
    registered,
)
from rageval.pipeline.runner import prepare
from rageval.records import CheckResult

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "banhang"
MAX_WORDS = 25


def _short(x: registry.CaseInput) -> CheckResult:
    if x.answer is None:
        return CheckResult.skipped("no answer")
    n = len(x.answer.split())
    return CheckResult.ok(f"{n} words") if n <= MAX_WORDS else CheckResult.fail(f"{n} words > {MAX_WORDS}")


SHORT = Check("short", f"the answer is at most {MAX_WORDS} words", RULE, _short,
              feeds=(Metric("short_pass", f"share of cases answered in at most {MAX_WORDS} words"),))


def _precision_at(ranking, expected, k):
    top = ranking[:k]
    return sum(1 for sections in top if expected & set(sections)) / k if k else 0.0


PRECISION = RetrievalFamily("prec", "share of the top k chunks that are relevant", "|relevant in top k| / k",
                            _precision_at)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "banhang"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".rageval-cache"))
    return root


def _word_counts(run_json: dict) -> dict[str, int]:
    return {c["id"]: len(c["answer"].split()) for c in run_json["cases"] if c.get("answer") is not None}


def test_a_toy_check_reaches_the_runresult_the_gate_and_the_comment(project, run_cli, tmp_path):
    with registered(SHORT):
        code, _, err = run_cli("run", project, "--subset", "pr", "--out", tmp_path / "base.json")
        assert code == 0, err
        base = json.loads((tmp_path / "base.json").read_text(encoding="utf-8"))
        counts = _word_counts(base)
        expected_rate = round(sum(1 for n in counts.values() if n <= MAX_WORDS) / len(counts), 6)
        assert 0 < expected_rate < 1, "the toy check must split the demo's answers to show anything"
        # every case carries the check, after the rules and before the judge (the registry's order)
        for case in base["cases"]:
            names = list(case["checks"])
            assert names.index("refusal") < names.index("short") < names.index("judge")
            words = len(case["answer"].split())
            assert case["checks"]["short"]["status"] == ("pass" if words <= MAX_WORDS else "fail")
        assert base["summary"]["metrics"]["short_pass"] == expected_rate
        assert all("short_pass" in s["metrics"] for s in base["summary"]["by_slice"].values())

        # the gate validates and applies a floor on it, and the comment shows it
        cfg = project / "rageval.yml"
        floors = "floors: {hit@3: 0.95, mrr@5: 0.85}"
        text = cfg.read_text(encoding="utf-8")
        assert floors in text
        cfg.write_text(text.replace(floors, f"floors: {{hit@3: 0.95, mrr@5: 0.85, short_pass: {expected_rate + 0.01}}}"),
                       encoding="utf-8")
        code, out, err = run_cli("gate", project, "--subset", "pr", "--baseline", tmp_path / "base.json",
                                 "--report-md", tmp_path / "comment.md", "--out", tmp_path / "verdict.json")
        assert code == 1, out + err
        assert f"short_pass {expected_rate:.2f} < {expected_rate + 0.01:.2f}" in out
        comment = (tmp_path / "comment.md").read_text(encoding="utf-8")
        assert "| short_pass |" in comment
        verdict = json.loads((tmp_path / "verdict.json").read_text(encoding="utf-8"))
        assert any(r["rule"] == "floor" and r["metric"] == "short_pass" for r in verdict["reasons"])
    # gone again: the name is unknown to the config reader and to the runner
    with pytest.raises(ConfigError, match="unknown metric 'short_pass'"):
        load_config(cfg)
    assert "short" not in REGISTRY.checks and "short_pass" not in REGISTRY.metrics


def test_a_toy_retrieval_family_is_measured_at_every_cut_off(project):
    with registered(PRECISION):
        cfg = load_config(project / "rageval.yml")
        assert [n for n in cfg.metric_names() if n.startswith("prec@")] == [
            *(f"prec@{k}" for k in cfg.retrieval.k), *(f"prec@{b}tok" for b in cfg.retrieval.token_budgets)]
        result = prepare(cfg, env={}, subset="pr").run()
        case = next(c for c in result.cases if c.first_relevant_rank == 1 and len(c.expected_sections) == 1)
        assert case.metrics["prec@1"] == 1.0
        # hand-computed from the ranking the run recorded
        relevant = [bool(set(r.sections) & set(case.expected_sections)) for r in case.retrieved[:3]]
        assert case.metrics["prec@3"] == pytest.approx(sum(relevant) / 3, abs=1e-6)
        assert result.summary.metrics["prec@1"] is not None
        assert str(parse_metric("prec@600tok")) == "prec@600tok"
    with pytest.raises(ValueError, match="unknown metric 'prec@3'"):
        parse_metric("prec@3")


def test_a_name_is_declared_once():
    with pytest.raises(ValueError, match="'numbers' is declared twice"):
        registry.register(Check("numbers", "again", RULE, _short))
    with pytest.raises(ValueError, match="'pass_rate' is declared twice"):
        registry.register(Metric("pass_rate", "again"))
    with pytest.raises(ValueError, match="'hit' is declared twice"):
        registry.register(RetrievalFamily("hit", "again", "", _precision_at))
    with pytest.raises(ValueError, match="'judge_pass' is declared twice"):   # a metric a check already feeds
        registry.register(Check("judge2", "again", MODEL, _short, feeds=(Metric("judge_pass", "again"),)))
    assert "judge2" not in REGISTRY.checks


def test_what_the_rest_of_rageval_reads_is_derived_from_the_declarations():
    assert registry.rule_check_names() == ["numbers", "must_include", "must_not_include", "refusal"]
    assert [c.name for c in REGISTRY.ordered_checks()] == [
        "retrieval", "numbers", "must_include", "must_not_include", "refusal", "judge", "faithfulness"]
    assert registry.summary_metric_names() == ["context_tokens", "pass_rate", "numbers_pass", "rules_pass",
                                               "refusal_pass", "judge_pass", "faithfulness", "groundedness"]
    assert registry.zero_tolerance_names() == ("numbers",)
    assert registry.judged_metric_names() == ("judge_pass", "faithfulness", "groundedness")
    assert registry.metrics_fed_by("must_not_include") == ("rules_pass",)
    assert registry.from_retrieval("context_tokens") and registry.from_retrieval("ndcg@5")
    assert not registry.from_retrieval("pass_rate") and not registry.from_retrieval("numbers_pass")
    assert registry.metric_bounds("context_tokens") == (0.0, None)
    assert registry.metric_bounds("mrr@5") == registry.metric_bounds("judge_pass") == (0.0, 1.0)


def test_zero_tolerance_lists_only_checks_declared_so(project):
    cfg = project / "rageval.yml"
    text = cfg.read_text(encoding="utf-8")
    bad = text.replace("zero_tolerance: [numbers]", "zero_tolerance: [numbers, short]")
    assert bad != text
    cfg.write_text(bad, encoding="utf-8")
    with pytest.raises(ConfigError, match="gate.zero_tolerance' must be one of numbers, got 'short'"):
        load_config(cfg)
    toy = Check("short", "x", RULE, _short, zero_tolerance=True)
    with registered(toy):
        assert load_config(cfg).gate.zero_tolerance == ("numbers", "short")
