"""rageval.gate.stats: McNemar (hand values + scipy cross-check), paired bootstrap, noise helpers."""

from __future__ import annotations

import numpy as np
import pytest
from builders import case, run

from rageval.gate import stats
from rageval.records import CheckResult

STATUS = {"pass": CheckResult.ok(""), "fail": CheckResult.fail("wrong number"), "skipped": CheckResult.skipped("none"),
          "error": CheckResult.error("timeout")}


def _case(cid, *, passed=True, numbers="pass", mrr=1.0, error=None, tokens=100):
    return case(cid, passed=passed, error=error, context_tokens=tokens, metrics={"mrr@5": mrr},
                checks={"numbers": STATUS[numbers], "judge": STATUS["skipped"]})


def _run(*cases):
    return run(list(cases), metric_names=("mrr@5",))


# --- McNemar ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("b", "c", "p"), [
    (0, 0, 1.0),                 # no discordant pairs
    (2, 0, 0.5),                 # 2 · (1/4)
    (5, 0, 0.0625),              # 2 · (1/32)
    (0, 5, 0.0625),              # symmetric
    (10, 2, 2 * 79 / 4096),      # 2 · (1 + 12 + 66) / 2^12 = 0.03857
    (3, 3, 1.0),                 # 2 · 42/64 > 1, capped
    (1, 0, 1.0),
])
def test_mcnemar_exact_hand_values(b, c, p):
    assert stats.mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_exact_agrees_with_scipy_binomtest():
    scipy_stats = pytest.importorskip("scipy.stats")
    for b in range(0, 25, 3):
        for c in range(0, 25, 4):
            if b + c == 0:
                continue
            expected = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
            assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9), (b, c)


def test_mcnemar_exact_large_counts_stay_finite():
    assert 0.0 < stats.mcnemar_exact(600, 500) < 0.01
    with pytest.raises(ValueError, match="non-negative"):
        stats.mcnemar_exact(-1, 2)


def test_mcnemar_from_pass_maps_counts_missing_cases_as_failures_and_skips_errors():
    before = {"a": True, "b": True, "c": False, "d": True, "e": None}
    after = {"a": False, "c": True, "d": None, "e": True}          # b missing, d errored
    result = stats.mcnemar(before, after)
    assert (result.b, result.c) == (2, 1)                           # a and b; c
    assert result.p == pytest.approx(1.0)
    assert result.to_dict() == {"b": 2, "c": 1, "p": 1.0}


# --- paired bootstrap ------------------------------------------------------------------------

def test_bootstrap_is_reproducible_with_a_fixed_seed():
    rng = np.random.default_rng(7)
    before = rng.random(40)
    after = before - 0.1 + rng.normal(0, 0.05, 40)
    first = stats.paired_bootstrap(before, after)
    assert first == stats.paired_bootstrap(before, after, seed=0, resamples=2000)
    assert stats.paired_bootstrap(before, after, seed=1) != first


def test_bootstrap_ci_contains_the_true_delta():
    # after − before is 0.2 ± 0.1 in equal measure: the sample mean delta is exactly 0.2
    before = np.linspace(0.0, 0.5, 30)
    after = before + 0.2 + np.tile([0.1, -0.1], 15)
    ci = stats.paired_bootstrap(before, after)
    assert ci.delta == pytest.approx(0.2)
    assert ci.low < 0.2 < ci.high and ci.low > 0.15 and ci.high < 0.25
    # a wider interval at higher confidence
    wide = stats.paired_bootstrap(before, after, confidence=0.99)
    assert wide.low <= ci.low and wide.high >= ci.high


def test_bootstrap_constant_difference_has_a_point_interval_and_empty_is_none():
    ci = stats.paired_bootstrap([1.0, 0.5, 0.0], [0.5, 0.0, -0.5])
    assert (ci.delta, ci.low, ci.high, ci.n) == (-0.5, -0.5, -0.5, 3)
    assert stats.paired_bootstrap([], []) is None
    with pytest.raises(ValueError, match="equal-length"):
        stats.paired_bootstrap([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="confidence"):
        stats.paired_bootstrap([1.0], [1.0], confidence=1.5)


def test_bootstrap_deltas_pairs_cases_by_id_over_the_common_cases():
    baseline = _run(_case("q1", mrr=1.0), _case("q2", mrr=1.0), _case("q3", mrr=0.5))
    candidate = _run(_case("q2", mrr=0.5), _case("q1", mrr=1 / 3), _case("q4", mrr=0.0))
    result = stats.bootstrap_deltas(baseline, candidate, ["mrr@5", "pass_rate", "judge_pass"])
    assert result["mrr@5"].delta == pytest.approx(((1 / 3 - 1) + (0.5 - 1)) / 2)
    assert result["pass_rate"].delta == 0.0
    assert "judge_pass" not in result                              # skipped everywhere: no values


def test_bootstrap_means_are_those_of_the_seeded_resamples():
    # the definition, computed the plain way: draw resamples × n indices from the seed, average
    # the resampled differences, take the percentiles
    rng = np.random.default_rng(11)
    before, after = rng.random(37), rng.random(37)
    idx = np.random.default_rng(3).integers(0, 37, size=(500, 37))
    means = (after - before)[idx].mean(axis=1)
    low, high = np.percentile(means, [5.0, 95.0])
    ci = stats.paired_bootstrap(before, after, resamples=500, seed=3, confidence=0.9)
    assert (ci.delta, ci.low, ci.high, ci.n) == ((after - before).mean(), low, high, 37)
    hits_before, hits_after = rng.integers(0, 2, 301).astype(float), rng.integers(0, 2, 301).astype(float)
    idx = np.random.default_rng(0).integers(0, 301, size=(2000, 301))
    low, high = np.percentile((hits_after - hits_before)[idx].mean(axis=1), [2.5, 97.5])
    ci = stats.paired_bootstrap(hits_before, hits_after)
    assert (ci.low, ci.high) == (low, high)


def test_bootstrap_deltas_give_each_metric_its_own_bootstrap():
    # metrics with as many pairs are resampled together, and each gets paired_bootstrap's interval, to the bit
    rng = np.random.default_rng(5)
    base = _run(*(_case(f"q{i}", mrr=float(rng.random()), numbers="pass" if i % 3 else "skipped",
                        tokens=int(rng.integers(50, 150))) for i in range(60)))
    cand = _run(*(_case(f"q{i}", mrr=float(rng.random()), passed=bool(i % 4), numbers="fail" if i % 5 else "pass",
                        tokens=int(rng.integers(50, 150))) for i in range(60)))
    metrics = ["mrr@5", "numbers_pass", "context_tokens", "pass_rate"]
    together = stats.bootstrap_deltas(base, cand, metrics)
    assert list(together) == metrics
    assert together["numbers_pass"].n == 40 and together["mrr@5"].n == 60
    for metric in metrics:
        assert together[metric] == stats.paired_bootstrap(*stats.paired_values(base, cand, metric))


def test_case_values_are_those_of_the_run_as_replaced():
    result = _run(_case("a", mrr=0.5), _case("b", mrr=0.25))
    assert stats.case_values(result, "mrr@5") == {"a": 0.5, "b": 0.25}
    fewer = result.replace(cases=result.cases[1:])
    assert stats.case_values(fewer, "mrr@5") == {"b": 0.25}
    assert stats.case_values(fewer.replace(created_at="then"), "mrr@5") == {"b": 0.25}
    assert stats.case_values(result, "mrr@5") == {"a": 0.5, "b": 0.25}


# --- per-case values -------------------------------------------------------------------------

def test_case_values_follow_the_summary_rules():
    result = _run(_case("a"), _case("b", passed=False, numbers="fail", mrr=0.5),
                  _case("c", error="timeout"), _case("d", numbers="skipped"))
    assert stats.case_values(result, "pass_rate") == {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0}
    # skipped checks and errored cases are left out of a check rate, as in the summary
    assert stats.case_values(result, "numbers_pass") == {"a": 1.0, "b": 0.0}
    assert stats.case_values(result, "mrr@5") == {"a": 1.0, "b": 0.5, "c": 1.0, "d": 1.0}
    assert stats.case_values(result, "hit@3") == {}
    assert stats.case_values(result, "judge_pass") == {}
    assert stats.case_values(result, "context_tokens") == {"a": 100.0, "b": 100.0, "d": 100.0}
    assert stats.case_values(result, "not-a-metric") == {}
    # and so the summary is always the mean of the case values
    for metric in ("pass_rate", "numbers_pass", "mrr@5", "context_tokens"):
        values = stats.case_values(result, metric)
        assert result.summary.metrics[metric] == pytest.approx(sum(values.values()) / len(values))


# --- noise -----------------------------------------------------------------------------------

def test_sigma_over_runs_is_the_sample_standard_deviation():
    runs = [{"mrr@5": 0.88, "pass_rate": 0.5}, {"mrr@5": 0.90, "pass_rate": None}, {"mrr@5": 0.92}]
    sigma = stats.sigma_over_runs(runs)
    assert sigma["mrr@5"] == pytest.approx(0.02)                   # ddof=1: sqrt((0.02² + 0 + 0.02²) / 2)
    assert "pass_rate" not in sigma                                 # one value: noise not measured
    assert stats.sigma_over_runs([]) == {}


def test_sigma_diff_and_run_sigma():
    assert stats.sigma_diff(0.03, 0.04) == pytest.approx(0.05)
    assert stats.sigma_diff(None, 0.02) == pytest.approx(0.02)
    assert stats.sigma_diff(1e308, 1e308) == pytest.approx(1.4142135623730951e308)   # no overflow
    assert run([case("q1")], sigma={"mrr@5": 0.01}).sigma("mrr@5") == 0.01
    assert run([case("q1")]).sigma("mrr@5") == 0.0


def test_flaky_cases_are_those_whose_outcome_differs_across_runs():
    runs = [{"q1": True, "q2": True, "q3": False, "q4": None},
            {"q1": False, "q2": True, "q3": False, "q4": True},
            {"q1": True, "q2": True, "q3": True, "q5": False}]
    assert stats.flaky_cases(runs) == ["q1", "q3"]
    assert stats.flaky_cases([]) == []


def test_mean_or_none():
    assert stats.mean_or_none([0.5, None, 1.0]) == 0.75
    assert stats.mean_or_none([None]) is None
