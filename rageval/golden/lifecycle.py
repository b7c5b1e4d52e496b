"""The golden set over time: version discipline, the diff between two versions, policy drift,
leaks of eval questions into what the model sees, and coverage.

A gate is only as good as its golden set, and its failures are human: the policy changes and
the golden set does not; a question leaks into the prompt's few-shot examples; a section has
no case at all. Everything here is a pure function of two *snapshots* — what a RunResult
records about the golden set and the corpus (``golden_snapshot``, ``corpus_snapshot``) — or
of a loaded golden set and the texts it could leak into (the leak check itself:
:mod:`rageval.golden.leaks`). The versions committed in git are read by :mod:`rageval.golden.history`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.errors import ConfigError, did_you_mean
from rageval.golden.corpus import Corpus
from rageval.golden.leaks import Leak, find_leaks, leak_places
from rageval.golden.set import HOLDOUT_TAG, Case, GoldenSet, is_holdout, slice_labels
from rageval.metrics.numbers import extract_quantities
from rageval.records import Record
from rageval.results import GoldenInfo
from rageval.settings import Config
from rageval.text import folded_words

#: Fields of a case compared by the golden diff, in the order the report names them.
DIFF_FIELDS = ("question", "expected_sections", "grades", "expected_answer", "must_include", "must_not_include",
               "out_of_scope", "slice", "tags", "source")
#: Two questions under one id whose folded word sets overlap less than this are different questions.
SAME_QUESTION_JACCARD = 0.5
COVERAGE_LISTED = 100          # per-section counts `validate` prints by name

# --- snapshots (what a RunResult records) ---------------------------------------------------

def expected_numbers(case: Case, units: Sequence[str] | None = None) -> list[str]:
    """The number+unit quantities a case expects (expected answer and must_include), canonical."""
    found = {str(q) for text in (case.expected_answer, *case.must_include) for q in extract_quantities(text, units)}
    return sorted(found)


def golden_snapshot(golden: GoldenSet, units: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every case of the whole golden set (not only the subset run): its fields and the numbers it
    expects, by id. Stored in the RunResult as ``golden.cases``."""
    out = {}
    for case in golden.full.cases:
        data = case.to_dict()
        data.pop("id")
        data["numbers"] = expected_numbers(case, units)
        out[case.id] = data
    return out


def cases_from_snapshot(snapshot: Mapping[str, Mapping[str, Any]]) -> tuple[Case, ...]:
    """The golden cases a snapshot (``golden_snapshot``, a RunResult's ``golden.cases``) records."""
    fields = ("question", "expected_sections", "expected_answer", "source", "slice", "tags", "must_include",
              "must_not_include", "out_of_scope")
    out = []
    for case_id, data in snapshot.items():
        values = {k: data[k] for k in fields if data.get(k) is not None}
        for key in ("expected_sections", "tags", "must_include", "must_not_include"):
            if key in values:
                values[key] = tuple(values[key])
        out.append(Case(id=case_id, **values))
    return tuple(out)


def corpus_snapshot(corpus: Corpus, golden: GoldenSet, units: Sequence[str] | None = None
                    ) -> dict[str, dict[str, Any]]:
    """Every source section: title and sha256 of its text, and — for the sections some case of the
    whole golden set expects — the quantities it states (``numbers``; the others cannot drift a
    case, and reading numbers is the slow part). Stored in the RunResult as ``corpus.sections``;
    the next run compares against it for policy drift."""
    expected = {s for case in golden.full.cases for s in case.expected_sections}
    out: dict[str, dict[str, Any]] = {}
    for s in corpus.sections:
        out[s.id] = {"title": s.title, "document": s.document,
                     "sha256": hashlib.sha256(s.text.encode("utf-8")).hexdigest()}
        if s.id in expected:
            out[s.id]["numbers"] = sorted({str(q) for q in extract_quantities(s.text, units, mentions=False)})
    return out


# --- version discipline ----------------------------------------------------------------------

@dataclass(frozen=True)
class Reference:
    """An earlier state of the golden set to hold the current one to."""

    label: str                                   # "baseline rageval-baseline.json", "git origin/main"
    version: Any
    content_sha256: str | None
    questions: Mapping[str, str]                 # id -> question
    holdout: frozenset[str] = frozenset()        # ids tagged holdout (never named in a PR comment)


def reference_from_result(golden: GoldenInfo, label: str) -> Reference | None:
    """The golden set a RunResult was made with; None for results older than golden snapshots."""
    cases = golden.cases
    if cases is None or not golden.content_sha256:
        return None
    return Reference(label, golden.version, golden.content_sha256,
                     {i: str(c.get("question", "")) for i, c in cases.items()},
                     frozenset(i for i, c in cases.items() if is_holdout(c)))


def reference_from_golden(golden: GoldenSet, label: str) -> Reference:
    return Reference(label, golden.version, golden.content_sha256, {c.id: c.question for c in golden.full.cases},
                     frozenset(c.id for c in golden.full.cases if HOLDOUT_TAG in c.tags))


def reused_ids(history: Sequence[Reference], current: Reference, where: str, *, quote: bool = True) -> list[str]:
    """Ids that any version in ``history`` used for a different question (one message per id, the
    most recent conflicting version). ``quote=False`` leaves the questions' text out, and holdout
    ids too (the PR comment must not show holdout cases)."""
    problems = []
    for case_id, question in current.questions.items():
        for ref in history:
            old = ref.questions.get(case_id)
            if old is None or not _different_question(old, question):
                continue
            if not quote and (case_id in ref.holdout or case_id in current.holdout):
                problems.append(f"{where}: a holdout case id is reused for a different question "
                                f"(details hidden). Give the new question a new id.")
            else:
                asked = f" it asked {old!r}, now it asks {question!r}" if quote else " it asked another question"
                problems.append(
                    f"{where}: case id '{case_id}' is reused for a different question: at {ref.label} "
                    f"(v{ref.version}){asked}. Baselines and old reports refer to cases by id; give the new "
                    f"question a new id.")
            break
    return problems


def _different_question(before: str, after: str) -> bool:
    a, b = set(folded_words(before)), set(folded_words(after))
    if not a or not b:
        return a != b
    return len(a & b) / len(a | b) < SAME_QUESTION_JACCARD


def version_problems(before: Reference, after: Reference, where: str, *, quote: bool = True) -> list[str]:
    """A message when the cases changed since ``before`` but the version did not (ids reused for
    another question: :func:`reused_ids`). ``where`` names the golden file in the message;
    ``quote=False`` leaves holdout ids out (the PR comment must not show holdout cases)."""
    if before.content_sha256 is None or after.content_sha256 is None \
            or before.content_sha256 == after.content_sha256 or str(before.version) != str(after.version):
        return []
    hidden = set() if quote else before.holdout | after.holdout
    added = [i for i in after.questions if i not in before.questions and i not in hidden]
    removed = [i for i in before.questions if i not in after.questions and i not in hidden]
    what = "; ".join(part for part in (
        f"added {_ids(added)}" if added else "", f"removed {_ids(removed)}" if removed else "") if part)
    return [f"{where}: the cases changed since {before.label} ({what or 'cases edited'}) but `version` is still "
            f"{after.version}. Bump `version` and add a `changelog` line saying what changed "
            f"(`rageval golden add` does both)."]


def _ids(ids: Sequence[str], limit: int = 10) -> str:
    return ", ".join(ids[:limit]) + (f" …and {len(ids) - limit} more" if len(ids) > limit else "")


# --- golden diff -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ChangedCase(Record):
    """A case whose id stayed and whose content did not: the fields that changed (DIFF_FIELDS order)."""

    id: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class GoldenDiff(Record):
    """Cases added, removed and changed between two golden snapshots."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[ChangedCase, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def golden_diff(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> GoldenDiff:
    """Cases added, removed and changed (with the fields that changed) between two snapshots."""
    changed = []
    for case_id, now in after.items():
        old = before.get(case_id)
        if old is None:
            continue
        fields = tuple(f for f in DIFF_FIELDS if _norm(old.get(f)) != _norm(now.get(f)))
        if fields:
            changed.append(ChangedCase(case_id, fields))
    return GoldenDiff(tuple(i for i in after if i not in before), tuple(i for i in before if i not in after),
                      tuple(changed))


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _norm(v) for k, v in sorted(value.items())}
    if value in (None, "", [], ()):
        return None
    return value


# --- policy drift ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SectionChange(Record):
    section: str
    removed: tuple[str, ...]      # quantities the old text stated and the new one does not
    added: tuple[str, ...]
    cases: tuple[str, ...]        # cases (whole golden set) that expect this section


@dataclass(frozen=True)
class Drift:
    section: str
    case: str
    stale: tuple[str, ...]        # quantities the case still expects that the section no longer states
    new: tuple[str, ...]          # what the section states instead
    holdout: bool


def policy_drift(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
                 cases: Mapping[str, Mapping[str, Any]]) -> tuple[list[SectionChange], list[Drift]]:
    """Sections whose text changed their quantities, and the cases left expecting an old one.

    A case drifts when it expects a changed section and still expects a quantity that section no
    longer states — unless another of its expected sections states it now. A case updated in the
    same change (expects the new quantity, not the old) does not drift.
    """
    changes: list[SectionChange] = []
    drifts: list[Drift] = []
    for section, now in after.items():
        old = before.get(section)
        if old is None or old.get("sha256") == now.get("sha256") or "numbers" not in old or "numbers" not in now:
            continue
        removed = tuple(q for q in old.get("numbers", ()) if q not in set(now.get("numbers", ())))
        added = tuple(q for q in now.get("numbers", ()) if q not in set(old.get("numbers", ())))
        expecting = tuple(i for i, c in cases.items() if section in (c.get("expected_sections") or ()))
        if not removed and not added:
            continue
        changes.append(SectionChange(section, removed, added, expecting))
        for case_id in expecting:
            case = cases[case_id]
            stated_now = {q for s in case.get("expected_sections") or () for q in (after.get(s) or {}).get("numbers", ())}
            stale = tuple(q for q in case.get("numbers") or () if q in removed and q not in stated_now)
            if stale:
                drifts.append(Drift(section, case_id, stale, added, is_holdout(case)))
    return changes, drifts


def drift_messages(drifts: Sequence[Drift]) -> list[tuple[str, str, list[str]]]:
    """One message per changed section: (section, message, the non-holdout case ids it names).
    Holdout cases are counted, never named."""
    by_section: dict[str, list[Drift]] = {}
    for drift in drifts:
        by_section.setdefault(drift.section, []).append(drift)
    out = []
    for section, group in by_section.items():
        shown = [d for d in group if not d.holdout]
        hidden = len(group) - len(shown)
        stale = sorted({q for d in shown for q in d.stale}) if shown else []
        new = group[0].new
        names = [d.case for d in shown]
        who = ", ".join(names) + (f" and {hidden} holdout case{'s' if hidden != 1 else ''}" if hidden and names
                                  else f"{hidden} holdout case{'s' if hidden != 1 else ''}" if hidden else "")
        states = f" (it now states {', '.join(new)})" if new else ""
        what = f"no longer states {', '.join(stale)}" if stale else "changed its numbers"
        verb = "expects" if len(group) == 1 else "expect"
        out.append((section, f"policy drift: {section} {what}{states}, but {who} still {verb} the old "
                             f"number. Update {'it' if len(group) == 1 else 'them'} in this PR (expected answer, "
                             f"must_include) and bump the golden set's version.", names))
    return out


def drift_since(base_sections: Mapping[str, Mapping[str, Any]] | None, golden: GoldenSet, corpus: Corpus,
                units: Sequence[Any] | None = None) -> list[tuple[str, str, list[str]]]:
    """Policy drift of the working copy (``golden`` and ``corpus`` as they are now) against the corpus
    snapshot of an earlier RunResult: :func:`drift_messages` of :func:`policy_drift` — what
    `rageval validate --baseline` reports before anything runs. Nothing without a snapshot."""
    if base_sections is None:
        return []
    sections = corpus_snapshot(corpus, golden, units)
    return drift_messages(policy_drift(base_sections, sections, golden_snapshot(golden, units))[1])


# --- coverage --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Coverage(Record):
    """Cases per source section and per slice value (whole golden set); sections with fewer than
    ``min_cases`` cases and gated slices with no case."""

    by_section: Mapping[str, int]
    by_slice: Mapping[str, int]
    thin_sections: tuple[str, ...]
    empty_slices: tuple[str, ...]
    min_cases: int

    @property
    def n_covered(self) -> int:
        return sum(1 for n in self.by_section.values() if n)


def coverage(golden: GoldenSet, section_ids: Sequence[str], gated_slices: Iterable[str],
             min_cases: int) -> Coverage:
    """Cases per source section and per slice value (whole golden set); sections with fewer than
    ``min_cases`` cases and gated slices with no case."""
    cases = golden.full.cases
    by_section = {s: 0 for s in section_ids}
    by_slice: dict[str, int] = {}
    for case in cases:
        for section in case.expected_sections:
            by_section[section] = by_section.get(section, 0) + 1
        for label in slice_labels(case.slice):
            by_slice[label] = by_slice.get(label, 0) + 1
    return Coverage(by_section, dict(sorted(by_slice.items())),
                    tuple(s for s, n in by_section.items() if n < min_cases),
                    tuple(s for s in gated_slices if by_slice.get(s, 0) == 0), min_cases)


MSG_UNKNOWN_SLICE = ("{path}: gate.slices: no case of {golden} has the slice label '{label}'{hint}, so that gate "
                     "could never apply. Labels in the golden set: {known}.")


def check_slice_gates(cfg: Config, golden: GoldenSet) -> None:
    """Every gated slice label (``type=injection``) is one some case of the whole golden set has: a
    typo would otherwise be a slice of 0 cases, "insufficient data", never gated. ConfigError."""
    known = sorted({label for case in golden.full.cases for label in slice_labels(case.slice)})
    for label in cfg.gate.slices:
        if label not in known:
            raise ConfigError(MSG_UNKNOWN_SLICE.format(path=cfg.path, golden=golden.path.name, label=label,
                                                       hint=did_you_mean(label, known), known=", ".join(known) or "none"))


def audit_golden(cfg: Config, golden: GoldenSet, corpus: Corpus) -> tuple[list[Leak] | None, Coverage]:
    """The golden set's own checks as `validate` and every RunResult report them: leaks (None when
    ``golden_checks.leaks`` is off) and coverage, both over the whole golden set."""
    gc = cfg.golden_checks
    leaks = None
    if gc.leaks != "off":
        places = leak_places(cfg.generation.prompt, gc.leak_files, corpus, cfg.root)
        leaks = find_leaks(golden.full.cases, places, gc.leak_overlap)
    return leaks, coverage(golden, corpus.ids(), cfg.gate.slices, gc.min_cases_per_section)


def coverage_lines(cov: Coverage) -> list[str]:
    """The coverage summary `rageval validate` prints."""
    sections = cov.by_section
    listed = ", ".join(f"{s} {n}" for s, n in list(sections.items())[:COVERAGE_LISTED])
    if len(sections) > COVERAGE_LISTED:
        listed += f" …and {len(sections) - COVERAGE_LISTED} more (all in golden_checks.coverage of `rageval run --out`)"
    lines = [f"coverage: {cov.n_covered}/{len(sections)} sections have a case; "
             f"cases per section: {listed}"]
    lines.append("coverage: cases per slice: " + (", ".join(f"{s} {n}" for s, n in cov.by_slice.items()) or "none"))
    if cov.thin_sections:
        lines.append(f"coverage: sections with fewer than {cov.min_cases} cases: {', '.join(cov.thin_sections)}")
    if cov.empty_slices:
        lines.append(f"coverage: gated slices with no case: {', '.join(cov.empty_slices)}")
    return lines
