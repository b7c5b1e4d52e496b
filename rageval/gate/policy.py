"""The policy a PR is gated by: the stricter of main's and the PR's, key by key.

The PR's rageval.yml is part of the PR, so it cannot be what judges the PR: a PR that writes
``gate: {}`` would otherwise unblock itself. main's resolved config travels in the baseline
RunResult (``config``); its ``gate`` and ``golden_checks`` sections are read back like rageval.yml
(``rageval.config.read_section``) and merged with the PR's by :data:`RULES`:

* floors: the higher floor per metric, every metric either side floors;
* max_drop: the smaller allowed drop per metric, every metric either side gates;
* zero_tolerance: the union; slices: the union, each slice's floors and drops merged as above;
* noise_k, rerun.margin, rerun.times, min_slice_cases: the smaller (a narrower band, fewer
  chances for a re-run to unblock, more slices gated); min_common_cases: the larger;
* significance: none (every breach blocks) over any level, else the larger level;
* missing_baseline, errors, not_comparable, known_failures: the blocking choice of the two;
* golden_checks.policy_drift, golden_checks.leaks, golden_checks.missing_sections: the more
  severe; leak_overlap: the smaller.

So a PR that loosens the gate gets its values only once it is on main (its own baseline then
carries them); tightening applies at once. What the PR loosened and tightened is reported, and
the comment says it first. A baseline whose policy cannot be read blocks: the gate cannot tell
what the PR is held to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from rageval.config import read_section
from rageval.errors import ConfigError
from rageval.records import Record
from rageval.results import RunResult
from rageval.settings import Config, GateConfig, GoldenChecksConfig, RerunConfig, SliceGate, flatten

MSG_UNREADABLE = ("main's gate policy, recorded in the baseline, cannot be read by this rageval ({problem}); the "
                  "gate cannot tell what this PR is held to. Re-create the baseline on main with this version.")
MSG_LOOSENED = "this PR loosens the gate: {keys}; main's values apply until it is merged"
MAX_KEYS_SHOWN = 6


def _order(*values: Any) -> Callable[[Any, Any], Any]:
    """The later of two choices in ``values`` (listed from lenient to strict)."""
    return lambda a, b: max(a, b, key=values.index)


def _thresholds(higher: bool) -> Callable[[Mapping[str, float], Mapping[str, float]], dict[str, float]]:
    pick = max if higher else min
    return lambda a, b: {m: pick(v for v in (a.get(m), b.get(m)) if v is not None) for m in dict.fromkeys([*a, *b])}


_FLOORS, _DROPS = _thresholds(higher=True), _thresholds(higher=False)


def _slices(a: Mapping[str, SliceGate], b: Mapping[str, SliceGate]) -> dict[str, SliceGate]:
    empty = SliceGate()
    return {k: SliceGate(_FLOORS(a.get(k, empty).floors, b.get(k, empty).floors),
                         _DROPS(a.get(k, empty).max_drop, b.get(k, empty).max_drop)) for k in dict.fromkeys([*a, *b])}


def _significance(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


def _rerun(a: RerunConfig, b: RerunConfig) -> RerunConfig:
    return RerunConfig(min(a.margin, b.margin), min(a.times, b.times))


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*a, *b]))


def _own(main: Any, pr: Any) -> Any:
    """Not policy (what is measured or listed): the PR's own value."""
    return pr


#: how the stricter of two values is taken, for every key of the sections a PR is gated by
RULES: dict[type, dict[str, Callable[[Any, Any], Any]]] = {
    GateConfig: {
        "floors": _FLOORS, "max_drop": _DROPS, "noise_k": min, "zero_tolerance": _union, "slices": _slices,
        "rerun": _rerun, "missing_baseline": _order("floors_only", "fail"), "errors": _order("ignore", "fail"),
        "significance": _significance, "min_slice_cases": min, "min_common_cases": max,
        "not_comparable": _order("pass", "fail"), "known_failures": _order("report", "block"),
    },
    GoldenChecksConfig: {
        "leaks": _order("off", "warn", "fail"), "leak_overlap": min, "policy_drift": _order("off", "warn", "block"),
        "leak_files": _own, "min_cases_per_section": _own, "missing_sections": _order("skip", "fail"),
    },
}


@dataclass(frozen=True)
class PolicyChange(Record):
    """A gate key whose PR value differs from main's (None: absent on that side)."""

    key: str
    main: Any
    pr: Any


@dataclass(frozen=True)
class PolicyReport(Record):
    """Which policy applied: the keys the PR loosens (main's value applied) and tightens (the PR's
    applied at once); ``unreadable``: why main's policy could not be read (the gate then blocks)."""

    loosened: tuple[PolicyChange, ...] = ()
    tightened: tuple[PolicyChange, ...] = ()
    unreadable: str | None = None
    OMIT_NONE = ("unreadable",)

    @property
    def message(self) -> str | None:
        """The comment's first words about the policy, when the PR loosens it."""
        if not self.loosened:
            return None
        keys = [c.key for c in self.loosened]
        shown = ", ".join(keys[:MAX_KEYS_SHOWN]) + (f" and {len(keys) - MAX_KEYS_SHOWN} more"
                                                    if len(keys) > MAX_KEYS_SHOWN else "")
        return MSG_LOOSENED.format(keys=shown)


@dataclass(frozen=True)
class Policy:
    """The sections the PR is gated by, and the report of how they were chosen."""

    gate: GateConfig
    golden_checks: GoldenChecksConfig
    report: PolicyReport

    def applied_to(self, cfg: Config) -> Config:
        return replace(cfg, gate=self.gate, golden_checks=self.golden_checks)


def stricter(main: Any, pr: Any) -> Any:
    """The stricter of two sections (a GateConfig or GoldenChecksConfig), key by key (:data:`RULES`)."""
    rules = RULES[type(main)]
    return type(main)(**{f.name: rules[f.name](getattr(main, f.name), getattr(pr, f.name)) for f in fields(main)})


def _plain(section: Any) -> dict[str, Any]:
    return flatten({f.name: _value(getattr(section, f.name)) for f in fields(section)})


def _value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _value(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _value(getattr(value, f.name)) for f in fields(value)}
    return list(value) if isinstance(value, tuple) else value


def _changes(name: str, main: Any, pr: Any, merged: Any) -> tuple[list[PolicyChange], list[PolicyChange]]:
    """(loosened, tightened) keys of one section."""
    before, after, applied = _plain(main), _plain(pr), _plain(merged)
    own = tuple(k for k, rule in RULES[type(main)].items() if rule is _own)
    loosened, tightened = [], []
    for key in dict.fromkeys([*before, *after]):
        if before.get(key) == after.get(key) or key.split(".")[0] in own:
            continue
        change = PolicyChange(f"{name}.{key}", before.get(key), after.get(key))
        if applied.get(key) != after.get(key):
            loosened.append(change)
        elif applied.get(key) != before.get(key):
            tightened.append(change)
    return loosened, tightened


def resolved_known_failures(gate: GateConfig, default: str) -> GateConfig:
    """``gate`` with ``known_failures`` set: the config's, else ``default`` (the mode's)."""
    return gate if gate.known_failures is not None else replace(gate, known_failures=default)


def effective(cfg: Config, baseline: RunResult | None, *, known_failures: str = "report") -> Policy:
    """The policy ``cfg`` (the PR's) is gated by against ``baseline`` (main's): see the module
    docstring. ``known_failures`` is the mode's default for ``gate.known_failures``."""
    pr_gate = resolved_known_failures(cfg.gate, known_failures)
    if baseline is None:
        return Policy(pr_gate, cfg.golden_checks, PolicyReport())
    label = f"the gate policy in {baseline.source or 'the baseline'} (`config`)"
    try:
        main_gate = resolved_known_failures(read_section(GateConfig, baseline.config.get("gate"), "gate", label),
                                            known_failures)
        main_golden = read_section(GoldenChecksConfig, baseline.config.get("golden_checks"), "golden_checks", label,
                                   cfg.path)
    except ConfigError as exc:
        return Policy(pr_gate, cfg.golden_checks, PolicyReport(unreadable=MSG_UNREADABLE.format(
            problem=exc.message.rstrip("."))))
    gate, golden = stricter(main_gate, pr_gate), stricter(main_golden, cfg.golden_checks)
    loosened, tightened = _changes("gate", main_gate, pr_gate, gate)
    more_loose, more_tight = _changes("golden_checks", main_golden, cfg.golden_checks, golden)
    return Policy(gate, golden, PolicyReport(tuple(loosened + more_loose), tuple(tightened + more_tight)))
