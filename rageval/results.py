"""THE data contract: the RunResult and the records it is made of.

``rageval run`` and ``rageval baseline`` write a RunResult; the baseline artifact carries one;
``rageval gate`` reads two. This module is the one place that knows their shape
(``docs/runresult.md``): frozen records with ``to_dict()`` (the JSON written, key for key as the
schema says) and a strict ``from_dict()`` that is the only validator of a results file — schema
version, required keys, types, and finite numbers. NaN, ±Infinity, a string or null where a
number belongs, or a missing key is an error that names the key.

Records: :class:`CheckResult` (one check of one case), :class:`Retrieved` (one retrieved chunk),
:class:`CaseResult`, :class:`Summary`, :class:`Noise`, :class:`Cost` (``rageval.cost``, re-exported
here), :class:`GoldenInfo` and :class:`RunResult`. Free-form blocks (the resolved ``config``, the
golden and corpus snapshots, the golden checks, a check's details) are kept as plain JSON values,
checked for finite numbers.

Reading and writing the files (strict JSON, atomic writes) is ``rageval.files``'s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from rageval.cost import Cost  # noqa: F401 - re-exported: part of the RunResult contract
from rageval.errors import RagevalError, ResultError
from rageval.files import Reader, read_json

SCHEMA_VERSION = 1
PASS, FAIL, SKIPPED, ERROR = "pass", "fail", "skipped", "error"
STATUSES = (PASS, FAIL, SKIPPED, ERROR)
HOLDOUT_TAG = "holdout"

MSG_SCHEMA = ("RunResult schema_version {got!r} is not supported (this rageval reads {want}). "
              "Re-create it with this rageval version (`rageval run --out` or `rageval baseline`).")


# --- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one case.

    ``status`` is one of pass | fail | skipped | error; ``passed`` is True/False for pass/fail and
    None otherwise. ``details`` are check-specific keys (e.g. ``missing``, ``outside_source`` for
    the number rule) and are flattened into the JSON form beside ``passed``.
    """

    status: str
    score: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}; expected one of {STATUSES}")

    @property
    def passed(self) -> bool | None:
        return {PASS: True, FAIL: False}.get(self.status)

    @classmethod
    def ok(cls, reason: str = "", score: float | None = 1.0, **details: Any) -> CheckResult:
        return cls(PASS, score, reason, details)

    @classmethod
    def fail(cls, reason: str, score: float | None = 0.0, **details: Any) -> CheckResult:
        return cls(FAIL, score, reason, details)

    @classmethod
    def skipped(cls, reason: str, **details: Any) -> CheckResult:
        return cls(SKIPPED, None, reason, details)

    @classmethod
    def error(cls, reason: str, **details: Any) -> CheckResult:
        return cls(ERROR, None, reason, details)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "passed": self.passed, "score": self.score,
                               "reason": self.reason}
        for key, value in self.details.items():
            if key in out:
                raise ValueError(f"check detail {key!r} collides with a record field")
            out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "check", *,
                  reader: Reader | None = None) -> CheckResult:
        r = reader or Reader(where)
        data = r.obj(data, where)
        status = r.req(data, "status", where)
        if status not in STATUSES:
            raise r.fail(f"{where}.status", f"expected one of {', '.join(STATUSES)}, got {status!r}")
        details = {k: r.json(v, f"{where}.{k}") for k, v in data.items()
                   if k not in ("status", "passed", "score", "reason")}
        return cls(status, r.num(data.get("score"), f"{where}.score", optional=True),
                   r.str_(data.get("reason", ""), f"{where}.reason") or "", details)


@dataclass(frozen=True)
class Retrieved:
    """One retrieved chunk, best first in a case's list."""

    chunk_id: str
    sections: tuple[str, ...]
    text: str = ""
    score: float | None = None
    tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "sections": list(self.sections), "text": self.text,
                "score": self.score, "tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Retrieved:
        data = r.obj(data, key)
        return cls(r.str_(r.req(data, "chunk_id", key), f"{key}.chunk_id"),  # type: ignore[arg-type]
                   r.strs(data.get("sections", []), f"{key}.sections"),
                   r.str_(data.get("text") or "", f"{key}.text"),  # type: ignore[arg-type]
                   r.num(data.get("score"), f"{key}.score", optional=True),
                   r.int_(data.get("tokens"), f"{key}.tokens", optional=True))


def slice_labels(slice_values: Mapping[str, Any]) -> list[str]:
    """``key=value`` labels of a case's slice, sorted; booleans read ``true``/``false`` (as in YAML).
    The one spelling used by by-slice aggregates, slice gates and reports."""
    def label(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    return [f"{k}={label(v)}" for k, v in sorted(slice_values.items())]


@dataclass(frozen=True)
class CaseResult:
    """One golden case as answered and scored: the case, the trace, the checks and the verdict."""

    id: str
    question: str
    expected_answer: str = ""
    expected_sections: tuple[str, ...] = ()
    slice: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    out_of_scope: bool = False
    answer: str | None = None
    retrieved: tuple[Retrieved, ...] | None = None
    context_tokens: int | None = None
    first_relevant_rank: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    checks: Mapping[str, CheckResult] = field(default_factory=dict)
    passed: bool | None = None
    failures: tuple[str, ...] = ()
    error: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    latency_ms: float | None = None

    @property
    def holdout(self) -> bool:
        return HOLDOUT_TAG in self.tags

    @property
    def slice_labels(self) -> list[str]:
        return slice_labels(self.slice)

    def replace(self, **changes: Any) -> CaseResult:
        return replace(self, **changes)

    def status(self, check: str) -> str | None:
        """The status of check ``check``, None when the case has no such check."""
        found = self.checks.get(check)
        return None if found is None else found.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "question": self.question, "expected_answer": self.expected_answer,
            "expected_sections": list(self.expected_sections), "slice": dict(self.slice), "tags": list(self.tags),
            "out_of_scope": self.out_of_scope, "answer": self.answer,
            "retrieved": None if self.retrieved is None else [x.to_dict() for x in self.retrieved],
            "context_tokens": self.context_tokens, "first_relevant_rank": self.first_relevant_rank,
            "metrics": dict(self.metrics), "checks": {n: c.to_dict() for n, c in self.checks.items()},
            "passed": self.passed, "failures": list(self.failures), "error": self.error,
            "usage": dict(self.usage), "latency_ms": self.latency_ms,
        }

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> CaseResult:
        data = r.obj(data, key)
        r.keys(data, CASE_KEYS, key)
        for name in CASE_REQUIRED:
            r.req(data, name, key)
        case_id = r.str_(data["id"], f"{key}.id")
        key = f"cases[{case_id}]"
        retrieved = data.get("retrieved")
        slice_ = r.obj(data.get("slice") or {}, f"{key}.slice")
        for name, value in slice_.items():
            if not isinstance(value, str | int | float | bool) or (isinstance(value, float) and not math.isfinite(value)):
                raise r.fail(f"{key}.slice.{name}", f"expected a string, number or boolean, got {value!r}")
        passed = data.get("passed")
        if passed is not None:
            r.bool_(passed, f"{key}.passed")
        return cls(
            id=case_id,  # type: ignore[arg-type]
            question=r.str_(data["question"], f"{key}.question"),  # type: ignore[arg-type]
            expected_answer=r.str_(data.get("expected_answer") or "", f"{key}.expected_answer"),  # type: ignore[arg-type]
            expected_sections=r.strs(data.get("expected_sections") or [], f"{key}.expected_sections"),
            slice=dict(slice_), tags=r.strs(data.get("tags") or [], f"{key}.tags"),
            out_of_scope=r.bool_(data.get("out_of_scope", False), f"{key}.out_of_scope"),
            answer=r.str_(data.get("answer"), f"{key}.answer", optional=True),
            retrieved=None if retrieved is None else tuple(
                Retrieved.from_dict(x, f"{key}.retrieved[{i}]", r) for i, x in enumerate(r.lst(retrieved, f"{key}.retrieved"))),
            context_tokens=r.int_(data.get("context_tokens"), f"{key}.context_tokens", optional=True),
            first_relevant_rank=r.int_(data.get("first_relevant_rank"), f"{key}.first_relevant_rank",
                                       optional=True, minimum=1),
            metrics={k: v for k, v in r.numbers(data.get("metrics") or {}, f"{key}.metrics", optional=False).items()},
            checks={str(n): CheckResult.from_dict(c, f"{key}.checks.{n}", reader=r)
                    for n, c in r.obj(data.get("checks") or {}, f"{key}.checks").items()},
            passed=passed,
            failures=r.strs(data.get("failures") or [], f"{key}.failures"),
            error=r.str_(data.get("error"), f"{key}.error", optional=True),
            usage={str(k): r.int_(v, f"{key}.usage.{k}") for k, v in r.obj(data.get("usage") or {}, f"{key}.usage").items()},
            latency_ms=r.num(data.get("latency_ms"), f"{key}.latency_ms", optional=True),
        )


CASE_KEYS = tuple(f.name for f in fields(CaseResult))
CASE_REQUIRED = ("id", "question", "checks", "passed", "error")


@dataclass(frozen=True)
class Summary:
    """Aggregates over a run's cases (``metrics/aggregate.py`` computes them). ``by_slice`` holds
    one Summary per slice label; a slice's own Summary has none (None)."""

    n_cases: int
    n_passed: int
    n_failed: int
    n_errors: int
    metrics: Mapping[str, float | None]
    by_slice: Mapping[str, Summary] | None = None

    def value(self, metric: str, slice_key: str | None = None) -> float | None:
        """The summary value of ``metric`` (in slice ``slice_key``), None when absent or n/a."""
        if slice_key is None:
            return self.metrics.get(metric)
        part = (self.by_slice or {}).get(slice_key)
        return None if part is None else part.metrics.get(metric)

    def slice_n(self, slice_key: str) -> int:
        part = (self.by_slice or {}).get(slice_key)
        return 0 if part is None else part.n_cases

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n_cases": self.n_cases, "n_passed": self.n_passed, "n_failed": self.n_failed,
                               "n_errors": self.n_errors, "metrics": dict(self.metrics)}
        if self.by_slice is not None:
            out["by_slice"] = {k: s.to_dict() for k, s in self.by_slice.items()}
        return out

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader, *, top: bool = True) -> Summary:
        data = r.obj(data, key)
        r.keys(data, ("n_cases", "n_passed", "n_failed", "n_errors", "metrics", "by_slice"), key)
        counts = [r.int_(r.req(data, n, key), f"{key}.{n}") for n in ("n_cases", "n_passed", "n_failed", "n_errors")]
        by_slice = None
        if top:
            by_slice = {str(label): cls.from_dict(s, f"{key}.by_slice.{label}", r, top=False)
                        for label, s in r.obj(r.req(data, "by_slice", key), f"{key}.by_slice").items()}
        return cls(*counts, metrics=r.numbers(r.req(data, "metrics", key), f"{key}.metrics"),  # type: ignore[misc]
                   by_slice=by_slice)


@dataclass(frozen=True)
class Noise:
    """Noise measured over a baseline's repeats: σ per summary metric (and per slice), the summary
    metrics of each run, how many runs were executed and whether the pipeline was deterministic."""

    sigma: Mapping[str, float]
    by_slice: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    runs: tuple[Mapping[str, float | None], ...] = ()
    runs_executed: int = 1
    deterministic: bool = False

    def sigma_of(self, metric: str, slice_key: str | None = None) -> float:
        values = self.sigma if slice_key is None else self.by_slice.get(slice_key, {})
        return float(values.get(metric) or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"sigma": dict(self.sigma), "by_slice": {k: dict(v) for k, v in self.by_slice.items()},
                "runs": [dict(x) for x in self.runs], "runs_executed": self.runs_executed,
                "deterministic": self.deterministic}

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Noise:
        data = r.obj(data, key)
        r.keys(data, ("sigma", "by_slice", "runs", "runs_executed", "deterministic"), key)

        def sigmas(value: Any, where: str) -> dict[str, float]:
            return {str(k): r.num(v, f"{where}.{k}", minimum=0.0) for k, v in r.obj(value, where).items()}  # type: ignore[misc]

        return cls(sigma=sigmas(r.req(data, "sigma", key), f"{key}.sigma"),
                   by_slice={str(s): sigmas(v, f"{key}.by_slice.{s}")
                             for s, v in r.obj(data.get("by_slice") or {}, f"{key}.by_slice").items()},
                   runs=tuple(r.numbers(x, f"{key}.runs[{i}]") for i, x in enumerate(r.lst(data.get("runs") or [],
                                                                                           f"{key}.runs"))),
                   runs_executed=r.int_(data.get("runs_executed", 1), f"{key}.runs_executed", minimum=1),  # type: ignore[arg-type]
                   deterministic=r.bool_(data.get("deterministic", False), f"{key}.deterministic"))


GOLDEN_KEYS = ("name", "version", "sha256", "content_sha256", "path", "subset", "n_total", "changelog", "cases",
               "narrowed_to")


@dataclass(frozen=True)
class GoldenInfo:
    """Which golden set a run used, and a snapshot of every case of the whole set (``cases``:
    id → fields and expected numbers) for the next run's golden diff and policy-drift checks."""

    name: str
    version: int | str
    sha256: str | None = None
    content_sha256: str | None = None
    path: str | None = None
    subset: str | None = None
    n_total: int | None = None
    changelog: str = ""
    cases: Mapping[str, Mapping[str, Any]] | None = None
    narrowed_to: int | None = None      # set in memory when a baseline is narrowed to a PR's subset

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "version": self.version, "sha256": self.sha256,
               "content_sha256": self.content_sha256, "path": self.path, "subset": self.subset,
               "changelog": self.changelog, "n_total": self.n_total, "cases": self.cases}
        order = ("name", "version", "sha256", "content_sha256", "path", "subset", "changelog", "n_total", "cases")
        data = {k: out[k] for k in order if not (k == "cases" and self.cases is None)}
        if self.narrowed_to is not None:
            data["narrowed_to"] = self.narrowed_to
        return data

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> GoldenInfo:
        data = r.obj(data, key)
        r.keys(data, GOLDEN_KEYS, key)
        version = r.req(data, "version", key)
        if isinstance(version, bool) or not isinstance(version, int | str) or version == "":
            raise r.fail(f"{key}.version", f"expected an integer or a string, got {version!r}")
        cases = data.get("cases")
        if cases is not None:
            cases = {str(i): r.obj(r.json(c, f"{key}.cases.{i}"), f"{key}.cases.{i}")
                     for i, c in r.obj(cases, f"{key}.cases").items()}
        return cls(name=r.str_(r.req(data, "name", key), f"{key}.name"),  # type: ignore[arg-type]
                   version=version,
                   sha256=r.str_(data.get("sha256"), f"{key}.sha256", optional=True),
                   content_sha256=r.str_(data.get("content_sha256"), f"{key}.content_sha256", optional=True),
                   path=r.str_(data.get("path"), f"{key}.path", optional=True),
                   subset=r.str_(data.get("subset"), f"{key}.subset", optional=True),
                   n_total=r.int_(data.get("n_total"), f"{key}.n_total", optional=True),
                   changelog=r.str_(data.get("changelog") or "", f"{key}.changelog"),  # type: ignore[arg-type]
                   cases=cases,
                   narrowed_to=r.int_(data.get("narrowed_to"), f"{key}.narrowed_to", optional=True))


RUN_KEYS = ("schema_version", "tool", "created_at", "git_sha", "golden", "corpus", "golden_checks", "app", "config",
            "config_fingerprint", "metric_names", "summary", "cases", "repeats", "noise", "flaky", "cost", "timings")
RUN_REQUIRED = ("schema_version", "golden", "config", "metric_names", "summary", "cases")


@dataclass(frozen=True)
class RunResult:
    """One evaluation of a golden (sub)set: see docs/runresult.md for every key."""

    golden: GoldenInfo
    config: Mapping[str, Any]
    metric_names: tuple[str, ...]
    summary: Summary
    cases: tuple[CaseResult, ...]
    schema_version: int = SCHEMA_VERSION
    tool: Mapping[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    git_sha: str | None = None
    corpus: Mapping[str, Any] | None = None              # {"sections": {id: {title, document, sha256, numbers}}}
    golden_checks: Mapping[str, Any] | None = None       # {"leaks": [...] | None, "coverage": {...}}
    app: Mapping[str, Any] = field(default_factory=dict)  # {"name", "deterministic"}
    config_fingerprint: str | None = None
    repeats: int = 1
    noise: Noise | None = None
    flaky: tuple[str, ...] = ()
    cost: Cost = field(default_factory=Cost)
    timings: Mapping[str, float] = field(default_factory=dict)

    @cached_property
    def case_map(self) -> dict[str, CaseResult]:
        """The cases by id, in the run's order."""
        return {c.id: c for c in self.cases}

    @property
    def case_ids(self) -> list[str]:
        return [c.id for c in self.cases]

    def sigma(self, metric: str, slice_key: str | None = None) -> float:
        """σ of a summary metric measured by repeats; 0.0 when not measured."""
        return 0.0 if self.noise is None else self.noise.sigma_of(metric, slice_key)

    def replace(self, **changes: Any) -> RunResult:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "tool": dict(self.tool), "created_at": self.created_at,
            "git_sha": self.git_sha, "golden": self.golden.to_dict(), "corpus": self.corpus,
            "golden_checks": self.golden_checks, "app": dict(self.app), "config": self.config,
            "config_fingerprint": self.config_fingerprint, "metric_names": list(self.metric_names),
            "summary": self.summary.to_dict(), "cases": [c.to_dict() for c in self.cases], "repeats": self.repeats,
            "noise": None if self.noise is None else self.noise.to_dict(), "flaky": list(self.flaky),
            "cost": self.cost.to_dict(), "timings": dict(self.timings),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "RunResult", *, error: type[RagevalError] = ResultError) -> RunResult:
        """Validate and build; the only validator of a results file. Raises ``error`` naming
        ``where`` and the dotted key of the first problem."""
        r = Reader(where, error)
        if not isinstance(data, Mapping) or "schema_version" not in data:
            raise error(f"{where}: not a RunResult (no schema_version). Produce it with `rageval run --out`.")
        if data["schema_version"] != SCHEMA_VERSION or isinstance(data["schema_version"], bool):
            raise error(f"{where}: " + MSG_SCHEMA.format(got=data["schema_version"], want=SCHEMA_VERSION))
        r.keys(data, RUN_KEYS, "")
        for name in RUN_REQUIRED:
            r.req(data, name, "")
        cases = tuple(CaseResult.from_dict(c, f"cases[{i}]", r) for i, c in enumerate(r.lst(data["cases"], "cases")))
        seen: set[str] = set()
        for case in cases:
            if case.id in seen:
                raise r.fail("cases", f"case id '{case.id}' appears twice")
            seen.add(case.id)
        optional = {k: r.obj(r.json(data[k], k), k) if data.get(k) is not None else None
                    for k in ("corpus", "golden_checks")}
        return cls(
            golden=GoldenInfo.from_dict(data["golden"], "golden", r),
            config=r.obj(r.json(data["config"], "config"), "config"),
            metric_names=r.strs(data["metric_names"], "metric_names"),
            summary=Summary.from_dict(data["summary"], "summary", r),
            cases=cases,
            tool=r.obj(r.json(data.get("tool") or {}, "tool"), "tool"),
            created_at=r.str_(data.get("created_at"), "created_at", optional=True),
            git_sha=r.str_(data.get("git_sha"), "git_sha", optional=True),
            app=r.obj(r.json(data.get("app") or {}, "app"), "app"),
            config_fingerprint=r.str_(data.get("config_fingerprint"), "config_fingerprint", optional=True),
            repeats=r.int_(data.get("repeats", 1), "repeats", minimum=1),  # type: ignore[arg-type]
            noise=None if data.get("noise") is None else Noise.from_dict(data["noise"], "noise", r),
            flaky=r.strs(data.get("flaky") or [], "flaky"),
            cost=Cost.from_dict(data.get("cost") or {}, "cost", r),
            timings={str(k): r.num(v, f"timings.{k}", minimum=0.0)  # type: ignore[misc]
                     for k, v in r.obj(data.get("timings") or {}, "timings").items()},
            **optional,
        )


def load_result(path: str | os.PathLike[str], error: type[RagevalError] = ResultError) -> RunResult:
    """Read and validate a RunResult file; ``error`` names the file and the key of any problem."""
    return RunResult.from_dict(read_json(path, error), str(path), error=error)


def by_id(cases: Sequence[CaseResult]) -> dict[str, CaseResult]:
    return {c.id: c for c in cases}


Progress = Callable[[int, int], None]
