"""`rageval merge`: the RunResults of a sharded run (``rageval run --shard i/N`` on N machines, a
GitHub ``strategy.matrix`` of N jobs) joined into the RunResult one machine would have written.

Each shard runs the cases whose id hashes to it (:class:`rageval.results.Shard`). Merging checks
that the N files are the N parts of one run — the same shard count, each part once, the same
config, golden set, subset, corpus, git commit, metrics and repeats, every case in the part its id
hashes to, and together exactly the cases the golden snapshot says the (sub)set has — then puts
the cases back in golden-file order and recomputes what a single run computes from its cases: the
summary overall and by slice, and for a baseline with repeats each run's summary from the parts'
[sum, count] totals, so the mean over the runs, σ (noise) and the flaky cases are the whole's. The
merged RunResult equals the unsharded one except ``timings`` (the parts' seconds added up),
``created_at`` (the latest part's) and each case's ``latency_ms`` (clocks, not results). Anything else is bad input naming the file (exit 2): a merge
never quietly gives a RunResult with fewer cases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rageval.cost import Cost
from rageval.errors import ResultError
from rageval.gate import stats
from rageval.metrics.aggregate import add_totals, mean_of_totals, summarize
from rageval.results import Noise, RunResult, Summary

#: what every part of one run must share: (what it is called in messages, how to read it off a part)
SAME: tuple[tuple[str, Any], ...] = (
    ("config (config_fingerprint)", lambda r: r.config_fingerprint),
    ("golden set (name, version, sha256)", lambda r: (r.golden.name, str(r.golden.version), r.golden.sha256,
                                                      r.golden.content_sha256)),
    ("subset", lambda r: r.golden.subset),
    ("git commit (git_sha)", lambda r: r.git_sha),
    ("metrics (metric_names)", lambda r: tuple(r.metric_names)),
    ("repeats", lambda r: (r.repeats, None if r.noise is None else r.noise.runs_executed)),
    ("corpus", lambda r: r.corpus),
    ("app", lambda r: dict(r.app)),
    ("rageval version", lambda r: r.tool.get("version")),
)

MSG_NOT_SHARD = ("{file}: not a shard (no 'shard' key): write the parts with `rageval run --shard I/N --out FILE`, "
                 "then merge those.")
MSG_COUNT = "{file}: shard {shard}, but {first} is a shard of {n}: merge the parts of one run."
MSG_TWICE = "{file} and {other} are both shard {shard}: give each part once."
MSG_MISSING = ("shards {missing} of {n} are missing (given: {given}): a merge needs every part, or the run would "
               "silently lose their cases.")
MSG_DIFFERENT = ("{file} and {first} are parts of different runs: their {what} differ. Merge the parts of one run "
                 "(same commit, config and golden set).")
MSG_WRONG_CASE = "{file}: case '{case}' hashes to shard {want}, not {shard}: the file is not what `--shard {shard}` ran."
MSG_NO_SNAPSHOT = "{file}: no golden snapshot (golden.cases), so the merged cases cannot be checked against the set."
MSG_CASES = ("the shards hold {n} cases, but the golden set{subset} has {want}: {diff}. Re-run the missing part (or "
             "the whole run) with the same golden set.")


def merge(parts: Sequence[tuple[RunResult, str]]) -> RunResult:
    """The one RunResult the shards ``parts`` (each with the file it came from) make together;
    ResultError naming the file on any inconsistency (see the module docstring)."""
    if not parts:
        raise ResultError("rageval merge: no shard files given.")
    ordered = _complete(parts)
    first, label = ordered[0]
    for what, read in SAME:
        for run, file in ordered[1:]:
            if read(run) != read(first):
                raise ResultError(MSG_DIFFERENT.format(file=file, first=label, what=what))
    cases = _cases(ordered)
    runs_executed = 1 if first.noise is None else first.noise.runs_executed
    summary = summarize(cases, first.metric_names)
    noise, flaky, cost = first.noise, (), Cost.total([r.cost for r, _ in ordered], len(cases))
    if runs_executed > 1:
        noise, summary = _noise(ordered, summary)
        flaky_ids = {i for r, _ in ordered for i in r.flaky}
        flaky = tuple(c.id for c in cases if c.id in flaky_ids)
        reruns = [r.cost.rerun for r, _ in ordered if r.cost.rerun is not None]
        cost = cost.with_rerun(Cost.total(reruns, (runs_executed - 1) * len(cases)) if reruns else None)
    elif noise is not None:
        noise = Noise(sigma={k: 0.0 for k in summary.metrics},
                      by_slice={s: {k: 0.0 for k in p.metrics} for s, p in (summary.by_slice or {}).items()},
                      runs=(dict(summary.metrics),), runs_executed=1, deterministic=first.noise.deterministic)
    timings = {k: round(sum(r.timings.get(k, 0.0) for r, _ in ordered), 3) for k in first.timings}
    return first.replace(cases=tuple(cases), summary=summary, noise=noise, flaky=flaky, cost=cost, timings=timings,
                         created_at=max((r.created_at or "" for r, _ in ordered), default="") or None, shard=None)


def _complete(parts: Sequence[tuple[RunResult, str]]) -> list[tuple[RunResult, str]]:
    """The parts in shard order, checked to be each of the N shards once."""
    seen: dict[int, str] = {}
    first_file, count = parts[0][1], None
    for run, file in parts:
        if run.shard is None:
            raise ResultError(MSG_NOT_SHARD.format(file=file))
        if count is None:
            count, first_file = run.shard.count, file
        if run.shard.count != count:
            raise ResultError(MSG_COUNT.format(file=file, shard=run.shard, first=first_file, n=count))
        if run.shard.index in seen:
            raise ResultError(MSG_TWICE.format(file=file, other=seen[run.shard.index], shard=run.shard))
        seen[run.shard.index] = file
    missing = [str(i) for i in range(1, (count or 0) + 1) if i not in seen]
    if missing:
        raise ResultError(MSG_MISSING.format(missing=", ".join(missing), n=count, given=", ".join(
            str(run.shard) for run, _ in parts)))
    return sorted(parts, key=lambda p: p[0].shard.index)  # type: ignore[union-attr]


def _cases(ordered: Sequence[tuple[RunResult, str]]) -> list[Any]:
    """Every part's cases, each checked to belong to its part, in golden-file order; exactly the
    cases of the (sub)set the golden snapshot describes."""
    first, label = ordered[0]
    if first.golden.cases is None:
        raise ResultError(MSG_NO_SNAPSHOT.format(file=label))
    found = {}
    for run, file in ordered:
        for case in run.cases:
            if not run.shard.holds(case.id):  # type: ignore[union-attr]
                want = next(i for i in range(1, run.shard.count + 1)  # type: ignore[union-attr]
                            if replace(run.shard, index=i).holds(case.id))  # type: ignore[arg-type]
                raise ResultError(MSG_WRONG_CASE.format(file=file, case=case.id, want=want, shard=run.shard))
            found[case.id] = case
    subset = first.golden.subset
    wanted = [i for i, c in first.golden.cases.items() if not subset or subset in (c.get("tags") or ())]
    if set(wanted) != set(found):
        lost, extra = [i for i in wanted if i not in found], [i for i in found if i not in set(wanted)]
        diff = "; ".join(part for part in (f"missing {', '.join(lost[:10])}" if lost else "",
                                           f"not in the set {', '.join(extra[:10])}" if extra else "") if part)
        raise ResultError(MSG_CASES.format(n=len(found), subset=f" (subset {subset})" if subset else "",
                                           want=len(wanted), diff=diff))
    return [found[i] for i in wanted]


def _noise(ordered: Sequence[tuple[RunResult, str]], summary: Summary) -> tuple[Noise, Summary]:
    """The repeats' noise of the whole, from the parts' per-run totals; and the summary with the
    mean over the runs (as `rageval baseline` writes it)."""
    first, label = ordered[0]
    n_runs = first.noise.runs_executed  # type: ignore[union-attr]
    for run, file in ordered:
        if run.noise is None or len(run.noise.totals) != n_runs:
            raise ResultError(f"{file}: a baseline part of {n_runs} runs without each run's totals (noise.totals): "
                              "write the parts with this rageval version.")
    per_run = []
    for j in range(n_runs):
        parts = [run.noise.totals[j] for run, _ in ordered]  # type: ignore[union-attr]
        labels = sorted({s for p in parts for s in p.get("by_slice", {})})
        per_run.append((mean_of_totals(p["metrics"] for p in parts),
                        {s: mean_of_totals(p["by_slice"][s] for p in parts if s in p.get("by_slice", {}))
                         for s in labels}))
    summaries = [m for m, _ in per_run]
    sigma = stats.sigma_over_runs(summaries)
    by_slice = {s: stats.sigma_over_runs([b[s] for _, b in per_run if s in b]) for s in summary.by_slice or {}}
    mean = {k: stats.mean_or_none([s.get(k) for s in summaries]) for k in summaries[0]}
    totals = tuple(_summed([run.noise.totals[j] for run, _ in ordered]) for j in range(n_runs))  # type: ignore[union-attr]
    noise = Noise(sigma=sigma, by_slice=by_slice, runs=tuple(summaries), runs_executed=n_runs,
                  deterministic=first.noise.deterministic, totals=totals)  # type: ignore[union-attr]
    return noise, replace(summary, metrics=mean)


def _summed(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several parts' totals of one run added up (what the whole run's totals are)."""
    labels = sorted({s for p in parts for s in p.get("by_slice", {})})
    return {"metrics": add_totals(p["metrics"] for p in parts),
            "by_slice": {s: add_totals(p["by_slice"][s] for p in parts if s in p.get("by_slice", {})) for s in labels}}
