"""`rageval validate` as a library function: a project checked without running it.

:func:`validate` loads the config, the golden set and the corpus and holds them to each other
(expected sections exist, the subset exists), chunks the corpus, reads a replay trace file,
compiles the prompt template, holds the golden set's ``version`` to earlier versions of it (a
baseline's snapshot, the file as committed at a git ref and in its recent commits: cases changed
without a version bump, ids reused for another question), checks **policy drift** against a
baseline's corpus snapshot (a source section no longer states a number a case still expects:
``golden_checks.policy_drift`` block → an error, warn → a warning, off) and runs the golden set's
own checks (leaks, coverage). A problem raises a :class:`~rageval.errors.RagevalError` naming the file and
the fix; otherwise it returns a :class:`ValidationReport`, which the CLI prints and the action can
show. Nothing here reads the environment: the caller says which git ref to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rageval.errors import DatasetError
from rageval.golden import lifecycle
from rageval.golden.corpus import Corpus, load_corpus
from rageval.golden.history import git_history, reference_from_git
from rageval.golden.set import GoldenSet, load_golden
from rageval.metrics.aggregate import index_warnings
from rageval.pipeline.apps.replay import load_traces
from rageval.pipeline.chunking import ChunkStats, chunk_corpus
from rageval.pipeline.generation import ChatGenerator
from rageval.results import RunResult
from rageval.settings import Config

LEAKS_FAIL_TIP = "golden_checks.leaks is 'fail'; set it to 'warn' to report leaks without failing."
DRIFT_TIP = ("golden_checks.policy_drift is 'block'; update the cases it names (or set it to 'warn' to report drift "
             "without failing).")
NO_SNAPSHOT = ("{label} has no golden snapshot (written by an older rageval); version discipline not checked "
               "against it")
MISSING_SKIPPED = ("{n} expected sections are in no corpus file ({shown}…); they are left out of the cases' "
                   "metrics (golden_checks.missing_sections: skip)")
NO_GIT = "version discipline not checked against git: {why}"


@dataclass(frozen=True)
class ValidationReport:
    """What `validate` found in a project that passed: sizes, what the golden set's version was
    held to, notes on what could not be checked, leak warnings and coverage."""

    config: Path
    golden: str                                  # the golden set's name
    version: int | str
    cases: int                                   # in the whole golden set
    sections: int
    files: int
    chunks: int
    chunk_size: int
    chunk_stats: ChunkStats                      # tokens per chunk, chunks holding several sections
    merge_sections: bool                         # chunking.merge_sections
    checked: tuple[str, ...]                     # "the baseline b.json", "git origin/main", "the ids used in …"
    notes: tuple[str, ...]                       # earlier versions that could not be used, and why
    leaks: tuple[lifecycle.Leak, ...]            # warnings (under golden_checks.leaks: warn)
    coverage: lifecycle.Coverage
    warnings: tuple[str, ...] = ()               # what makes the gate say little (an index too small …)
    drift: tuple[str, ...] = ()                  # policy drift against the baseline (golden_checks.policy_drift: warn)

    def lines(self) -> list[str]:
        """The report as `rageval validate` prints it, one line each."""
        lines = [f"note: {note}" for note in self.notes]
        lines.append(f"ok: {self.config.name}: golden set {self.golden} v{self.version} ({self.cases} cases), "
                     f"corpus {self.sections} sections in {self.files} files → {self.chunks} chunks "
                     f"of ≤{self.chunk_size} tokens")
        st = self.chunk_stats
        packing = (f"sections packed together (chunking.merge_sections): {st.multi_section} chunks hold several"
                   if self.merge_sections else "one section per chunk")
        lines.append(f"ok: tokens per chunk: min {st.min_tokens}, median {st.median_tokens:g}, "
                     f"mean {st.mean_tokens:.1f}, max {st.max_tokens}; {packing}")
        if self.checked:
            lines.append(f"ok: version {self.version} is consistent with {' and '.join(self.checked)}")
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"warning: {leak.message()}" for leak in self.leaks]
        lines += [f"warning: {message}" for message in self.drift]
        return lines + lifecycle.coverage_lines(self.coverage)


def _references(cfg: Config, baseline: tuple[RunResult, str] | None,
                git_ref: str | None) -> tuple[list[lifecycle.Reference], list[str]]:
    """The earlier golden sets to hold the working copy to (the baseline's, git's at ``git_ref``),
    and notes on those that cannot be had."""
    references: list[lifecycle.Reference] = []
    notes: list[str] = []
    if baseline is not None:
        result, label = baseline
        before = lifecycle.reference_from_result(result.golden, f"the baseline {label}")
        if before is None:
            notes.append(NO_SNAPSHOT.format(label=label))
        else:
            references.append(before)
    if git_ref is not None:
        before, why = reference_from_git(cfg.golden, git_ref)
        if before is None:
            notes.append(NO_GIT.format(why=why))
        else:
            references.append(before)
    return references, notes


def version_discipline(cfg: Config, golden: GoldenSet, *, baseline: tuple[RunResult, str] | None = None,
                       git_ref: str | None = None) -> tuple[list[str], list[str]]:
    """(what the working copy was checked against, notes); DatasetError naming every problem
    found: cases changed without a version bump, an id reused for another question — also
    against the file's recent git history when ``git_ref`` is given (None: git is not asked)."""
    now = lifecycle.reference_from_golden(golden, "the working copy")
    references, notes = _references(cfg, baseline, git_ref)
    problems: list[str] = []
    for before in references:
        problems += [p for p in lifecycle.version_problems(before, now, str(golden.path)) if p not in problems]
    history = git_history(cfg.golden)[0] if git_ref is not None else []
    problems += lifecycle.reused_ids([*references, *history], now, str(golden.path))
    if problems:
        raise DatasetError("\n".join(problems))
    checked = [r.label for r in references]
    if history:
        checked.append(f"the ids used in {len(history)} commit{'s' if len(history) != 1 else ''} of {golden.path.name}")
    return checked, notes


def validate(cfg: Config, *, subset: str | None = None, baseline: tuple[RunResult, str] | None = None,
             git_ref: str | None = None) -> ValidationReport:
    """Check the project ``cfg`` describes without running it (see the module docstring).
    ``baseline``: (a baseline RunResult, how to name it) to hold the golden version to;
    ``git_ref``: the ref holding the previous golden set, None to leave git out."""
    golden = load_golden(cfg.golden)
    skipped: list[str] = []
    corpus = load_corpus(cfg.corpus, cfg.root)
    if cfg.golden_checks.missing_sections == "fail":
        golden.check_sections(corpus.ids())
    else:
        missing = {s for case in golden.cases for s in case.expected_sections} - set(corpus.ids())
        if missing:
            skipped = [MISSING_SKIPPED.format(n=len(missing), shown=", ".join(sorted(missing)[:5]))]
    lifecycle.check_slice_gates(cfg, golden)
    if subset:
        golden.subset(subset)                       # raises when no case carries the tag
    chunks = chunk_corpus(corpus, cfg.chunking.size, cfg.chunking.overlap,
                          merge_sections=cfg.chunking.merge_sections)
    if cfg.app.type == "replay" and cfg.app.path is not None:
        load_traces(cfg.app.path)
    if cfg.generation.provider == "openai" and cfg.generation.model and cfg.generation.prompt:
        ChatGenerator(None, cfg.generation.model, cfg.generation.prompt)   # compiles the prompt template
    checked, notes = version_discipline(cfg, golden, baseline=baseline, git_ref=git_ref)
    drift = policy_drift(cfg, golden, corpus, baseline)
    notes = [*notes, *skipped]
    leaks, cov = lifecycle.audit_golden(cfg, golden, corpus)
    if leaks and cfg.golden_checks.leaks == "fail":
        raise DatasetError("\n".join(f"{cfg.golden}: {x.message()}" for x in leaks), tip=LEAKS_FAIL_TIP)
    return ValidationReport(cfg.path, golden.name, golden.version, len(golden.cases), len(corpus.sections),
                            len(corpus.files), len(chunks), cfg.chunking.size, ChunkStats.of(chunks),
                            cfg.chunking.merge_sections, tuple(checked), tuple(notes),
                            tuple(leaks or ()), cov, tuple(index_warnings(len(chunks), cfg.retrieval.top_k)),
                            tuple(drift))


def policy_drift(cfg: Config, golden: GoldenSet, corpus: Corpus, baseline: tuple[RunResult, str] | None) -> list[str]:
    """Policy drift of the working copy against the baseline's corpus snapshot, as the gate would
    find it: DatasetError under ``golden_checks.policy_drift: block``, the messages under ``warn``."""
    mode = cfg.golden_checks.policy_drift
    if baseline is None or mode == "off":
        return []
    result, label = baseline
    found = lifecycle.drift_since((result.corpus or {}).get("sections"), golden, corpus, cfg.checks.units)
    messages = [f"{message} (against the baseline {label})" for _, message, _ in found]
    if messages and mode == "block":
        raise DatasetError("\n".join(f"{golden.path}: {m}" for m in messages), tip=DRIFT_TIP)
    return messages
