"""What ablation found (``rageval/attribution.py`` runs it): records the verdict carries under
``attribution`` and the words the report and the terminal show for them. Pure; no I/O."""

from __future__ import annotations

from dataclasses import dataclass

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
    interaction: str | None = None          # plain words when the effects alone do not add up

    @property
    def cause(self) -> Effect | None:
        """The knob whose reverting recovers the most of the drop (None when nothing dropped)."""
        known = [e for e in self.effects if e.left_when_reverted is not None]
        if self.whole is None or self.whole >= 0 or not known:
            return None
        return max(known, key=lambda e: e.left_when_reverted)   # type: ignore[arg-type, return-value]

    def lines(self) -> list[str]:
        """``mrr@5 −0.25: chunking.size 200→800 causes most of it (−0.23 alone; reverting it leaves −0.01)…``"""
        cause = self.cause
        effects = sorted(self.effects, key=lambda e: e is not cause)
        parts = [f"{e.knob}{' causes most of it' if e is cause else ''} ({fmt_delta(e.alone)} alone; "
                 f"reverting it leaves {fmt_delta(e.left_when_reverted)})" for e in effects]
        out = [f"{self.metric} {fmt_delta(self.whole)}: " + "; ".join(parts)]
        if self.interaction:
            out.append(self.interaction)
        return out


@dataclass(frozen=True)
class Attribution(Record):
    """What ablation found, or why it did not run; with the extra runs' count, time and model calls."""

    status: str                              # attributed | one_knob | not_available
    why: str
    knobs: tuple[str, ...] = ()
    metrics: tuple[MetricAttribution, ...] = ()
    runs: int = 0
    seconds: float = 0.0
    model_calls: int = 0

    def for_metric(self, metric: str | None) -> MetricAttribution | None:
        return next((m for m in self.metrics if m.metric == metric), None)


def footer(attribution: Attribution) -> str:
    """One line on what the attribution cost, or why there is none."""
    if attribution.status == "attributed":
        calls = f", {attribution.model_calls} model call{'s' if attribution.model_calls != 1 else ''}"
        return (f"Attribution: {attribution.runs} extra run{'s' if attribution.runs != 1 else ''} of the compared "
                f"cases with one knob reverted or applied alone ({attribution.seconds:.1f} s{calls}); knobs: "
                f"{', '.join(attribution.knobs)}." + (f" Not attributed: {attribution.why}." if attribution.why else ""))
    return f"Attribution: {attribution.why}."
