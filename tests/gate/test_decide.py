"""The gate on RunResults built from records (tests/builders.py): the seeds' incident, noise, re-runs, comparability,
slices, errors, missing cases, significance, and the Verdict's JSON form."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest
from builders import RETRIEVAL, case, rate_cases, run

from rageval.errors import RagevalError
from rageval.gate.decide import config_diff, verdict_on
from rageval.gate.report import fmt
from rageval.gate.verdict import Verdict
from rageval.results import RunResult
from rageval.settings import GateConfig, RerunConfig, SliceGate

# --- builders (tests/builders.py) ---------------------------------------------------------------

def seed_runs() -> tuple[RunResult, RunResult]:
    """The seeds' incident: chunk 200 (baseline) vs chunk 800 + new embedding model (candidate)."""
    q = {"q01": "Mua áo mặc không vừa thì được trả trong mấy ngày?",
         "q02": "laptop moi nhan bi soc man hinh thi doi sao",
         "q03": "Trả hàng rồi bao lâu thì nhận lại tiền?",
         "q04": "Đổi ý không lấy nữa thì có mất phí ship không?",
         "q05": "Điện thoại có được trả trong 30 ngày như quần áo không?"}
    before = run([case(i, r, question=q[i]) for i, r in zip(q, (1, 1, 1, 2, 1))],
                 config={"chunking": {"size": 200}, "embedding": {"provider": "openai", "model": "old"}})
    after = run([case("q01", 3, question=q["q01"], numbers=(["7 ngày"], ["30 ngày"])),
                 case("q02", 1, question=q["q02"]),
                 case("q03", 3, question=q["q03"], numbers=(["5 ngày làm việc"], ["5 ngày"])),
                 case("q04", 2, question=q["q04"]), case("q05", 1, question=q["q05"])],
                config={"chunking": {"size": 800}, "embedding": {"provider": "openai", "model": "old"}})
    return before, after


SEED_GATE = GateConfig(floors={"hit@3": 0.95, "mrr@5": 0.85}, zero_tolerance=("numbers",))


def row(verdict: Verdict, metric: str) -> dict[str, Any]:
    return next(r for r in verdict.to_dict()["metrics"] if r["metric"] == metric)


def messages(verdict: Verdict, blocking: bool | None = None) -> list[str]:
    return [r.message for r in verdict.reasons if blocking is None or r.blocking == blocking]


# --- the seeds' incident ---------------------------------------------------------------------

def test_seed_incident_blocks_on_mrr_floor_and_numbers():
    before, after = seed_runs()
    verdict = verdict_on(before, after, SEED_GATE)

    assert verdict.verdict == "fail" and verdict.state == "fail" and verdict.comparable
    assert verdict.main_reason.message == "mrr@5 0.63 < 0.85"
    assert messages(verdict, blocking=True) == [
        "mrr@5 0.63 < 0.85",
        "numbers q01: missing 7 ngày; outside source 30 ngày",
        "numbers q03: missing 5 ngày làm việc; outside source 5 ngày",
    ]
    assert [r.to_dict() for r in verdict.rank_drops] == [{"id": "q01", "before": 1, "after": 3},
                                                         {"id": "q03", "before": 1, "after": 3}]
    assert verdict.pass_to_fail == ("q01", "q03") and verdict.fail_to_pass == ()
    # the printed table of section 4
    assert (row(verdict, "hit@1")["baseline"], row(verdict, "hit@1")["candidate"]) == (0.8, 0.4)
    assert fmt(row(verdict, "mrr@5")["baseline"]) == "0.90" and fmt(row(verdict, "mrr@5")["candidate"]) == "0.63"
    assert row(verdict, "mrr@5")["status"] == "fail" and row(verdict, "mrr@5")["threshold"] == {"floor": 0.85}
    assert row(verdict, "hit@3")["status"] == "pass" and row(verdict, "hit@3")["candidate"] == 1.0
    assert row(verdict, "recall@3")["status"] == "pass" and row(verdict, "recall@3")["delta"] == 0.0
    assert {"key": "chunking.size", "before": 200, "after": 800} in verdict.to_dict()["config_diff"]
    assert verdict.to_dict()["stats"]["mcnemar"] == {"b": 2, "c": 0, "p": 0.5}
    assert verdict.to_dict()["stats"]["bootstrap"]["mrr@5"]["delta"] == pytest.approx(-0.2667, abs=1e-4)


def test_seed_baseline_itself_passes_the_floors():
    before, _ = seed_runs()
    verdict = verdict_on(before, before, SEED_GATE)
    assert verdict.verdict == "pass" and verdict.state == "pass" and verdict.reasons == ()


# --- noise -----------------------------------------------------------------------------------

def _mrr_runs(before: float, after: float, sigma: float | None) -> tuple[RunResult, RunResult]:
    def cases(mrr: float) -> list:
        return [case(f"q{i}", metrics={"hit@1": 1.0, "hit@3": 1.0, "recall@3": 1.0, "mrr@5": mrr}) for i in range(5)]
    s = {"mrr@5": sigma} if sigma is not None else None
    return run(cases(before), sigma=s), run(cases(after), sigma=s)


@pytest.mark.parametrize(("after", "sigma", "expected"), [
    (0.85, 0.02, "pass"),    # drop 0.05 < 2·sqrt(2)·0.02 = 0.0566: inside noise
    (0.84, 0.02, "fail"),    # drop 0.06 > 0.0566: just outside
    (0.85, None, "fail"),    # no noise measured: σ = 0, max_drop 0.03 alone
    (0.87, None, "pass"),    # a drop of exactly max_drop passes
    (0.86, 0.0, "fail"),
])
def test_max_drop_tolerance_is_widened_by_noise(after, sigma, expected):
    cfg = GateConfig(max_drop={"mrr@5": 0.03}, noise_k=2)
    verdict = verdict_on(*_mrr_runs(0.90, after, sigma), cfg)
    assert verdict.verdict == expected
    tolerance = max(0.03, 2 * (2 * (sigma or 0.0) ** 2) ** 0.5)
    assert row(verdict, "mrr@5")["threshold"] == {"max_drop": pytest.approx(tolerance, abs=5e-7)}   # the JSON keeps 6 decimals
    if expected == "fail":
        assert verdict.main_reason.rule == "max_drop" and "mrr@5 dropped 0.90 →" in verdict.main_reason.message


def test_noise_band_is_reported_per_metric():
    verdict = verdict_on(*_mrr_runs(0.90, 0.85, 0.02), GateConfig(max_drop={"mrr@5": 0.03}))
    band = verdict.to_dict()["noise"]["mrr@5"]
    assert band["sigma_diff"] == pytest.approx(0.0283, abs=1e-4) and band["band"] == pytest.approx(0.0566, abs=1e-4)
    assert verdict_on(*_mrr_runs(0.90, 0.84, 0.02), GateConfig(max_drop={"mrr@5": 0.03})).reasons[0].message == (
        "mrr@5 dropped 0.90 → 0.84 (Δ −0.06, tolerance 0.06 = 2·σ 0.03)")


# --- re-runs ---------------------------------------------------------------------------------

GEN_CONFIG = {"embedding": {"provider": "local"}, "generation": {"provider": "openai", "model": "gpt"}}


def _rate_run(rate: float, config: dict | None = None) -> RunResult:
    """200 cases whose pass_rate and mrr@5 are both ``rate``."""
    return run(rate_cases(rate), config=config or GEN_CONFIG)


class Recorder:
    """A re-run callback that records its calls and answers from a queue."""

    def __init__(self, *answers: RunResult) -> None:
        self.calls: list[list[str] | None] = []
        self.answers = list(answers)

    def __call__(self, ids: list[str] | None) -> RunResult:
        self.calls.append(None if ids is None else list(ids))
        return self.answers.pop(0)


@pytest.mark.parametrize(("second", "expected"), [(0.915, "pass"), (0.875, "fail")])
def test_near_floor_reruns_the_subset_once_and_decides_on_the_mean(second, expected):
    rerun = Recorder(_rate_run(second), _rate_run(second))
    verdict = verdict_on(None, _rate_run(0.895), GateConfig(floors={"pass_rate": 0.90}), rerun)
    assert rerun.calls == [None]
    assert verdict.verdict == expected
    assert verdict.to_dict()["reran"] == {"targeted": [], "full": True, "runs": {"pass_rate": [0.895, second]}}
    assert row(verdict, "pass_rate")["candidate"] == pytest.approx((0.895 + second) / 2)


def test_rerun_times_bounds_the_full_reruns():
    rerun = Recorder(_rate_run(0.89), _rate_run(0.89), _rate_run(0.89))
    cfg = GateConfig(floors={"pass_rate": 0.90}, rerun=RerunConfig(margin=0.02, times=2))
    verdict = verdict_on(None, _rate_run(0.895), cfg, rerun)
    assert rerun.calls == [None, None] and verdict.verdict == "fail"
    assert verdict.reran.runs["pass_rate"] == (0.895, 0.89, 0.89)


@pytest.mark.parametrize(("metric", "config", "value"), [
    ("mrr@5", GEN_CONFIG, 0.895),                                          # deterministic retrieval
    ("pass_rate", {"embedding": {"provider": "e5"}, "generation": {"provider": "extractive"}}, 0.895),
    ("pass_rate", GEN_CONFIG, 0.70),                                       # far below: no doubt
])
def test_no_rerun_when_it_cannot_change_the_decision(metric, config, value):
    rerun = Recorder()
    verdict = verdict_on(None, _rate_run(value, config), GateConfig(floors={metric: 0.90}), rerun)
    assert rerun.calls == [] and verdict.verdict == "fail" and verdict.reran.full is False


def test_retrieval_metric_is_rerun_when_the_embedder_is_not_deterministic():
    rerun = Recorder(_rate_run(0.92, {"embedding": {"provider": "openai"}}))
    verdict = verdict_on(None, _rate_run(0.895, {"embedding": {"provider": "openai"}}),
                       GateConfig(floors={"mrr@5": 0.90}), rerun)
    assert rerun.calls == [None] and verdict.verdict == "pass"


def test_near_max_drop_reruns_and_decides_on_the_mean_delta():
    cfg = GateConfig(max_drop={"pass_rate": 0.03})
    rerun = Recorder(_rate_run(0.90))
    verdict = verdict_on(_rate_run(0.90), _rate_run(0.86), cfg, rerun)       # Δ −0.04: 0.01 past −0.03
    assert rerun.calls == [None] and verdict.verdict == "pass"
    assert row(verdict, "pass_rate")["delta"] == pytest.approx(-0.02)


def test_a_full_rerun_also_confirms_the_failing_cases_without_another_call():
    # 100 cases; the PR fails the last 11 (pass_rate 0.89, near the 0.90 floor); the re-run passes
    # all but the last 7 (0.93): 4 cases were flaky, 7 stay pass→fail
    def cases(n_fail: int) -> list:
        return [case(f"q{i:02d}", passed=i < 100 - n_fail) for i in range(100)]
    before, after, again = (run(cases(n), config=GEN_CONFIG) for n in (0, 11, 7))
    rerun = Recorder(again)
    verdict = verdict_on(before, after, GateConfig(floors={"pass_rate": 0.90}), rerun)
    assert rerun.calls == [None]
    assert verdict.flaky == ("q89", "q90", "q91", "q92") and verdict.verdict == "pass"
    assert verdict.pass_to_fail == tuple(f"q{i}" for i in range(93, 100))
    assert verdict.to_dict()["reran"] == {"targeted": [f"q{i}" for i in range(89, 100)], "full": True,
                                          "runs": {"pass_rate": [0.89, 0.93]}}


def _case_runs() -> tuple[RunResult, RunResult]:
    before = run([case("q1"), case("q2"), case("q3")], config=GEN_CONFIG)
    after = run([case("q1"), case("q2", passed=False), case("q3", numbers=(["7 ngày"], ["30 ngày"]))],
                config=GEN_CONFIG)
    return before, after


def test_targeted_rerun_moves_cases_that_pass_again_to_flaky():
    before, after = _case_runs()
    rerun = Recorder(run([case("q2"), case("q3")], config=GEN_CONFIG))
    verdict = verdict_on(before, after, GateConfig(zero_tolerance=("numbers",)), rerun)
    assert rerun.calls == [["q2", "q3"]]
    assert verdict.flaky == ("q2", "q3") and verdict.pass_to_fail == ()
    assert verdict.verdict == "pass" and verdict.reran.targeted == ("q2", "q3")


def test_targeted_rerun_keeps_cases_that_fail_again():
    before, after = _case_runs()
    rerun = Recorder(run([case("q2"), case("q3", numbers=(["7 ngày"], ["30 ngày"]))], config=GEN_CONFIG))
    verdict = verdict_on(before, after, GateConfig(zero_tolerance=("numbers",)), rerun)
    assert rerun.calls == [["q2", "q3"]]
    assert verdict.flaky == ("q2",) and verdict.pass_to_fail == ("q3",)
    assert verdict.verdict == "fail" and messages(verdict, True) == ["numbers q3: missing 7 ngày; outside source 30 ngày"]


def test_no_targeted_rerun_for_a_deterministic_pipeline():
    before, after = _case_runs()
    det = {"embedding": {"provider": "local"}, "generation": {"provider": "extractive"}, "judge": {"model": None}}
    after = after.replace(config=det)
    rerun = Recorder()
    verdict = verdict_on(before, after, GateConfig(zero_tolerance=("numbers",)), rerun)
    assert rerun.calls == [] and verdict.pass_to_fail == ("q2", "q3") and verdict.verdict == "fail"


# --- comparability ---------------------------------------------------------------------------

def test_a_golden_change_leaving_too_few_unchanged_cases_is_not_comparable_and_applies_floors_only():
    before, after = seed_runs()
    before = before.replace(golden=replace(before.golden, version=2))
    after = after.replace(cases=tuple(c.replace(question=c.question + " (reworded)") if c.id in ("q02", "q04") else c
                                      for c in after.cases))
    cfg = replace(SEED_GATE, max_drop={"hit@1": 0.01}, not_comparable="pass")
    verdict = verdict_on(before, after, cfg)
    assert verdict.comparable is False and verdict.state == "not_comparable" and verdict.verdict == "fail"
    assert messages(verdict, blocking=False)[0] == (
        "only 3 of the PR's 5 cases are unchanged since the baseline (golden set v2 → v3: 2 changed); at least 10 "
        "are needed to compare (gate.min_common_cases 10, and half of the PR's cases), so only floors and "
        "zero-tolerance apply")
    assert [r.rule for r in verdict.reasons if r.blocking] == ["floor", "zero_tolerance", "zero_tolerance"]
    assert verdict.pass_to_fail == () and verdict.rank_drops == () and verdict.stats.mcnemar is None
    assert row(verdict, "hit@1")["delta"] is None and row(verdict, "hit@1")["baseline"] == 0.8
    golden = verdict.golden
    assert (golden.name, golden.baseline_version, golden.candidate_version, golden.compared_cases) == (
        "banhang-returns", 2, 3, 3)
    # what cannot be compared blocks unless the policy says pass (the default is fail)
    blocked = verdict_on(before, after, replace(cfg, floors={}, zero_tolerance=(), not_comparable=GateConfig().not_comparable))
    assert blocked.verdict == "fail" and [r.rule for r in blocked.blocking_reasons] == ["not_comparable"]


def test_a_version_bump_that_changes_no_case_compares_every_case():
    before, after = seed_runs()
    verdict = verdict_on(before.replace(golden=replace(before.golden, version=2)), after, SEED_GATE)
    assert verdict.comparable and verdict.pass_to_fail == ("q01", "q03")


def test_cases_compare_on_what_they_ask_and_expect_not_on_how_the_snapshot_writes_it():
    # both runs carry a golden snapshot: a case whose tags changed, or whose empty must_include is
    # now left out, still compares; one whose question changed does not
    cases = [case(f"q{i}") for i in range(1, 5)]
    base = {c.id: {"question": c.question, "expected_sections": ["DT-1"], "tags": ["pr"], "must_include": []}
            for c in cases}
    new = {**base, "q1": {**base["q1"], "tags": ["pr", "holdout-later"]},
           "q2": {k: v for k, v in base["q2"].items() if k != "must_include"},
           "q3": {**base["q3"], "question": "Reworded?"}}
    verdict = verdict_on(run(cases, version=2, golden_cases=base), run(cases, golden_cases=new),
                         GateConfig(min_common_cases=1))
    assert verdict.golden.compared_cases == 3 and verdict.comparable
    assert messages(verdict, blocking=False)[0].startswith("golden set v2 → v3: 1 changed; drops, pass→fail cases and "
                                                           "statistics are compared on the 3 unchanged cases")


def test_not_comparable_can_pass():
    before, after = seed_runs()
    before = before.replace(metric_names=("hit@1", "mrr@5"))
    verdict = verdict_on(before, before.replace(metric_names=RETRIEVAL), GateConfig(floors={"hit@3": 0.9}))
    assert (verdict.verdict, verdict.state) == ("pass", "pass")
    assert verdict.reasons[0].message == ("metrics new in this PR, not compared: hit@3, recall@3; compared: the 10 "
                                          "metrics both runs have")


@pytest.mark.parametrize(("policy", "expected"), [("floors_only", "pass"), ("fail", "fail")])
def test_missing_baseline_policy(policy, expected):
    _, after = seed_runs()
    verdict = verdict_on(None, after, GateConfig(floors={"hit@3": 0.95}, missing_baseline=policy))
    assert (verdict.verdict, verdict.state, verdict.comparable) == (expected, "not_comparable", False)
    assert verdict.reasons[0].rule == "missing_baseline" and verdict.reasons[0].blocking == (policy == "fail")
    assert verdict.config_diff == () and verdict.cases_removed == ()


def test_missing_cases_count_as_failures_and_sets_are_compared_on_the_intersection():
    before = run([case("q1"), case("q2", rank=2), case("q3", passed=False)])
    after = run([case("q1"), case("q2", rank=2), case("q9")])
    verdict = verdict_on(before, after, GateConfig())
    assert verdict.cases_removed == ("q3",) and verdict.cases_added == ("q9",)
    assert verdict.pass_to_fail == () and verdict.verdict == "pass"   # q3 failed before: not a regression

    after = run([case("q1"), case("q9")])
    verdict = verdict_on(before, after, GateConfig(max_drop={"mrr@5": 0.0}))
    assert verdict.pass_to_fail == ("q2",) and verdict.cases_removed == ("q2", "q3")
    assert messages(verdict, blocking=True) == ["q2 passed in the baseline and is missing in the candidate"]
    assert row(verdict, "mrr@5")["delta"] == 0.0   # over the common case q1, not 1.0 − 0.75
    assert verdict.stats.mcnemar.b == 1


def test_floor_on_a_metric_with_no_value_blocks():
    _, after = seed_runs()
    verdict = verdict_on(None, after, GateConfig(floors={"judge_pass": 0.9}))
    assert verdict.verdict == "fail"
    assert verdict.main_reason.message == "judge_pass has no value in the candidate (n/a); the floor 0.90 cannot be checked"


# --- slices ----------------------------------------------------------------------------------

def _slice_runs(n_injection: int, injection_pass: bool) -> tuple[RunResult, RunResult]:
    def cases(ok: bool) -> list:
        return ([case(f"a{i}") for i in range(4)]
                + [case(f"i{i}", passed=ok, slice_={"type": "injection"}) for i in range(n_injection)])
    return run(cases(True)), run(cases(injection_pass))


def test_slice_gate_blocks_on_its_own_floor():
    verdict = verdict_on(*_slice_runs(3, False), GateConfig(slices={"type=injection": SliceGate(floors={"pass_rate": 0.9})}))
    assert verdict.verdict == "fail" and verdict.main_reason.message == "slice type=injection: pass_rate 0.00 < 0.90"
    rows = [r for r in verdict.to_dict()["by_slice"] if r["slice"] == "type=injection"]
    assert rows == [{"slice": "type=injection", "metric": "pass_rate", "n_baseline": 3, "n_candidate": 3,
                     "baseline": 1.0, "candidate": 0.0, "delta": -1.0, "threshold": {"floor": 0.9},
                     "gated": True, "status": "fail"}]


def test_slice_with_too_few_cases_is_insufficient_data_not_a_silent_pass():
    cfg = GateConfig(slices={"type=injection": SliceGate(floors={"pass_rate": 0.9})}, min_slice_cases=3)
    verdict = verdict_on(*_slice_runs(2, False), cfg)
    assert (verdict.verdict, verdict.state) == ("pass", "insufficient_data")
    assert messages(verdict) == ["slice type=injection: 2 candidate cases < min_slice_cases 3; its gates were not applied"]
    assert [r["status"] for r in verdict.to_dict()["by_slice"] if r["slice"] == "type=injection"] == ["insufficient_data"]


# --- errors policy ---------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "expected"), [("fail", "fail"), ("ignore", "pass")])
def test_errored_cases_follow_the_errors_policy(policy, expected):
    before = run([case("q1"), case("q2")])
    after = run([case("q1"), case("q2", error="timeout after 60 s")])
    verdict = verdict_on(before, after, GateConfig(errors=policy))
    assert verdict.verdict == expected
    assert messages(verdict) == [f"1 case errored: q2 (gate.errors: {policy})"]
    assert verdict.pass_to_fail == ()     # an error is not a fail


# --- significance ----------------------------------------------------------------------------

def test_significance_pass_rate_uses_mcnemar():
    before = run([case(f"q{i}") for i in range(20)])
    after = run([case(f"q{i}", passed=i >= 2) for i in range(20)])      # 2 flips: p = 0.5
    cfg = GateConfig(max_drop={"pass_rate": 0.05}, significance=0.05)
    verdict = verdict_on(before, after, cfg)
    assert verdict.verdict == "pass" and row(verdict, "pass_rate")["status"] == "warn"
    assert "not significant: McNemar p=0.500 ≥ 0.05" in verdict.reasons[0].message

    after = run([case(f"q{i}", passed=i >= 8) for i in range(20)])      # 8 flips: p = 0.0078
    assert verdict_on(before, after, cfg).verdict == "fail"


def test_significance_other_metrics_use_the_bootstrap_upper_bound():
    before = run([case(f"q{i}") for i in range(20)])
    cfg = GateConfig(max_drop={"mrr@5": 0.01}, significance=0.05)
    one_case = run([case(f"q{i}", rank=2 if i == 0 else 1) for i in range(20)])     # one rank drop
    all_cases = run([case(f"q{i}", rank=2) for i in range(20)])                     # every rank drops
    assert verdict_on(before, one_case, cfg).verdict == "pass"
    assert verdict_on(before, all_cases, cfg).verdict == "fail"


# --- records and validation ------------------------------------------------------------------

def test_verdict_json_round_trip_with_exact_keys():
    verdict = verdict_on(*seed_runs(), SEED_GATE)
    data = json.loads(json.dumps(verdict.to_dict()))
    assert list(data) == ["verdict", "state", "comparable", "reasons", "pass_to_fail", "fail_to_pass", "flaky",
                          "rank_drops", "config_diff", "reran", "stats", "metrics", "by_slice", "cases_added",
                          "cases_removed", "golden", "noise", "known_failures"]
    assert set(data["reasons"][0]) == {"rule", "metric", "case", "slice", "value", "threshold", "message", "blocking"}
    assert data["reasons"][1]["case"] == "q01" and data["reasons"][0]["metric"] == "mrr@5"
    assert Verdict.read(data).to_dict() == data
    with pytest.raises(FrozenInstanceError):
        verdict.reran.full = True               # read-only
    with pytest.raises(TypeError):
        verdict.reran.runs["x"] = (1.0,)        # read-only
    with pytest.raises(RagevalError, match=r"verdict: missing keys noise"):
        Verdict.read({k: v for k, v in data.items() if k != "noise"})


def test_config_diff_flattens_dotted_keys():
    assert [d.to_dict() for d in config_diff({"a": {"b": 1, "c": [1, 2]}, "d": 1}, {"a": {"b": 2, "c": [1, 2]}, "e": {}})] == [
        {"key": "a.b", "before": 1, "after": 2}, {"key": "d", "before": 1, "after": None},
        {"key": "e", "before": None, "after": {}}]


def test_fmt_adds_digits_only_when_two_would_hide_the_difference():
    assert (fmt(0.6333), fmt(0.849, 0.85), fmt(0.85, 0.849), fmt(None)) == ("0.63", "0.849", "0.850", "n/a")


# --- the decision, table-driven --------------------------------------------------------------

DET = {"embedding": {"provider": "local"}, "generation": {"provider": "extractive"}, "judge": {"model": None}}


def _mrr(values: list[float], **kw: Any) -> RunResult:
    return run([case(f"q{i}", metrics={"hit@1": 1.0, "hit@3": 1.0, "recall@3": 1.0, "mrr@5": v})
                for i, v in enumerate(values)], config=DET, **kw)


def _rate(rate: float) -> RunResult:
    return run(rate_cases(rate, 100), config=DET)


DECISIONS = [
    # (what, baseline, candidate, gate, verdict, blocking rules)
    ("floor exactly at the threshold passes", None, _rate(0.90), GateConfig(floors={"pass_rate": 0.90}), "pass", []),
    ("one case under the floor blocks", None, _rate(0.89), GateConfig(floors={"pass_rate": 0.90}), "fail", ["floor"]),
    ("a drop of exactly max_drop passes", _mrr([0.90] * 4), _mrr([0.87] * 4), GateConfig(max_drop={"mrr@5": 0.03}),
     "pass", []),
    ("a drop past max_drop blocks", _mrr([0.90] * 4), _mrr([0.86] * 4), GateConfig(max_drop={"mrr@5": 0.03}),
     "fail", ["max_drop"]),
    ("noise wider than max_drop widens the tolerance", _mrr([0.90] * 4, sigma={"mrr@5": 0.05}),
     _mrr([0.80] * 4, sigma={"mrr@5": 0.05}), GateConfig(max_drop={"mrr@5": 0.03}, noise_k=2), "pass", []),
    ("a drop past the noise band still blocks", _mrr([0.90] * 4, sigma={"mrr@5": 0.05}),
     _mrr([0.70] * 4, sigma={"mrr@5": 0.05}), GateConfig(max_drop={"mrr@5": 0.03}, noise_k=2), "fail", ["max_drop"]),
    ("a passing baseline case missing from the candidate blocks", run([case("q1"), case("q2")], config=DET),
     run([case("q1")], config=DET), GateConfig(), "fail", ["missing_cases"]),
    ("a failing baseline case missing from the candidate does not", run([case("q1"), case("q2", passed=False)],
     config=DET), run([case("q1")], config=DET), GateConfig(), "pass", []),
    ("an errored case blocks under errors: fail", run([case("q1")], config=DET),
     run([case("q1", error="timeout")], config=DET), GateConfig(errors="fail"), "fail", ["errors"]),
    ("an errored case is listed under errors: ignore", run([case("q1")], config=DET),
     run([case("q1", error="timeout")], config=DET), GateConfig(errors="ignore"), "pass", []),
    ("no baseline: floors only", None, _rate(1.0), GateConfig(missing_baseline="floors_only"), "pass", []),
    ("no baseline and missing_baseline: fail", None, _rate(1.0), GateConfig(missing_baseline="fail"), "fail",
     ["missing_baseline"]),
    ("a zero-tolerance number blocks", None, run([case("q1", numbers=(["7 ngày"], ["30 ngày"]))], config=DET),
     GateConfig(zero_tolerance=("numbers",)), "fail", ["zero_tolerance"]),
]


@pytest.mark.parametrize(("baseline", "candidate", "cfg", "expected", "rules"),
                         [d[1:] for d in DECISIONS], ids=[d[0] for d in DECISIONS])
def test_the_gate_decision(baseline, candidate, cfg, expected, rules):
    verdict = verdict_on(baseline, candidate, cfg)
    assert verdict.verdict == expected
    assert [r.rule for r in verdict.blocking_reasons] == rules
