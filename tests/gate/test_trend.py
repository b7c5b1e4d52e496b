"""Main's trend carried in the chain of baselines: the history a baseline RunResult holds (schema,
old files, bad input), how a new baseline carries it, and the trend drawn from it."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import pytest

from rageval.errors import ResultError
from rageval.gate.decide import verdict_on
from rageval.gate.trend import BREAK, Point, Trend, carried, history_entry, judge_label, trends
from rageval.results import HistoryEntry, RunResult, load_result
from rageval.settings import GateConfig

RELEASE = Path(__file__).parents[1] / "data" / "release-0.1.0"
GATE = {"floors": {"hit@3": 0.9}, "max_drop": {"mrr@5": 0.03}}


def baseline(rate: float, *, sha: str, version: int = 3, judge: str | None = None, n: int = 20) -> RunResult:
    """``n`` cases tagged pr (the first half also tagged smoke) with mrr@5 = ``rate``."""
    cases = [c.replace(tags=("pr", "smoke") if i < n // 2 else ("pr",)) for i, c in
             enumerate(builders.rate_cases(rate, n))]
    config = {"chunking": {"size": 200}, "gate": GATE, "judge": {"model": judge}}
    return builders.run(cases, sha=sha, version=version, config=config)


def chain(*runs: RunResult, limit: int = 30) -> RunResult:
    """Each run carries the history of the one before, as `rageval baseline --previous` makes it."""
    previous = None
    for run in runs:
        previous = run.replace(history=carried(previous, ["hit@3", "mrr@5"], limit))
    return previous


# --- the history field ------------------------------------------------------------------------

def test_a_new_baseline_carries_the_previous_ones_history_and_the_previous_one():
    b1, b2, b3 = baseline(0.9, sha="a" * 40), baseline(0.85, sha="b" * 40), baseline(0.8, sha="c" * 40)
    newest = chain(b1, b2, b3)
    assert [e.commit for e in newest.history] == ["a" * 40, "b" * 40]
    first = newest.history[0]
    assert (first.golden, first.golden_version, first.date, first.judge) == ("banhang-returns", 3, "2026-11-29T21:00:00Z",
                                                                              None)
    assert first.metrics == {"hit@3": 1.0, "mrr@5": 0.9}
    assert set(first.subsets) == {"pr", "smoke"} and first.subsets["pr"] == {"hit@3": 1.0, "mrr@5": 0.9}
    assert [e.commit for e in chain(b1, b2, b3, limit=1).history] == ["b" * 40]
    assert chain(b1, b2, b3, limit=0).history == ()


def test_the_history_round_trips_and_old_runresults_load_without_one():
    newest = chain(baseline(0.9, sha="a" * 40), baseline(0.8, sha="b" * 40))
    again = RunResult.from_json(json.dumps(newest.to_dict()).encode(), "baseline.json")
    assert again.history == newest.history and again.history[0].subsets["smoke"]["mrr@5"] == pytest.approx(0.9)
    for name in ("runresult.json", "candidate.json"):       # schema 1, release 0.1.0
        assert load_result(RELEASE / name).history == ()


@pytest.mark.parametrize(("entry", "message"), [
    ({"metrics": {"mrr@5": 1.5}}, r"history\[0\]\.metrics\.mrr@5: expected a number from 0 to 1, got 1\.5"),
    ({"metrics": {"mrr@5": "NaN"}}, r"history\[0\]\.metrics\.mrr@5: expected a finite number or null, got 'NaN'"),
    ({"golden_version": True}, r"history\[0\]\.golden_version: expected one of int, str"),
    ({"subsets": {"pr": {"mrr@5": -1}}}, r"history\[0\]\.subsets\.pr\.mrr@5"),
    ({"colour": "red"}, r"history\[0\]\.colour: unknown key"),
])
def test_a_bad_history_entry_is_refused_naming_its_key(entry, message):
    good = chain(baseline(0.9, sha="a" * 40), baseline(0.8, sha="b" * 40)).to_dict()
    good["history"][0].update(entry)
    with pytest.raises(ResultError, match=message):
        RunResult.from_json(json.dumps(good).encode(), "baseline.json")


def test_the_judge_label_tells_judges_apart():
    assert judge_label({"judge": {"model": None}}) is None
    one = judge_label({"judge": {"model": "gpt-4o", "prompt_version": 3, "temperature": 0, "always": False}})
    assert one == "gpt-4o, prompt v3, temperature 0, rules first"
    assert judge_label({"judge": {"model": "gpt-4o", "prompt_version": 4, "temperature": 0, "always": False}}) != one


# --- the trend ----------------------------------------------------------------------------------

def test_the_sparkline_scales_all_points_and_marks_the_break_and_the_pr():
    def point(value, golden="g v3", pr=False):
        return Point(value, None, None, golden, None, pr)

    trend = Trend("mrr@5", (point(0.80), point(0.90), point(None), point(0.85, "g v4"), point(0.95, "g v4", pr=True)))
    # one scale over 0.80–0.95: 0.80 → ▁, 0.90 → round(0.667·7)=5 ▆, 0.85 → round(2.33)=2 ▃, 0.95 → █
    assert trend.sparkline() == "▁▆·" + BREAK + "▃ → █"
    assert trend.breaks() == [3] and [len(s) for s in trend.segments()] == [3, 2]
    assert trend.summary() == "main 0.85 (0.85 over 1 baseline with this golden set and judge); this PR 0.95"
    assert Trend("x", (point(0.8), point(0.9), point(0.7, pr=True))).summary() == \
        "main 0.90 (0.80–0.90 over 2 baselines); this PR 0.70"
    flat = Trend("hit@3", (point(1.0), point(1.0), point(1.0, pr=True)))
    assert flat.sparkline() == "▄▄ → ▄"
    assert Trend("x", (point(0.5), point(0.7, "g v4", pr=True))).sparkline() == f"▁ {BREAK} █"


def test_a_gates_trend_is_mains_values_over_the_prs_subset_then_the_prs_value():
    newest = chain(baseline(0.9, sha="a" * 40), baseline(0.8, sha="b" * 40), baseline(0.85, sha="c" * 40))
    smoke = [c for c in baseline(0.5, sha="d" * 40).cases if "smoke" in c.tags]   # the PR runs --subset smoke
    pr = builders.run(smoke, sha="d" * 40, config={"gate": GATE}, subset="smoke")
    verdict = verdict_on(newest, pr, GateConfig(floors=GATE["floors"], max_drop=GATE["max_drop"]))
    (hit, mrr) = trends(pr, baseline=newest, verdict=verdict)
    # smoke = the first half of each run: rate_cases passes the first ones, mrr@5 = rate everywhere
    assert [p.value for p in mrr.points] == pytest.approx([0.9, 0.8, 0.85, 0.5])
    assert [p.label for p in mrr.points] == ["aaaaaaa", "bbbbbbb", "ccccccc", "PR"]
    assert trends(pr, baseline=newest, verdict=verdict, limit=2)[1].points[0].label == "bbbbbbb"
    assert trends(pr, baseline=newest, verdict=verdict, limit=0) == []
    assert [t.metric for t in trends(newest)] == ["hit@3", "mrr@5"] and trends(newest)[1].pr is None


def test_another_golden_version_or_judge_is_a_break():
    newest = chain(baseline(0.9, sha="a" * 40, version=3), baseline(0.8, sha="b" * 40, version=4),
                   baseline(0.8, sha="c" * 40, version=4, judge="gpt-4o"))
    (_, mrr) = trends(newest)
    assert mrr.breaks() == [1, 2]
    entry = history_entry(newest, ["mrr@5"])
    assert isinstance(entry, HistoryEntry) and entry.judge.startswith("gpt-4o")


def test_rageval_baseline_previous_carries_the_chain(tmp_path, run_cli, copy_demo):
    project = copy_demo(tmp_path / "demo")
    outs = [tmp_path / f"b{i}.json" for i in range(3)]
    assert run_cli("baseline", project, "--subset", "pr", "--repeats", "1", "--out", outs[0])[0] == 0
    for before, after in zip(outs, outs[1:]):
        assert run_cli("baseline", project, "--subset", "pr", "--repeats", "1", "--out", after,
                       "--previous", before)[0] == 0
    first, second, third = (load_result(p) for p in outs)
    assert first.history == () and [e.date for e in third.history] == [first.created_at, second.created_at]
    entry = third.history[-1]
    assert entry.metrics == {m: second.summary.metrics[m] for m in ("hit@3", "mrr@5", "pass_rate")}
    assert entry.golden_version == second.golden.version and entry.subsets["pr"] == entry.metrics
