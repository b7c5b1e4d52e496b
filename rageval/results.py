"""THE data contract: the RunResult and the records it is made of.

``rageval run`` and ``rageval baseline`` write a RunResult; the baseline artifact carries one;
``rageval gate`` reads two. This module is the one place that knows their shape
(``docs/runresult.md``): frozen records with ``to_dict()`` (the JSON written, key for key as the
schema says) and a strict ``from_dict()`` that is the only validator of a results file — schema
version, required keys, types, and finite numbers. NaN, ±Infinity, a string or null where a
number belongs, or a missing key is an error that names the key.

Records: CheckResult, Retrieved, CaseResult (``rageval.records``), Summary, Noise, Cost
(``rageval.cost``), GoldenInfo, RunResult. Free-form blocks (config, the golden and corpus
snapshots, golden checks, a check's details) stay plain JSON values, checked for finite numbers.

Every results file (local, ``--baseline``, ``--candidate``, the artifact's member) comes in through
``RunResult.from_json(bytes, where)`` (``load_result`` for a path); the files themselves (strict
JSON, size bound, atomic and streamed writes) are ``rageval.files``'s.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from rageval.cost import Cost
from rageval.errors import RagevalError, ResultError
from rageval.files import Reader, parse_result_json, paused_gc, read_result_file
from rageval.metrics.registry import metric_bounds, sigma_bounds
from rageval.metrics.values import value_reader
from rageval.packing import pack, packed_cases, unpack
from rageval.records import CaseResult, Record

SCHEMA_VERSION = 2
#: versions this rageval reads: 1 (release 0.1.0: every text inline) and 2 (packed: rageval.packing)
READS = (1, 2)

MSG_SCHEMA = ("RunResult schema_version {got!r} is not supported (this rageval reads {want}). "
              "Re-create it with this rageval version (`rageval run --out` or `rageval baseline`).")


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
        return getattr((self.by_slice or {}).get(slice_key), "n_cases", 0)

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
        by_slice = {str(label): cls.from_dict(s, f"{key}.by_slice.{label}", r, top=False)
                    for label, s in r.obj(r.req(data, "by_slice", key), f"{key}.by_slice").items()} if top else None
        metrics = r.numbers(r.req(data, "metrics", key), f"{key}.metrics", bounds=metric_bounds)
        return cls(*counts, metrics=metrics, by_slice=by_slice)  # type: ignore[misc]


@dataclass(frozen=True)
class Noise:
    """Noise measured over a baseline's repeats: σ per summary metric (and per slice), the summary
    metrics of each run, how many runs were executed and whether the pipeline was deterministic.
    ``totals``: per run, each metric's unrounded [sum, count] over the cases, overall and per slice
    (``rageval.metrics.aggregate.run_totals``), written when runs > 1, so `rageval merge` can
    add the shards of a sharded baseline up to the noise of the whole."""

    sigma: Mapping[str, float]
    by_slice: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    runs: tuple[Mapping[str, float | None], ...] = ()
    runs_executed: int = 1
    deterministic: bool = False
    totals: tuple[Mapping[str, Any], ...] = ()

    def sigma_of(self, metric: str, slice_key: str | None = None) -> float:
        values = self.sigma if slice_key is None else self.by_slice.get(slice_key, {})
        return float(values.get(metric) or 0.0)

    def to_dict(self) -> dict[str, Any]:
        out = {"sigma": dict(self.sigma), "by_slice": {k: dict(v) for k, v in self.by_slice.items()},
               "runs": [dict(x) for x in self.runs], "runs_executed": self.runs_executed,
               "deterministic": self.deterministic}
        if self.totals:
            out["totals"] = [dict(t) for t in self.totals]
        return out

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Noise:
        data = r.obj(data, key)
        r.keys(data, ("sigma", "by_slice", "runs", "runs_executed", "deterministic", "totals"), key)

        def sigmas(value: Any, where: str) -> dict[str, float]:
            return r.numbers(value, where, optional=False, bounds=sigma_bounds)  # type: ignore[return-value]

        return cls(sigma=sigmas(r.req(data, "sigma", key), f"{key}.sigma"),
                   by_slice={str(s): sigmas(v, f"{key}.by_slice.{s}")
                             for s, v in r.obj(data.get("by_slice") or {}, f"{key}.by_slice").items()},
                   runs=tuple(r.numbers(x, f"{key}.runs[{i}]", bounds=metric_bounds) for i, x in enumerate(r.lst(data.get("runs") or [],
                                                                                           f"{key}.runs"))),
                   runs_executed=r.int_(data.get("runs_executed", 1), f"{key}.runs_executed", minimum=1),  # type: ignore[arg-type]
                   deterministic=r.bool_(data.get("deterministic", False), f"{key}.deterministic"),
                   totals=tuple(_run_totals(t, f"{key}.totals[{i}]", r)
                                for i, t in enumerate(r.lst(data.get("totals") or [], f"{key}.totals"))))


def _totals(value: Any, key: str, r: Reader) -> dict[str, list[float]]:
    out = {}
    for name, pair in r.obj(value, key).items():
        pair = r.lst(pair, f"{key}.{name}")
        if len(pair) != 2:
            raise r.fail(f"{key}.{name}", f"expected [sum, count], got {pair!r}")
        out[str(name)] = [float(r.num(pair[0], f"{key}.{name}[0]")),  # type: ignore[arg-type]
                          r.int_(pair[1], f"{key}.{name}[1]")]
    return out  # type: ignore[return-value]


def _run_totals(value: Any, key: str, r: Reader) -> dict[str, Any]:
    data = r.obj(value, key)
    r.keys(data, ("metrics", "by_slice"), key)
    return {"metrics": _totals(r.req(data, "metrics", key), f"{key}.metrics", r),
            "by_slice": {str(label): _totals(v, f"{key}.by_slice.{label}", r)
                         for label, v in r.obj(data.get("by_slice") or {}, f"{key}.by_slice").items()}}


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
        if self.cases is None:
            del out["cases"]
        if self.narrowed_to is not None:
            out["narrowed_to"] = self.narrowed_to
        return out

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> GoldenInfo:
        data = r.obj(data, key)
        r.keys(data, GOLDEN_KEYS, key)
        version = r.req(data, "version", key)
        if isinstance(version, bool) or not isinstance(version, int | str) or version == "":
            raise r.fail(f"{key}.version", f"expected an integer or a string, got {version!r}")
        cases = data.get("cases")
        if cases is not None:
            cases = {str(i): _snapshot_case(c, f"{key}.cases.{i}", r) for i, c in r.obj(cases, f"{key}.cases").items()}
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


GOLDEN_KEYS = tuple(f.name for f in fields(GoldenInfo))


SNAPSHOT_LISTS = ("expected_sections", "tags", "must_include", "must_not_include", "numbers")


def _scalar(value: Any) -> bool:
    kind = type(value)
    return (kind is str or kind is bool or value is None or (kind is int and -1e300 < value < 1e300)
            or (kind is float and math.isfinite(value)))


def _plain_snapshot_case(case: Any) -> bool:
    """A snapshot case as rageval writes it — typed fields of the expected types, anything else a
    scalar, a list of strings or an object of scalars — which the strict reader below would take
    as it is."""
    if type(case) is not dict or type(case.get("question")) is not str or type(case.get("expected_answer", "")) \
            is not str or type(case.get("out_of_scope", False)) is not bool:
        return False
    for name, value in case.items():
        kind = type(value)
        if kind is list:
            if not all(type(v) is str for v in value):
                return False
        elif name in SNAPSHOT_LISTS and value is not None:
            return False
        elif kind is dict:
            if name == "grades" and not all(type(g) is int and g >= 0 for g in value.values()):
                return False
            if not all(type(k) is str and _scalar(v) for k, v in value.items()):
                return False
        elif name == "grades" and value is not None or not _scalar(value):
            return False
    return True


def _snapshot_case(value: Any, key: str, r: Reader) -> dict[str, Any]:
    """One case of the golden snapshot: the fields the golden diff and policy drift read are typed."""
    if _plain_snapshot_case(value):
        return dict(value)
    case = r.obj(r.json(value, key), key)
    r.str_(r.req(case, "question", key), f"{key}.question")
    r.str_(case.get("expected_answer") or "", f"{key}.expected_answer")
    for name in SNAPSHOT_LISTS:
        r.strs(case.get(name) or [], f"{key}.{name}")
    r.bool_(case.get("out_of_scope", False), f"{key}.out_of_scope")
    for section, grade in r.obj(case.get("grades") or {}, f"{key}.grades").items():
        r.int_(grade, f"{key}.grades.{section}")
    return dict(case)


def _corpus(value: Any, key: str, r: Reader) -> dict[str, Any]:
    """``{"sections": {id: {title, document, sha256, numbers?}}}`` as the policy-drift check reads it."""
    corpus = r.obj(r.json(value, key), key)
    for sid, section in r.obj(r.req(corpus, "sections", key), f"{key}.sections").items():
        where = f"{key}.sections.{sid}"
        section = r.obj(section, where)
        r.str_(r.req(section, "sha256", where), f"{where}.sha256")
        r.strs(section.get("numbers") or [], f"{where}.numbers")
    return dict(corpus)


def _files(value: Any, key: str, r: Reader) -> dict[str, dict[str, str]]:
    """``{dotted config key: {path: sha256}}``: the files the config points to, by content."""
    out = {}
    for name, paths in r.obj(value, key).items():
        where = f"{key}.{name}"
        out[str(name)] = {str(path): str(r.str_(sha, f"{where}.{path}")) for path, sha in r.obj(paths, where).items()}
    return out


@dataclass(frozen=True)
class HistoryEntry(Record):
    """One earlier baseline of a branch, as the baselines after it carry it (``RunResult.history``,
    built by ``rageval.gate.trend``): its commit and date, the golden set and judge its values were
    measured with (an entry under another one is a break in the trend, never compared across), and
    its gated metrics over the whole run and over the cases of each tag (``subsets``: a PR's
    ``--subset pr`` is compared with main's values over the cases tagged pr)."""

    commit: str | None
    date: str | None
    golden: str
    golden_version: int | str
    judge: str | None
    metrics: Mapping[str, float | None]
    subsets: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> HistoryEntry:
        entry = super().from_dict(data, key, r)
        for name, values in (("metrics", entry.metrics), *((f"subsets.{t}", v) for t, v in entry.subsets.items())):
            r.numbers(dict(values), f"{key}.{name}", bounds=metric_bounds)      # a rate outside [0, 1] is refused
        return entry


MSG_SHARD = ("{what} is {got!r}: write it as I/N, the I-th of N parts (1 ≤ I ≤ N ≤ {most}), e.g. 2/4; every "
             "part runs the cases whose id hashes to it, and `rageval merge` joins the N results.")
MAX_SHARDS = 1000


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count`` of a run (``--shard 2/4``): the cases whose id's sha256, read as
    a number, is ``index − 1`` modulo ``count``. The split depends on the case id alone, so every
    job of a matrix picks the same partition whatever the machine, the order of the golden file or
    the cases added elsewhere in it."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, what: str = "--shard") -> Shard:
        """``2/4`` → Shard(2, 4); RagevalError naming ``what`` (the option or input) otherwise."""
        m = re.fullmatch(r"\s*(\d{1,4})\s*/\s*(\d{1,4})\s*", text or "")
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)) <= MAX_SHARDS:
            raise RagevalError(MSG_SHARD.format(what=what, got=text, most=MAX_SHARDS))
        return cls(int(m.group(1)), int(m.group(2)))

    def holds(self, case_id: str) -> bool:
        return int.from_bytes(hashlib.sha256(case_id.encode("utf-8")).digest()[:8], "big") % self.count \
            == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Shard:
        data = r.obj(data, key)
        r.keys(data, ("index", "count"), key)
        count = r.int_(r.req(data, "count", key), f"{key}.count", minimum=1)
        index = r.int_(r.req(data, "index", key), f"{key}.index", minimum=1)
        if index > count or count > MAX_SHARDS:  # type: ignore[operator]
            raise r.fail(key, f"shard {index}/{count}: need 1 ≤ index ≤ count ≤ {MAX_SHARDS}")
        return cls(index, count)  # type: ignore[arg-type]


RUN_KEYS = ("schema_version", "tool", "created_at", "git_sha", "golden", "corpus", "golden_checks", "app", "config",
            "config_fingerprint", "metric_names", "summary", "chunks", "cases", "repeats", "noise", "flaky", "cost",
            "timings", "history", "shard", "files")


RUN_REQUIRED = ("schema_version", "golden", "config", "metric_names", "summary", "cases")


@dataclass(frozen=True)
class RunResult:
    """One evaluation of a golden (sub)set: see docs/runresult.md for every key."""

    golden: GoldenInfo
    config: Mapping[str, Any]
    metric_names: tuple[str, ...]
    summary: Summary
    cases: tuple[CaseResult, ...]
    schema_version: int = SCHEMA_VERSION           # what to_dict writes; files of READS load
    tool: Mapping[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    git_sha: str | None = None
    corpus: Mapping[str, Any] | None = None              # {"sections": {id: {title, document, sha256, numbers}}}
    golden_checks: Mapping[str, Any] | None = None       # the golden audit: {"leaks": [...] | None, "coverage": {...}}
    app: Mapping[str, Any] = field(default_factory=dict)  # {"name", "deterministic"}
    config_fingerprint: str | None = None
    repeats: int = 1
    noise: Noise | None = None
    flaky: tuple[str, ...] = ()
    cost: Cost = field(default_factory=Cost)
    timings: Mapping[str, float] = field(default_factory=dict)
    history: tuple[HistoryEntry, ...] = ()          # earlier baselines of the branch, oldest first
    shard: Shard | None = None                      # a part of a run (`rageval run --shard`), merged by `rageval merge`
    # the files the config points to, by content: {"generation.prompt": {"prompt.j2": sha256}} (None: not recorded)
    files: Mapping[str, Mapping[str, str]] | None = None
    source: str = field(default="", compare=False)  # where it was read from (messages only; not written)

    #: written without indentation: a machine's file, and a third smaller (rageval.files.write_json)
    compact_json = True

    @cached_property
    def case_map(self) -> dict[str, CaseResult]:
        """The cases by id, in the run's order."""
        return {c.id: c for c in self.cases}

    @cached_property
    def _values(self) -> dict[str, list[float | None]]:
        return {}

    def values_of(self, metric: str) -> list[float | None]:
        """Each case's value of the summary metric ``metric`` (``rageval.metrics.values``), in the
        order of ``cases``: read once per run, and shared by its summary, the bootstrap and the
        thresholds."""
        table = self._values
        if metric not in table:
            read = value_reader(metric)
            table[metric] = [read(c) for c in self.cases]
        return table[metric]

    @property
    def case_ids(self) -> list[str]:
        return [c.id for c in self.cases]

    def sigma(self, metric: str, slice_key: str | None = None) -> float:
        """σ of a summary metric measured by repeats; 0.0 when not measured."""
        return 0.0 if self.noise is None else self.noise.sigma_of(metric, slice_key)

    def replace(self, **changes: Any) -> RunResult:
        """A copy with ``changes``; one with the same cases keeps what was read off them (the
        cases by id, their metric values)."""
        new = replace(self, **changes)
        if "cases" not in changes or changes["cases"] is self.cases:
            for name in ("case_map", "_values"):
                if name in self.__dict__:
                    new.__dict__[name] = self.__dict__[name]
        return new

    def to_dict(self) -> dict[str, Any]:
        """The JSON written (schema_version 2): packed (rageval.packing), each text written once."""
        cases = [c.to_dict() for c in self.cases]
        return self._tree(pack(cases, self.golden.cases), cases)

    def to_json_tree(self) -> dict[str, Any]:
        """``to_dict``'s JSON, the case records made one at a time as write_json writes them."""
        return self._tree(*packed_cases(self.cases, self.golden.cases))

    def _tree(self, chunks: dict[str, Any], cases: Any) -> dict[str, Any]:
        out = {
            "schema_version": SCHEMA_VERSION, "tool": dict(self.tool), "created_at": self.created_at,
            "git_sha": self.git_sha, "golden": self.golden.to_dict(), "corpus": self.corpus,
            "golden_checks": self.golden_checks, "app": dict(self.app), "config": self.config,
            "config_fingerprint": self.config_fingerprint, "metric_names": list(self.metric_names),
            "summary": self.summary.to_dict(), "chunks": chunks, "cases": cases, "repeats": self.repeats,
            "noise": None if self.noise is None else self.noise.to_dict(), "flaky": list(self.flaky),
            "cost": self.cost.to_dict(), "timings": dict(self.timings),
            **({} if self.shard is None else {"shard": self.shard.to_dict()}),
        }
        if self.files is not None:    # written only when recorded: a file without it reads as before
            out["files"] = {k: dict(v) for k, v in self.files.items()}
        if self.history:          # written only when there is one: a file without it reads as before
            out["history"] = [e.to_dict() for e in self.history]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "RunResult", *, error: type[RagevalError] = ResultError) -> RunResult:
        """Validate and build; the only validator of a results file. Raises ``error`` naming
        ``where`` and the dotted key of the first problem."""
        r = Reader(where, error)
        if not isinstance(data, Mapping) or "schema_version" not in data:
            raise error(f"{where}: not a RunResult (no schema_version). Produce it with `rageval run --out`.")
        if data["schema_version"] not in READS or isinstance(data["schema_version"], bool):
            raise error(f"{where}: " + MSG_SCHEMA.format(got=data["schema_version"], want=" and ".join(map(str, READS))))
        r.keys(data, RUN_KEYS, "")
        for name in RUN_REQUIRED:
            r.req(data, name, "")
        cases = tuple(CaseResult.from_dict(c, f"cases[{i}]", r) for i, c in enumerate(unpack(data, r)))
        seen: set[str] = set()
        for case in cases:
            if case.id in seen:
                raise r.fail("cases", f"case id '{case.id}' appears twice")
            seen.add(case.id)
        optional = {"corpus": None if data.get("corpus") is None else _corpus(data["corpus"], "corpus", r),
                    "golden_checks": None if data.get("golden_checks") is None
                    else r.obj(r.json(data["golden_checks"], "golden_checks"), "golden_checks"),
                    "files": None if data.get("files") is None else _files(data["files"], "files", r)}
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
            history=tuple(HistoryEntry.from_dict(e, f"history[{i}]", r)
                          for i, e in enumerate(r.lst(data.get("history") or [], "history"))),
            shard=None if data.get("shard") is None else Shard.from_dict(data["shard"], "shard", r),
            source=where,
            **optional,
        )

    @classmethod
    def from_json(cls, data: bytes, where: str, *, error: type[RagevalError] = ResultError) -> RunResult:
        """The one way in for a results file's bytes (a file, the baseline artifact): strict JSON within
        the size bound (``files.parse_result_json``), then ``from_dict``, the cycle collector paused.
        Raises ``error`` naming ``where`` and the line or key of the first problem."""
        with paused_gc():
            return cls.from_dict(parse_result_json(data, where, error), where, error=error)


def load_result(path: str | os.PathLike[str], error: type[RagevalError] = ResultError) -> RunResult:
    """Read and validate a RunResult file; ``error`` names the file and the key of any problem."""
    return RunResult.from_json(read_result_file(path, error), str(path), error=error)


Progress = Callable[[int, int], None]
