"""THE registry: every check and every metric rageval knows, each declared once.

A **check** answers "did this case pass this rule" (a :class:`~rageval.records.CheckResult` per
case); a **metric** is one number per run (and per slice): the mean of its per-case values. A check
*feeds* the summary metrics computed from it (``numbers`` feeds ``numbers_pass``). A **retrieval
family** (``hit``, ``recall``, ``mrr``, ``ndcg``) is a metric per cut-off: ``hit@3``, ``mrr@5``,
``recall@600tok``.

Everything that used to be a parallel list is derived from the declarations at the bottom of this
module: the runner's order (retrieval, then rules, then model checks — rules first, so the judge
is told which rules a case already fails), the summary metric names and their order, which checks
need a model, which may be zero-tolerance, which metrics the LLM judge decides, the valid metric
names of ``gate.floors`` / ``max_drop``, the run table's and the comment's rows, and docs/metrics.md's
metric table (a test holds it equal). Adding a metric is one declaration here plus its test.

Nothing here does I/O. A duplicate name is refused.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rageval.metrics import retrieval
from rageval.metrics.numbers import check_numbers
from rageval.metrics.rules import check_phrases, check_refusal
from rageval.records import CaseResult, CheckResult, Retrieved

#: the stages a check runs in, in the runner's order; ``gate`` checks are set by the gate itself
RETRIEVAL, RULE, MODEL, GATE = "retrieval", "rule", "model", "gate"
STAGES = (RETRIEVAL, RULE, MODEL, GATE)
#: kinds of metric: a rate lies in [0, 1]; a count is ≥ 0
RATE, COUNT = "rate", "count"
NO_ANSWER = "no answer: retrieval-only case"


@dataclass
class CaseInput:
    """What a check reads of one answered case: the golden case, the app's answer and retrieval,
    the text of the expected sections (``source``) and the check settings. ``model_checks`` makes
    the case's model-backed checks in one go (one judge call), once; ``failed_rules`` lists the
    rule checks the case failed, filled in as they run."""

    id: str
    question: str
    expected_answer: str
    expected_sections: tuple[str, ...]
    answer: str | None
    retrieved: tuple[Retrieved, ...] | None
    source: str = ""
    sources: tuple[str, ...] = ()                       # the same sections' texts one by one (source joins them)
    must_include: tuple[str, ...] = ()
    must_not_include: tuple[str, ...] = ()
    out_of_scope: bool = False
    first_relevant_rank: int | None = None
    relevant_sections: tuple[str, ...] | None = None    # graded ≥ retrieval.relevance_min (None: all expected)
    k: int = 0                                          # the deepest cut-off the run measures
    units: tuple[str, ...] | None = None                # checks.units (None: the built-in ones)
    refusal_markers: tuple[str, ...] | None = None      # checks.refusal_markers
    model: Callable[[list[str]], Mapping[str, CheckResult]] | None = None
    failed_rules: list[str] = field(default_factory=list)
    _model_checks: Mapping[str, CheckResult] | None = None

    def model_checks(self) -> Mapping[str, CheckResult]:
        """The model-backed checks of this case, made once (told which rules already failed)."""
        if self._model_checks is None:
            self._model_checks = {} if self.model is None else dict(self.model(list(self.failed_rules)))
        return self._model_checks


@dataclass(frozen=True)
class Metric:
    """A summary metric: the mean over a run's cases of each case's value, cases with no value (None)
    left out; an aggregate over no case is None ("n/a"), never NaN.

    ``value(case)`` is a case's value; without one, it is the 1/0 rate of the checks that feed the
    metric: 1 when every one that applied passed, 0 when one failed or errored, None when none
    applied (skipped) or the case errored. ``judged``: decided by the LLM judge, so compared only
    between runs under the same judge."""

    name: str
    description: str
    kind: str = RATE
    value: Callable[[CaseResult], float | None] | None = None
    judged: bool = False
    stage: str | None = None          # the stage it measures; None: its checks' (or every stage's)


@dataclass(frozen=True)
class Check:
    """A per-case check: ``run(case_input)`` gives its CheckResult. ``stage`` orders it (rules run
    before model checks); ``feeds`` are the summary metrics computed from it; ``applies(cfg)``
    whether a run with config ``cfg`` makes it at all; ``needs_model(cfg)`` whether it calls a model
    under ``cfg``; ``zero_tolerance``: ``gate.zero_tolerance`` may list it (any case failing it blocks)."""

    name: str
    description: str
    stage: str
    run: Callable[[CaseInput], CheckResult] | None
    feeds: tuple[Metric, ...] = ()
    applies: Callable[[Any], bool] = lambda cfg: True
    needs_model: Callable[[Any], bool] = lambda cfg: False
    zero_tolerance: bool = False


@dataclass(frozen=True)
class RetrievalFamily:
    """A family of retrieval metrics, one per cut-off: ``at(ranking, relevance, k)`` for one case.
    ``graded``: defined when some expected section has a positive grade (nDCG, whose gain is the
    grade); otherwise when some section is graded ≥ ``retrieval.relevance_min`` (hit, recall, MRR)."""

    family: str
    description: str
    formula: str
    at: Callable[[retrieval.Ranking, retrieval.Relevance, int], float]
    graded: bool = False


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name: ``hit@3`` is (hit, 3, budget=False); ``recall@600tok`` is a cut-off by
    context tokens rather than by rank; a summary metric has no k."""

    family: str
    k: int | None = None
    budget: bool = False

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}{'tok' if self.budget else ''}"

    @property
    def is_retrieval(self) -> bool:
        return self.k is not None


class Registry:
    """The declared checks, summary metrics and retrieval families, in declaration order."""

    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}
        self.metrics: dict[str, Metric] = {}
        self.families: dict[str, RetrievalFamily] = {}
        self._feeders: dict[str, tuple[Check, ...]] = {}     # remembered until a check comes or goes

    def _name_free(self, name: str) -> None:
        if name in self.metrics or name in self.families or name in self.checks:
            raise ValueError(f"{name!r} is declared twice")

    def add_metric(self, metric: Metric) -> Metric:
        if self.metrics.get(metric.name) is metric:
            return metric                        # one metric fed by several checks
        self._name_free(metric.name)
        if metric.kind not in (RATE, COUNT):
            raise ValueError(f"metric {metric.name!r}: kind must be {RATE!r} or {COUNT!r}")
        self.metrics[metric.name] = metric
        return metric

    def add_check(self, check: Check) -> Check:
        self._name_free(check.name)
        if check.stage not in STAGES:
            raise ValueError(f"check {check.name!r}: stage must be one of {', '.join(STAGES)}")
        if check.stage != GATE and check.run is None:
            raise ValueError(f"check {check.name!r}: only a gate check has no function")
        for metric in check.feeds:
            self.add_metric(metric)
        self.checks[check.name] = check
        self._feeders.clear()
        return check

    def add_family(self, family: RetrievalFamily) -> RetrievalFamily:
        self._name_free(family.family)
        if not re.fullmatch(r"[a-z][a-z0-9_]*", family.family):
            raise ValueError(f"retrieval family {family.family!r}: lower-case letters, digits and _ only")
        self.families[family.family] = family
        return family

    def remove(self, name: str) -> None:
        """Forget ``name`` (a check with the metrics only it feeds, a metric, or a family)."""
        check = self.checks.pop(name, None)
        self._feeders.clear()
        for metric in check.feeds if check else ():
            if not self.feeders(metric.name):
                self.metrics.pop(metric.name, None)
        self.metrics.pop(name, None)
        self.families.pop(name, None)

    def feeders(self, metric: str) -> tuple[Check, ...]:
        """The checks a summary metric is computed from."""
        if metric not in self._feeders:
            self._feeders[metric] = tuple(c for c in self.checks.values() if any(m.name == metric for m in c.feeds))
        return self._feeders[metric]

    def ordered_checks(self) -> list[Check]:
        """The checks the runner makes, in its order: retrieval, rules, model checks."""
        return [c for stage in (RETRIEVAL, RULE, MODEL) for c in self.checks.values() if c.stage == stage]


REGISTRY = Registry()


def _changed() -> None:
    parse_metric.cache_clear()


def register(item: Check | Metric | RetrievalFamily) -> Any:
    """Declare a check (with the metrics it feeds), a summary metric or a retrieval family."""
    add = {Check: REGISTRY.add_check, Metric: REGISTRY.add_metric, RetrievalFamily: REGISTRY.add_family}[type(item)]
    out = add(item)  # type: ignore[operator]
    _changed()
    return out


@contextlib.contextmanager
def registered(item: Check | Metric | RetrievalFamily) -> Iterator[Any]:
    """``item`` declared for the duration of a ``with`` block (tests and plugins that come and go)."""
    name = item.family if isinstance(item, RetrievalFamily) else item.name
    register(item)
    try:
        yield item
    finally:
        REGISTRY.remove(name)
        _changed()


# --- derived views --------------------------------------------------------------------------

def summary_metric_names() -> list[str]:
    """Every summary metric besides the retrieval ones, in report order."""
    return list(REGISTRY.metrics)


def retrieval_metric_names(ks: Sequence[int], budgets: Sequence[int] = ()) -> list[str]:
    """The retrieval metrics a run with cut-offs ``ks`` and token budgets ``budgets`` produces."""
    names = [f"{fam}@{k}" for fam in REGISTRY.families for k in ks]
    return names + [f"{fam}@{b}tok" for fam in REGISTRY.families for b in budgets]


def rule_check_names() -> list[str]:
    """The deterministic checks that run before the judge."""
    return [name for name, c in REGISTRY.checks.items() if c.stage == RULE]


def zero_tolerance_names() -> tuple[str, ...]:
    """What ``gate.zero_tolerance`` may list."""
    return tuple(name for name, c in REGISTRY.checks.items() if c.zero_tolerance)


def metrics_fed_by(check: str) -> tuple[str, ...]:
    """The summary metrics computed from ``check`` (``numbers`` → ``numbers_pass``)."""
    found = REGISTRY.checks.get(check)
    return () if found is None else tuple(m.name for m in found.feeds)


def from_retrieval(metric: str) -> bool:
    """Whether ``metric`` measures the retrieval stage alone (``mrr@5``, ``context_tokens``)."""
    if is_retrieval_metric(metric):
        return True
    declared = REGISTRY.metrics.get(metric)
    if declared is None:
        return False
    stages = {declared.stage} if declared.stage else {c.stage for c in REGISTRY.feeders(metric)}
    return stages == {RETRIEVAL}


def judged_metric_names() -> tuple[str, ...]:
    """Summary metrics decided by the LLM judge."""
    return tuple(name for name, m in REGISTRY.metrics.items() if m.judged)


def needs_model(cfg: Any) -> bool:
    """Whether some check calls a model under ``cfg``."""
    return any(c.needs_model(cfg) for c in REGISTRY.checks.values() if c.applies(cfg))


def producible(metric: str, cfg: Any) -> str | None:
    """None when a run with config ``cfg`` gives ``metric`` a value; otherwise what is missing (a
    threshold on it could never be checked: the gate would block every PR on "n/a")."""
    if is_retrieval_metric(metric):
        if metric in cfg.metric_names():
            return None
        m = parse_metric(metric)
        given = cfg.retrieval.token_budgets if m.budget else cfg.retrieval.k
        return (f"retrieval.{'token_budgets' if m.budget else 'k'} is {list(given)}; add {m.k} there or gate "
                "a cut-off the config measures")
    feeders = REGISTRY.feeders(metric)
    if not feeders or any(c.applies(cfg) and (c.stage != MODEL or c.needs_model(cfg)) for c in feeders):
        return None
    needs = "judge.model" if all(c.name == "judge" for c in feeders) else "judge.model and judge.faithfulness: true"
    return f"it comes from the {', '.join(c.name for c in feeders)} check, which needs {needs}"


def is_rate(metric: str) -> bool:
    """Whether ``metric``'s values lie in [0, 1] (every retrieval metric and rate; not a count).
    A name this rageval does not know is taken as unbounded above."""
    known = REGISTRY.metrics.get(metric)
    if known is not None:
        return known.kind == RATE
    try:
        return parse_metric(metric).is_retrieval
    except ValueError:
        return False


def metric_bounds(metric: str) -> tuple[float, float | None]:
    """(minimum, maximum) of a summary metric's value."""
    return (0.0, 1.0) if is_rate(metric) else (0.0, None)


def sigma_bounds(metric: str) -> tuple[float, float | None]:
    """(minimum, maximum) of a metric's σ over repeats: a rate's σ cannot exceed 1, so a larger one
    (which would widen every tolerance past the metric's range) is bad input, not noise."""
    return metric_bounds(metric)


# --- metric names ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def parse_metric(name: str) -> MetricName:
    """Parse one metric's string form; ValueError listing the valid forms otherwise."""
    if not isinstance(name, str):
        raise ValueError(f"metric name must be a string, got {type(name).__name__}")
    m = re.fullmatch(r"([a-z][a-z0-9_]*)@(\d+)(tok)?", name)
    if m and m.group(1) in REGISTRY.families:
        k = int(m.group(2))
        if k < 1:
            raise ValueError(f"metric {name!r}: the cut-off must be at least 1")
        return MetricName(m.group(1), k, bool(m.group(3)))
    if name in REGISTRY.metrics:
        return MetricName(name)
    families = list(REGISTRY.families)
    valid = ", ".join([f"{f}@K" for f in families] + [f"{f}@Ntok" for f in families] + list(REGISTRY.metrics))
    raise ValueError(f"unknown metric {name!r}; valid metrics are: {valid}")


def is_retrieval_metric(metric: str) -> bool:
    """Whether ``metric`` names a retrieval metric (``mrr@5``, ``recall@800tok``, …)."""
    try:
        return parse_metric(metric).is_retrieval
    except ValueError:
        return False


def case_metrics(names: Sequence[str], ranking: retrieval.Ranking, tokens: Sequence[int],
                 expected: retrieval.Relevance | Mapping[str, int] | Iterable[str], *, minimum: int = 1,
                 holders: Iterable[Iterable[str]] | None = None) -> dict[str, float]:
    """Every retrieval metric in ``names`` that the case has (see ``rageval.metrics.retrieval``:
    a family whose sections the case lacks is left out). ``tokens[i]`` is the size of chunk i;
    ``expected``: the graded sections ({section: grade}, or a set: grade 1 each); ``minimum``:
    ``retrieval.relevance_min``; ``holders``: the sections of the index's chunks, when known."""
    rel = retrieval.Relevance.of(expected, minimum, holders).seen_in(ranking)
    has = {True: bool(rel.gains), False: bool(rel.relevant)}
    out: dict[str, float] = {}
    for name in names:
        m = parse_metric(name)
        if not m.is_retrieval:
            raise ValueError(f"{name!r} is not a retrieval metric")
        family = REGISTRY.families[m.family]
        if not has[family.graded]:
            continue
        if m.budget:
            cut = retrieval.budget_prefix(ranking, tokens, m.k)  # type: ignore[arg-type]
            out[name] = family.at(cut, rel, len(cut))
        else:
            out[name] = family.at(ranking, rel, m.k)  # type: ignore[arg-type]
    return out


# --- per-case values --------------------------------------------------------------------------

def detail_share(check: str, key: str) -> Callable[[CaseResult], float | None]:
    """A case's value read from a number its check recorded in ``details[key]``."""
    def value(case: CaseResult) -> float | None:
        found = case.checks.get(check)
        number = None if found is None else found.details.get(key)
        return float(number) if isinstance(number, int | float) and not isinstance(number, bool) else None
    return value


def _model_check(name: str) -> Callable[[CaseInput], CheckResult]:
    def run(x: CaseInput) -> CheckResult:
        if x.answer is None:
            return CheckResult.skipped(NO_ANSWER)
        return x.model_checks().get(name) or CheckResult.skipped("not made by the judge")
    return run


def _retrieval_check(x: CaseInput) -> CheckResult:
    relevant = x.expected_sections if x.relevant_sections is None else x.relevant_sections
    if not x.expected_sections:
        return CheckResult.skipped("out of scope: no expected sections")
    if not relevant:
        return CheckResult.skipped("no expected section is graded ≥ retrieval.relevance_min")
    if x.retrieved is None:
        return CheckResult.skipped("the app reported no retrieval")
    rank = x.first_relevant_rank
    if rank is not None and rank <= x.k:
        return CheckResult.ok(f"first relevant chunk at rank {rank}", k=x.k)
    return CheckResult.fail(f"no chunk with {', '.join(sorted(relevant))} in the top {x.k}", k=x.k)


def _judge_model(cfg: Any) -> bool:
    return cfg.judge.model is not None


def metrics_table_markdown() -> str:
    """The metric table of docs/metrics.md, generated from the registry so the two cannot drift."""
    rows = ["| Metric | What it measures | Definition |", "|---|---|---|"]
    for family, f in REGISTRY.families.items():
        rows.append(f"| `{family}@K` | {f.description} | {f.formula.replace('|', chr(92) + '|')} |")
    for family in REGISTRY.families:
        rows.append(f"| `{family}@Ntok` | {family}@K over the longest prefix of ≤ N context tokens | equal-budget comparison |")
    for name, metric in REGISTRY.metrics.items():
        feeders = ", ".join(f"`{c.name}`" for c in REGISTRY.feeders(name))
        how = f"mean of {feeders}'s 1/0 per case" if feeders and metric.value is None else (
            f"mean per case, from {feeders}" if feeders else "mean per case")
        rows.append(f"| `{name}` | {metric.description} | {how}{' (LLM judge)' if metric.judged else ''} |")
    rows += ["", "| Check | Stage | What it checks |", "|---|---|---|"]
    for name, check in REGISTRY.checks.items():
        zt = "; may be zero-tolerance" if check.zero_tolerance else ""
        rows.append(f"| `{name}` | {check.stage}{zt} | {check.description} |")
    return "\n".join(rows) + "\n"


# --- the declarations -------------------------------------------------------------------------

for _family in (
    RetrievalFamily("hit", "a relevant chunk is in the top k", "1 if any relevant in top k else 0", retrieval.hit_at),
    RetrievalFamily("recall", "share of relevant expected sections found in the top k", "|R ∩ sections(top k)| / |R|",
                    retrieval.recall_at),
    RetrievalFamily("mrr", "reciprocal rank of the first relevant chunk", "1 / rank of first relevant (0 if none)",
                    retrieval.rr_at),
    RetrievalFamily("ndcg", "rank-discounted gain: a section's grade, credited at the first chunk holding it",
                    "Σ gain_i / log2(i+1) / IDCG; gain_i = Σ grades first held by chunk i; IDCG: best order of "
                    "the index's chunks (the grades sorted, one section per chunk)", retrieval.ndcg_at, graded=True),
):
    register(_family)

register(Metric("context_tokens", "mean tokens of retrieved context handed to the generator", kind=COUNT,
                stage=RETRIEVAL,
                value=lambda c: None if c.error or c.context_tokens is None else float(c.context_tokens)))
register(Metric("pass_rate", "share of cases whose every applicable check passed",
                value=lambda c: 1.0 if c.passed is True else 0.0))

RULES_PASS = Metric("rules_pass", "share of cases passing must_include / must_not_include")

register(Check("retrieval", "a chunk holding an expected section is within the deepest cut-off (retrieval.k)",
               RETRIEVAL, _retrieval_check))
register(Check("numbers", "every number+unit of the expected answer is in the answer, and every one of the answer "
               "is in the expected sections", RULE,
               lambda x: check_numbers(x.answer, x.expected_answer, x.sources or x.source, x.units),
               feeds=(Metric("numbers_pass", "share of cases with numbers that pass the number rule (both "
                             "directions)"),), zero_tolerance=True))
register(Check("must_include", "the answer contains every phrase of the case's must_include", RULE,
               lambda x: check_phrases(x.answer, x.must_include, "must_include"), feeds=(RULES_PASS,)))
register(Check("must_not_include", "the answer contains no phrase of the case's must_not_include", RULE,
               lambda x: check_phrases(x.answer, x.must_not_include, "must_not_include", inverse=True),
               feeds=(RULES_PASS,)))
register(Check("refusal", "the answer declines exactly when the case is out of scope", RULE,
               lambda x: check_refusal(x.answer, x.out_of_scope, x.refusal_markers),
               feeds=(Metric("refusal_pass", "share of cases that decline exactly when out of scope (and answer "
                             "otherwise)"),)))
register(Check("judge", "the LLM judge marks the answer correct against the expected answer and sections", MODEL,
               _model_check("judge"), feeds=(Metric("judge_pass", "share of cases the LLM judge marks correct",
                                                    judged=True),), needs_model=_judge_model))
register(Check("faithfulness", "the answer's claims, checked by the judge against the retrieved context and the "
               "expected sections", MODEL, _model_check("faithfulness"),
               feeds=(Metric("faithfulness", "mean share of answer claims supported by the expected sections "
                             "(correctness)", value=detail_share("faithfulness", "faithfulness"), judged=True),
                      Metric("groundedness", "mean share of answer claims supported by the retrieved context",
                             value=detail_share("faithfulness", "groundedness"), judged=True)),
               applies=lambda cfg: cfg.judge.faithfulness, needs_model=_judge_model))
register(Check("answered", "(set by the gate) the candidate has a result for every golden case it runs", GATE, None))
del _family

__all__ = ["COUNT", "GATE", "MODEL", "RATE", "REGISTRY", "RETRIEVAL", "RULE", "CaseInput", "Check", "Metric",
           "MetricName", "RetrievalFamily", "case_metrics", "detail_share", "from_retrieval", "is_rate", "is_retrieval_metric", "metrics_fed_by", "producible",
           "judged_metric_names", "metric_bounds", "metrics_table_markdown", "needs_model", "parse_metric",
           "register", "registered", "retrieval_metric_names", "rule_check_names", "sigma_bounds",
           "summary_metric_names", "zero_tolerance_names"]
