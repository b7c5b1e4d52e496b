"""What a run's model calls cost: the :class:`Cost` record of a RunResult, and :class:`Usage`, the
running counts a model client keeps. Part of the data contract of ``rageval.results`` (which
re-exports ``Cost``); see docs/runresult.md.

A *call* is a network request that got an answer (a cache hit is not a call). Counts are kept per
**stage** (``generation``, ``judge``, ``faithfulness``, ``embedding``) and per **case and stage**,
each as a :class:`StageCost` (calls, cache hits, prompt and completion tokens, USD). ``Cost`` keeps
the first run's numbers and, under ``rerun``, the numbers of the runs made after it with the cache
bypassed (the gate's confirmation re-runs, a baseline's repeats), so a re-run's real calls are
never hidden behind a first run served from the cache. A call whose response had no ``usage`` is
counted with estimated tokens (:func:`estimate_tokens`, an upper bound) and marked: ``estimated``
per stage, ``estimated_calls`` in all. ``priced_as`` names the ``llm.prices`` key that priced a
model when it is not the model's own name (``openai/gpt-4o-mini`` priced as ``gpt-4o-mini``).

The JSON form keeps the keys of rageval 0.1.0 (``calls``, ``calls_total``, ``calls_per_case``,
tokens, ``cache_hits``, ``usd``) and adds ``stages``, ``by_case``, ``rerun``, ``estimated_calls``
and ``priced_as`` only when they hold something, so an older RunResult reads and writes back byte
for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from rageval.files import Reader

STAGE_KEYS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "usd", "estimated")
#: Tokens of a call whose response carries no ``usage`` (local servers, some gateways): an upper
#: bound for any byte-level tokenizer (BPE, or SentencePiece with byte fallback), where every
#: token covers at least one byte — one token per UTF-8 byte of each text, plus this many per
#: message for the chat template's own tokens. The cap is held on it; the cost is marked estimated.
TEMPLATE_TOKENS_PER_MESSAGE = 8


def estimate_tokens(texts: Iterable[str]) -> int:
    """An upper bound of the tokens of ``texts`` (messages, or a reply): see :data:`TEMPLATE_TOKENS_PER_MESSAGE`."""
    return sum(len(t.encode("utf-8")) + TEMPLATE_TOKENS_PER_MESSAGE for t in texts)


@dataclass(frozen=True)
class StageCost:
    """Calls, cache hits, tokens and USD of one stage (of one case, or of a whole run); ``estimated``:
    how many of the calls had no token counts from the endpoint (tokens and USD are then the
    upper bound of :func:`estimate_tokens`)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    estimated: int = 0

    def plus(self, other: StageCost) -> StageCost:
        return StageCost(*(getattr(self, k) + getattr(other, k) for k in STAGE_KEYS))

    def minus(self, other: StageCost) -> StageCost:
        return StageCost(*(getattr(self, k) - getattr(other, k) for k in STAGE_KEYS))

    def __bool__(self) -> bool:
        return any(getattr(self, k) for k in STAGE_KEYS)

    def to_dict(self) -> dict[str, Any]:
        out = {"calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, "usd": round(self.usd, 8)}
        return {**out, "estimated": self.estimated} if self.estimated else out

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> StageCost:
        data = r.obj(data, key)
        r.keys(data, STAGE_KEYS, key)
        ints = {k: r.int_(data.get(k, 0), f"{key}.{k}") for k in STAGE_KEYS if k != "usd"}
        return cls(usd=r.num(data.get("usd", 0.0), f"{key}.usd", minimum=0.0), **ints)  # type: ignore[arg-type]


def _given(data: Mapping[str, Any], name: str) -> Any:
    """The value of an optional mapping key: {} when absent or null (anything else is checked)."""
    return {} if data.get(name) is None else data[name]


def _add(into: dict[str, StageCost], stages: Mapping[str, StageCost], sign: int = 1) -> None:
    for stage, cost in stages.items():
        base = into.get(stage, StageCost())
        into[stage] = base.plus(cost) if sign > 0 else base.minus(cost)


@dataclass(frozen=True)
class Usage:
    """A model client's running counts: per stage, and per case id and stage."""

    stages: Mapping[str, StageCost] = field(default_factory=dict)
    by_case: Mapping[str, Mapping[str, StageCost]] = field(default_factory=dict)
    priced_as: Mapping[str, str] = field(default_factory=dict)    # model -> the llm.prices key that priced it

    def since(self, earlier: Usage) -> Usage:
        """What was counted after ``earlier`` (a snapshot of the same client)."""
        stages = dict(self.stages)
        _add(stages, earlier.stages, -1)
        by_case: dict[str, dict[str, StageCost]] = {}
        for case, per_stage in self.by_case.items():
            diff = dict(per_stage)
            _add(diff, earlier.by_case.get(case, {}), -1)
            kept = {s: c for s, c in diff.items() if c}
            if kept:
                by_case[case] = kept
        return Usage({s: c for s, c in stages.items() if c}, by_case, dict(self.priced_as))


@dataclass(frozen=True)
class Cost:
    """Model calls (network calls per stage; cache hits are not calls), tokens and USD; per stage
    and per case when known; ``rerun``: the cost of the runs made after the first, apart."""

    calls: Mapping[str, int] = field(default_factory=dict)
    calls_total: int = 0
    calls_per_case: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    usd: float = 0.0
    stages: Mapping[str, StageCost] = field(default_factory=dict)
    by_case: Mapping[str, Mapping[str, StageCost]] = field(default_factory=dict)
    rerun: Cost | None = None
    estimated_calls: int = 0                                     # calls whose tokens and USD are estimated
    priced_as: Mapping[str, str] = field(default_factory=dict)    # model -> the llm.prices key that priced it

    @property
    def estimated(self) -> bool:
        """Whether some call's tokens (so its USD) are the estimate of :func:`estimate_tokens`."""
        return bool(self.estimated_calls or (self.rerun is not None and self.rerun.estimated_calls))

    @classmethod
    def of(cls, usage: Usage, n_cases: int, priced_as: Mapping[str, str] | None = None) -> Cost:
        """The cost of ``usage`` over a run of ``n_cases`` cases."""
        priced_as = {**usage.priced_as, **(priced_as or {})}
        stages = {s: usage.stages[s] for s in sorted(usage.stages)}
        total = sum(c.calls for c in stages.values())
        return cls(calls={s: c.calls for s, c in stages.items() if c.calls}, calls_total=total,
                   calls_per_case=round(total / n_cases, 3) if n_cases else 0.0,
                   prompt_tokens=sum(c.prompt_tokens for c in stages.values()),
                   completion_tokens=sum(c.completion_tokens for c in stages.values()),
                   cache_hits=sum(c.cache_hits for c in stages.values()),
                   usd=round(sum(c.usd for c in stages.values()), 6), stages=stages,
                   by_case={k: dict(sorted(v.items())) for k, v in sorted(usage.by_case.items())},
                   estimated_calls=sum(c.estimated for c in stages.values()),
                   priced_as={m: k for m, k in sorted(priced_as.items()) if m != k})

    @classmethod
    def total(cls, costs: Iterable[Cost], n_cases: int) -> Cost:
        """The sum of several runs' costs (their stages and cases), over ``n_cases`` cases in all."""
        stages: dict[str, StageCost] = {}
        by_case: dict[str, dict[str, StageCost]] = {}
        priced_as: dict[str, str] = {}
        for cost in costs:
            _add(stages, cost.stages)
            priced_as.update(cost.priced_as)
            for case, per_stage in cost.by_case.items():
                _add(by_case.setdefault(case, {}), per_stage)
        return cls.of(Usage(stages, by_case), n_cases, priced_as)

    def with_rerun(self, rerun: Cost | None) -> Cost:
        return replace(self, rerun=rerun)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": dict(self.calls), "calls_total": self.calls_total, "calls_per_case": self.calls_per_case,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cache_hits": self.cache_hits, "usd": self.usd}
        if self.stages:
            out["stages"] = {s: c.to_dict() for s, c in self.stages.items()}
        if self.by_case:
            out["by_case"] = {i: {s: c.to_dict() for s, c in v.items()} for i, v in self.by_case.items()}
        if self.rerun is not None:
            out["rerun"] = self.rerun.to_dict()
        if self.estimated_calls:
            out["estimated_calls"] = self.estimated_calls
        if self.priced_as:
            out["priced_as"] = dict(self.priced_as)
        return out

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader, *, nested: bool = False) -> Cost:
        data = r.obj(data, key)
        r.keys(data, [f.name for f in fields(cls) if not (nested and f.name == "rerun")], key)
        ints = {n: r.int_(data.get(n, 0), f"{key}.{n}") for n in ("calls_total", "prompt_tokens", "completion_tokens",
                                                                    "cache_hits", "estimated_calls")}
        priced_as = {str(m): r.str_(k, f"{key}.priced_as.{m}")
                     for m, k in r.obj(_given(data, "priced_as"), f"{key}.priced_as").items()}
        stages = {str(s): StageCost.from_dict(c, f"{key}.stages.{s}", r)
                  for s, c in r.obj(_given(data, "stages"), f"{key}.stages").items()}
        by_case = {str(i): {str(s): StageCost.from_dict(c, f"{key}.by_case.{i}.{s}", r)
                            for s, c in r.obj(v, f"{key}.by_case.{i}").items()}
                   for i, v in r.obj(_given(data, "by_case"), f"{key}.by_case").items()}
        rerun = None if data.get("rerun") is None else cls.from_dict(data["rerun"], f"{key}.rerun", r, nested=True)
        return cls(calls={str(k): r.int_(v, f"{key}.calls.{k}") for k, v in r.obj(data.get("calls") or {},  # type: ignore[misc]
                                                                                     f"{key}.calls").items()},
                   calls_per_case=r.num(data.get("calls_per_case", 0.0), f"{key}.calls_per_case", minimum=0.0),  # type: ignore[arg-type]
                   usd=r.num(data.get("usd", 0.0), f"{key}.usd", minimum=0.0),  # type: ignore[arg-type]
                   stages=stages, by_case=by_case, rerun=rerun, priced_as=priced_as, **ints)  # type: ignore[arg-type]
