"""What ablation found (``rageval/attribution.py`` runs it): records the verdict carries under
``attribution`` and the words the report and the terminal show for them. Pure; no I/O.

Every sentence rests on a run that was made: "reverting X alone unblocks the gate" only when the
PR's config with X reverted was gated and passed; "reverting X and Y does" only for a pair that was
run and gated; "X and Y interact" only for a pair whose joint effect was measured and differs from
the sum of their effects alone — by more than the noise band and visibly at two decimals, so the
numbers said never look like they add up when the words say they do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rageval.cost import Cost
from rageval.gate.format import fmt_delta
from rageval.records import Record


@dataclass(frozen=True)
class Effect(Record):
    """One knob's effect on one metric: its Δ applied alone to the baseline's config, and the Δ
    that is left when it alone is reverted in the PR's config."""

    knob: str
    alone: float | None
    left_when_reverted: float | None


@dataclass(frozen=True)
class MetricAttribution(Record):
    """A blocking metric's whole Δ (the PR vs the baseline, on the compared cases) and each knob's part."""

    metric: str
    whole: float | None
    effects: tuple[Effect, ...]
    interaction: str | None = None          # which pairs interact, in plain words (None: none measured to)

    def lines(self) -> list[str]:
        """``mrr@5 −0.04: chunking.size 200→800 −0.06 alone, reverting it leaves 0.00; …``, then each
        knob that improves the metric, then the interacting pairs."""
        parts = [f"{e.knob} {fmt_delta(e.alone)} alone, reverting it leaves {fmt_delta(e.left_when_reverted)}"
                 for e in self.effects]
        out = [f"{self.metric} {fmt_delta(self.whole)}: " + "; ".join(parts)]
        out += [f"{e.knob} improves {self.metric} by {fmt_delta(e.alone)} alone" for e in self.effects
                if e.alone is not None and fmt_delta(e.alone).startswith("+")]
        if self.interaction:
            out.append(self.interaction)
        return out


@dataclass(frozen=True)
class Attribution(Record):
    """What ablation found, or why it did not run; with the extra runs' count, time and cost.

    ``unblocks``: the reverts (knob labels reverted together) that were gated and passed, singles
    first; ``gated``: how many variants were gated; ``every_pair``: every pair of reverts was gated
    (so when none unblocks, only reverting every knob is left); ``cases``: for each pass→fail or new
    zero-tolerance case, the reverts that make it pass ("X", or "X + Y" for a pair)."""

    status: str                              # attributed | one_knob | not_available
    why: str
    knobs: tuple[str, ...] = ()
    metrics: tuple[MetricAttribution, ...] = ()
    runs: int = 0
    seconds: float = 0.0
    model_calls: int = 0
    unblocks: tuple[tuple[str, ...], ...] = ()
    gated: int = 0
    every_pair: bool = False
    cases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cost: Cost | None = None

    OMIT_NONE = ("cost",)

    def for_metric(self, metric: str | None) -> MetricAttribution | None:
        return next((m for m in self.metrics if m.metric == metric), None)


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"


def finding(found: Attribution) -> str | None:
    """What reverting does to the gate, from the gated runs only; None when nothing was run."""
    if found.status != "attributed" or not found.gated:
        return None
    singles = [u[0] for u in found.unblocks if len(u) == 1]
    if singles:
        return f"reverting {_either(singles)} alone unblocks the gate"
    pairs = [u for u in found.unblocks if len(u) == 2]
    if pairs:
        return f"no single revert unblocks the gate; reverting {pairs[0][0]} and {pairs[0][1]} does"
    if len(found.knobs) == 2 or found.every_pair:
        what = "revert" if len(found.knobs) == 2 else "revert, nor any pair of reverts,"
        return f"no single {what} unblocks the gate: reverting every knob is needed"
    tried = found.gated - len(found.knobs)
    if not tried:
        return "no single revert unblocks the gate (no run was left for pairs within 2·attribution.max_knobs runs)"
    return (f"no single revert unblocks the gate, nor the {_n(tried, 'pair')} of reverts tried within "
            "2·attribution.max_knobs runs")


def next_step(found: Attribution | None) -> str | None:
    """The comment's "Next step" line: what to revert, from the gated runs; None when none says."""
    if found is None or found.status not in ("attributed", "one_knob"):
        return None
    if found.status == "one_knob":
        return f"Revert {found.knobs[0]} (the one change that changes answers), or change main's floors in a separate PR"
    singles = [u[0] for u in found.unblocks if len(u) == 1]
    pairs = [u for u in found.unblocks if len(u) == 2]
    if singles:
        return (f"Revert {_either(singles)}: reverting {'it' if len(singles) == 1 else 'any one of them'} alone "
                "unblocks the gate. Or change main's floors in a separate PR")
    if pairs:
        return (f"Revert {pairs[0][0]} and {pairs[0][1]}: no single revert unblocks the gate, these two together do. "
                "Or change main's floors in a separate PR")
    return None


def case_lines(found: Attribution | None, case_id: str) -> str | None:
    """``q33: reverting corpus docs/x.md makes it pass`` for a case the runs fixed; None otherwise."""
    fixes = (found.cases.get(case_id) or ()) if found is not None else ()
    if not fixes:
        return None
    return f"reverting {_either(list(fixes))} makes it pass"


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def footer(found: Attribution) -> str:
    """One line on what the attribution cost (runs, time, model calls, tokens, USD), or why there is none."""
    cost = found.cost or Cost()
    if found.status != "attributed":
        spent = f" ({_n(found.runs, 'extra run')}, {_n(found.model_calls, 'model call')}, ${cost.usd:.4f})" if found.runs else ""
        return f"Attribution: {found.why}{spent}."
    tokens = cost.prompt_tokens + cost.completion_tokens
    spent = f"{_n(found.model_calls, 'model call')}, {tokens:,} tokens, ${cost.usd:.4f}"
    return (f"Attribution: {_n(found.runs, 'extra run')} of the compared cases with knobs reverted or applied "
            f"alone ({found.seconds:.1f} s, {spent}); knobs: {', '.join(found.knobs)}."
            + (f" Not attributed: {found.why}." if found.why else ""))
