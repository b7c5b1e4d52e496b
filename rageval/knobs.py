"""What a PR changed that changes answers: its *knobs*, and the files its config points to.

A knob is a config key of the sections that change answers (chunking, embedding, retrieval,
generation — not the cut-offs a run measures at), a file such a key points to whose *content*
changed (a prompt edited in place is a change although its path is the same: the RunResult records
every file the config points to by its sha256, ``RunResult.files``), or one changed corpus file.
Past ``attribution.max_knobs`` they are grouped: config keys by section ("generation (4 keys)", the
values in the comment's config changes), corpus files into one ("corpus (3 files)"), and the last
groups into one ("retrieval + corpus (2 keys, 3 files)") until at most ``max_knobs`` are left.

A file's content at the baseline is read from git at the baseline's recorded commit, which must be
a 40-hex commit id (``rageval.golden.history.file_at`` refuses anything else before git sees it).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.config import config_files, path_label
from rageval.gate.decide import config_diff
from rageval.gate.verdict import ConfigChange, Verdict
from rageval.golden.corpus import Corpus
from rageval.golden.history import file_at
from rageval.results import RunResult
from rageval.settings import Config, flatten, new_at_default

ANSWER_SECTIONS = ("chunking", "embedding", "retrieval", "generation")
#: keys of those sections that change what is measured or how it is sent, not the answers
NOT_KNOBS = ("retrieval.k", "retrieval.token_budgets", "embedding.batch_size", "retrieval.store_k")
DIFF_MAX_LINES = 80             # of a file's diff shown in the comment's config changes


@dataclass(frozen=True)
class Knob:
    """One thing the PR changed: config keys (one key, or a group), files the config points to whose
    content changed (``contents``: key -> its bytes at the baseline), corpus files (``files``)."""

    name: str                                # "chunking.size", "generation (4 keys)", "corpus docs/doi-tra.md"
    keys: tuple[str, ...] = ()               # the dotted config keys it covers
    before: Any = None
    after: Any = None
    files: Mapping[Path, str] = dataclasses.field(default_factory=dict)  # corpus file -> its text at the baseline
    contents: Mapping[str, bytes] = dataclasses.field(default_factory=dict)  # config key -> file at the baseline
    shown: str | None = None                 # the label, when not "name before→after"

    @property
    def label(self) -> str:
        if self.shown is not None:
            return self.shown
        if self.files:
            return self.name
        return f"{self.name} {shown(self.before)}→{shown(self.after)}"


def shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return "(absent)" if value is None else str(value)


# --- files the config points to ---------------------------------------------------------------

@dataclass(frozen=True)
class FileChange:
    """A config key whose file's content differs from the baseline's: ``old`` its bytes at the
    baseline (or why they cannot be had), ``new`` its bytes now."""

    key: str
    before: str | None                       # the path as each config writes it
    after: str
    old: bytes | str
    new: bytes

    @property
    def lines(self) -> tuple[int, int] | None:
        """(+added, −removed) lines; None when the baseline's content is not at hand."""
        if isinstance(self.old, str):
            return None
        diff = list(difflib.ndiff(_text(self.old).splitlines(), _text(self.new).splitlines()))
        return sum(1 for d in diff if d.startswith("+ ")), sum(1 for d in diff if d.startswith("- "))

    @property
    def note(self) -> str:
        counts = self.lines
        where = self.after if self.before in (None, self.after) else f"{self.before}→{self.after}"
        if counts is None:
            return f"{where} content changed"
        return f"{where} content changed, +{counts[0]} −{counts[1]} lines"

    def diff(self) -> str | None:
        if isinstance(self.old, str):
            return None
        lines = list(difflib.unified_diff(_text(self.old).splitlines(), _text(self.new).splitlines(),
                                          f"{self.before} (baseline)", f"{self.after} (PR)", lineterm="", n=1))
        if len(lines) > DIFF_MAX_LINES:
            lines = [*lines[:DIFF_MAX_LINES], f"… ({len(lines) - DIFF_MAX_LINES} more diff lines)"]
        return "\n".join(lines)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _single(paths: Mapping[str, str] | None) -> str | None:
    return next(iter(paths)) if paths and len(paths) == 1 else None


def file_changes(cfg: Config, baseline: RunResult) -> list[FileChange]:
    """Every single-file config key whose file's content differs from the baseline's. The baseline's
    hash is the recorded one (``RunResult.files``); a baseline written before files were recorded is
    compared with the file's content at its commit, when git has it."""
    before_config = flatten(baseline.config)
    recorded = baseline.files or {}
    now = config_files(cfg)
    out = []
    for key, paths in now.items():
        after = _single(paths)
        before = before_config.get(key) if isinstance(before_config.get(key), str) else None
        if after is None or before is None:
            continue                             # no file on one side: a value change, config_diff's row
        new = (cfg.root / after).read_bytes() if not Path(after).is_absolute() else Path(after).read_bytes()
        known = _single(recorded.get(key)) and recorded[key].get(before)
        if known == paths[after]:
            continue
        old = file_at(cfg.root / before, baseline.git_sha) if baseline.git_sha else "the baseline records no commit"
        if known is None and (hashlib.sha256(old).hexdigest() == paths[after] if isinstance(old, bytes)
                              else before == after):
            continue                             # nothing recorded, and git says the same (or cannot tell, same path)
        out.append(FileChange(key, before, after, old, new))
    return out


def with_file_notes(verdict: Verdict, changes: Sequence[FileChange]) -> Verdict:
    """``verdict`` whose config changes say, for each file edited in place, how ("prompt.j2 content
    changed, +3 −1 lines") with the diff; a file the baseline recorded no hash of gets its row here."""
    by_key = {c.key: c for c in changes}
    rows = []
    for row in verdict.config_diff:
        change = by_key.pop(row.key, None)
        rows.append(row if change is None else dataclasses.replace(row, note=change.note, diff=change.diff()))
    rows += [ConfigChange(c.key, c.before, c.after, note=c.note, diff=c.diff()) for c in by_key.values()]
    return dataclasses.replace(verdict, config_diff=tuple(sorted(rows, key=lambda d: d.key)))


# --- knobs ------------------------------------------------------------------------------------

def _is_knob(key: str) -> bool:
    return key.split(".")[0] in ANSWER_SECTIONS and key not in NOT_KNOBS


def config_knobs(before: Mapping[str, Any], after: Mapping[str, Any], max_knobs: int,
                 files: Sequence[FileChange] = ()) -> list[Knob]:
    """The answer-changing config keys that differ, and the files such keys point to whose content
    differs (one knob each: reverted to the baseline's content); grouped by section past ``max_knobs``."""
    edited = {c.key: c for c in files if _is_knob(c.key) and not isinstance(c.old, str)}
    unknown = {c.key for c in files if isinstance(c.old, str)}     # content at the baseline not at hand: by path
    knobs = []
    for d in config_diff(before, after):
        if not _is_knob(d.key) or new_at_default(d.key, d.before, d.after):
            continue
        if d.key in edited or (isinstance(d.before, str) and isinstance(d.after, str) and _is_file_key(d.key)
                               and d.key not in unknown):
            continue                             # a file: a knob when its content changed (below), not its path
        knobs.append(Knob(d.key, (d.key,), d.before, d.after))
    for key, change in edited.items():
        knobs.append(Knob(key, (key,), change.before, change.after, contents={key: change.old},
                          shown=f"{key} ({change.after} edited)"))
    knobs.sort(key=lambda k: k.name)
    return knobs if len(knobs) <= max_knobs else grouped(knobs)


def _is_file_key(key: str) -> bool:
    """Whether ``key`` is a path setting (its value compared by content, not by path)."""
    section, _, name = key.partition(".")
    record = {f.name: f for f in dataclasses.fields(Config)}.get(section)
    if record is None or not dataclasses.is_dataclass(record.default_factory):
        return False
    found = {f.name: f for f in dataclasses.fields(record.default_factory)}.get(name)  # type: ignore[arg-type]
    return found is not None and found.metadata.get("kind") == "path"


def merged(knobs: Sequence[Knob], label: str) -> Knob:
    """One knob standing for several: reverting it reverts every one of them."""
    return Knob(label, tuple(k for knob in knobs for k in knob.keys),
                {k: v for knob in knobs for k, v in _values(knob, "before").items()},
                {k: v for knob in knobs for k, v in _values(knob, "after").items()},
                files={p: t for knob in knobs for p, t in knob.files.items()},
                contents={k: c for knob in knobs for k, c in knob.contents.items()}, shown=label)


def _values(knob: Knob, side: str) -> dict[str, Any]:
    value = getattr(knob, side)
    if len(knob.keys) == 1:
        return {knob.keys[0]: value}
    return dict(value) if isinstance(value, Mapping) else {}


def _count(knobs: Sequence[Knob]) -> str:
    keys = sum(len(k.keys) for k in knobs)
    files = sum(len(k.files) for k in knobs)
    parts = [f"{keys} key{'s' if keys != 1 else ''}"] if keys else []
    parts += [f"{files} file{'s' if files != 1 else ''}"] if files else []
    return ", ".join(parts)


def grouped(knobs: Sequence[Knob]) -> list[Knob]:
    """Config keys grouped by section ("generation (4 keys)"); a section with one key stays as it is."""
    sections: dict[str, list[Knob]] = {}
    for knob in knobs:
        sections.setdefault(knob.name.split(".")[0].split(" ")[0], []).append(knob)
    return [ks[0] if len(ks) == 1 else merged(ks, f"{name} ({_count(ks)})") for name, ks in sections.items()]


def capped(knobs: list[Knob], max_knobs: int) -> list[Knob]:
    """At most ``max_knobs`` knobs: past it, config keys by section, corpus files as one, then the
    last groups as one ("retrieval + corpus (2 keys, 3 files)")."""
    if len(knobs) <= max_knobs:
        return knobs
    corpus = [k for k in knobs if k.files]
    out = grouped([k for k in knobs if not k.files])
    if len(corpus) > 1:
        corpus = [merged(corpus, f"corpus ({_count(corpus)})")]
    out += corpus
    if len(out) > max_knobs:
        rest = out[max_knobs - 1:]
        names = list(dict.fromkeys(k.name.split(" ")[0].split(".")[0] for k in rest))
        out = [*out[:max_knobs - 1], merged(rest, f"{' + '.join(names)} ({_count(rest)})")]
    return out


def corpus_knobs(baseline: RunResult, corpus: Corpus, root: Path) -> tuple[list[Knob], list[str]]:
    """One knob per corpus file whose sections changed since the baseline, with its text at the
    baseline's commit; and why a changed file could not be reverted (not in this checkout)."""
    before = (baseline.corpus or {}).get("sections") or {}
    after = {s.id: s for s in corpus.sections}
    changed_docs = {s.document for sid, s in after.items()
                    if sid not in before or before[sid].get("sha256") != _sha(s.text)}
    changed_docs |= {b.get("document") for sid, b in before.items() if sid not in after}
    knobs, missing = [], []
    for path in corpus.files:
        if path.stem not in changed_docs:
            continue
        old = file_at(path, baseline.git_sha) if baseline.git_sha else "the baseline records no commit"
        label = f"corpus {path_label(path, root)}"
        if isinstance(old, str):
            missing.append(f"{label}: {old}")
        else:
            knobs.append(Knob(label, files={path: old.decode("utf-8", errors="replace")}))
    return knobs, missing


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def all_knobs(cfg: Config, baseline: RunResult, corpus: Corpus) -> tuple[list[Knob], list[str]]:
    """Every knob the PR changed (config keys, files its config points to, corpus files), at most
    ``attribution.max_knobs``; and why a changed file could not be reverted."""
    files = file_changes(cfg, baseline)
    missing = [f"{c.key} ({c.after}): {c.old}" for c in files if isinstance(c.old, str) and _is_knob(c.key)]
    knobs = config_knobs(baseline.config, cfg.to_dict(), cfg.attribution.max_knobs, files)
    found, more = corpus_knobs(baseline, corpus, cfg.root)
    return capped(knobs + found, cfg.attribution.max_knobs), missing + more
