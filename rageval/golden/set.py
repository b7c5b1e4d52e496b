"""The golden set: load, validate, fingerprint, select subsets, label slices.

Two formats load: the canonical one (YAML or JSON mapping with ``dataset``, ``version``,
``cases``) and the seeds' flat ``golden.json`` list (keys ``id, muc_ky_vong, nguon, cau_hoi,
tra_loi_ky_vong``). Labels point at document sections (``DT-1``), never at chunk ids, so one
golden set compares any two chunkings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from rageval.errors import DatasetError, did_you_mean
from rageval.files import paused_gc
from rageval.parse import load_json, load_yaml, load_yaml_node, read_bytes
from rageval.records import HOLDOUT_TAG, CaseResult, slice_labels
from rageval.text import normalize

CASE_KEYS = ("id", "question", "expected_sections", "expected_answer", "source", "slice", "tags",
             "must_include", "must_not_include", "out_of_scope")
SEED_KEYS = {"id": "id", "cau_hoi": "question", "muc_ky_vong": "expected_sections",
             "tra_loi_ky_vong": "expected_answer", "nguon": "source"}
__all__ = ["HOLDOUT_TAG", "Case", "GoldenSet", "is_holdout", "load_golden", "parse_golden", "slice_labels"]
TOP_KEYS = ("dataset", "version", "changelog", "created", "description", "cases")

MSG_DUPLICATE = "{path}: case id '{id}' appears twice ({where}). Give every case a unique id."
MSG_UNKNOWN_SECTION = ("{path}: case '{id}' expects section '{section}', which no corpus document has{hint}. "
                       "Fix the label, or add a '## {section} …' heading to the corpus.")
MSG_EMPTY_PHRASE = ("{where}: '{key}' item {n} is empty; a rule phrase needs words (the answer is searched "
                    "for it). Remove the item or write the phrase.")
MSG_GRADES = ("{where}: 'expected_sections' grades must be whole numbers ≥ 0, e.g. {{DT-1: 2, DT-3: 1}} "
              "(0: judged not relevant), got {got!r} for '{section}'.")
MSG_EMPTY_SUBSET = "{path}: no case is tagged '{subset}'. Tag cases with `tags: [{subset}]`, or run without --subset."


@dataclass(frozen=True)
class Case:
    id: str
    question: str
    expected_sections: tuple[str, ...] = ()
    expected_answer: str = ""
    source: str = ""
    slice: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    must_include: tuple[str, ...] = ()
    must_not_include: tuple[str, ...] = ()
    out_of_scope: bool = False
    grades: Mapping[str, int] = field(default_factory=dict)   # graded expected_sections; empty: grade 1 each

    def relevance(self) -> dict[str, int]:
        """Expected section → grade (1 each when the case lists its sections without grades)."""
        return {s: self.grades.get(s, 1) for s in self.expected_sections}

    def slice_labels(self) -> list[str]:
        """``type=lookup``-style labels, one per slice key, used for by-slice aggregates."""
        return slice_labels(self.slice)

    def to_dict(self) -> dict[str, Any]:
        """The case's fields (the golden snapshot of a RunResult, the content hash); ``grades``
        only for a graded case, so the hash of an ungraded set is what it was before grades."""
        out = {"id": self.id, "question": self.question, "expected_sections": list(self.expected_sections),
               "expected_answer": self.expected_answer, "source": self.source, "slice": dict(self.slice),
               "tags": list(self.tags), "must_include": list(self.must_include),
               "must_not_include": list(self.must_not_include), "out_of_scope": self.out_of_scope}
        if self.grades:
            out["grades"] = dict(self.grades)
        return out


def is_holdout(*cases: Mapping[str, Any] | CaseResult | None) -> bool:
    """Whether any of these case records (RunResult cases or golden snapshots) is tagged holdout:
    such cases count in aggregates but are never quoted in a PR comment."""
    return any(HOLDOUT_TAG in (case.tags if isinstance(case, CaseResult) else case.get("tags") or ())
               for case in cases if case)


@dataclass(frozen=True)
class GoldenSet:
    name: str
    version: int | str
    sha256: str
    path: Path
    cases: tuple[Case, ...]
    changelog: str = ""
    all_cases: tuple[Case, ...] = ()      # the whole file's cases when this is a subset

    @property
    def full(self) -> GoldenSet:
        """The whole golden set this subset was cut from (itself when it is not a subset)."""
        if not self.all_cases:
            return self
        return GoldenSet(self.name, self.version, self.sha256, self.path, self.all_cases, self.changelog)

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    @cached_property
    def content_sha256(self) -> str:
        """sha256 of what the whole set's cases say (name and cases, canonical JSON): comments, formatting,
        ``version`` and ``changelog`` do not change it, an edited question or answer does."""
        digest = hashlib.sha256()
        for part in _canonical_parts(self.name, self.full.cases):
            digest.update(part.encode("utf-8"))
        return digest.hexdigest()

    def subset(self, tag: str | None) -> GoldenSet:
        """Cases tagged ``tag``; all cases when tag is None or empty."""
        if not tag:
            return self
        chosen = tuple(c for c in self.cases if tag in c.tags)
        if not chosen:
            raise DatasetError(MSG_EMPTY_SUBSET.format(path=self.path, subset=tag))
        return GoldenSet(self.name, self.version, self.sha256, self.path, chosen, self.changelog,
                         self.all_cases or self.cases)

    def check_sections(self, known: Iterable[str]) -> None:
        """Every expected section must exist in the corpus."""
        known = set(known)
        for case in self.cases:
            for section in case.expected_sections:
                if section not in known:
                    raise DatasetError(MSG_UNKNOWN_SECTION.format(
                        path=self.path, id=case.id, section=section, hint=did_you_mean(section, known)))

    def describe(self, subset: str | None = None) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "sha256": self.sha256,
                "content_sha256": self.content_sha256, "path": self.path.name,
                "subset": subset, "changelog": self.changelog}


def _canonical_parts(name: str, cases: Sequence[Case]) -> Iterator[str]:
    """``json.dumps({"dataset": name, "cases": [case.to_dict() …]}, sort_keys=True, ensure_ascii=False,
    separators=(",", ":"))`` in pieces, a case at a time: the same text (with sorted keys "cases" comes
    first, and a list is its items' texts between commas), without the whole of it and every case's
    dict held at once (20,000 cases: about 40 MB at a run's end, when it peaks)."""
    def dumps(value: Any) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    yield '{"cases":['
    for i, case in enumerate(cases):
        yield dumps(case.to_dict()) if i == 0 else "," + dumps(case.to_dict())
    yield '],"dataset":' + dumps(name) + "}"


def load_golden(path: str | Path) -> GoldenSet:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: golden set not found. Check `golden:` in the config (paths are relative to it).")
    data = read_bytes(path, error=DatasetError)
    with paused_gc():                 # tens of thousands of new objects, no cycle among them
        return parse_golden(data, path)


def parse_golden(raw_bytes: bytes, path: Path) -> GoldenSet:
    """A golden set from its file content; ``path`` names it in messages (and picks JSON by suffix),
    so an older version read from git parses exactly like the working copy. Strict: see rageval.parse.

    YAML is read without line numbers first (``load_yaml``: the fast read); only a file with a
    problem is read again with its node tree, so the message names the case's line."""
    if path.suffix.lower() == ".json":
        return _golden(load_json(raw_bytes, str(path), error=DatasetError), raw_bytes, path, [])
    raw = load_yaml(raw_bytes, str(path), error=DatasetError)
    try:
        return _golden(raw, raw_bytes, path, [])
    except DatasetError:
        raw, node = load_yaml_node(raw_bytes, str(path), error=DatasetError)
        return _golden(raw, raw_bytes, path, _case_lines(node))


def _golden(raw: Any, raw_bytes: bytes, path: Path, lines: Sequence[int | None]) -> GoldenSet:
    """The golden set of a file's data; ``lines``: the line of each case, for messages."""
    sha = hashlib.sha256(raw_bytes).hexdigest()
    if isinstance(raw, list):  # the seeds' flat golden.json
        return GoldenSet(name=path.stem, version=1, sha256=sha, path=path,
                         cases=_cases([_from_seed(path, i, c) for i, c in enumerate(raw)], path, lines))
    if not isinstance(raw, dict):
        raise DatasetError(f"{path}: expected a mapping with `dataset`, `version` and `cases` (or a list of cases), "
                           f"got {type(raw).__name__}.")
    for key in raw:
        if key not in TOP_KEYS:
            raise DatasetError(f"{path}: unknown top-level key '{key}'{did_you_mean(str(key), TOP_KEYS)}. "
                               f"Valid keys: {', '.join(TOP_KEYS)}.")
    for key in ("dataset", "version", "cases"):
        if key not in raw:
            raise DatasetError(f"{path}: missing top-level key '{key}'. A golden set needs dataset, version and cases.")
    name, version = raw["dataset"], raw["version"]
    if not isinstance(name, str) or not name:
        raise DatasetError(f"{path}: 'dataset' must be a non-empty string, got {name!r}.")
    if isinstance(version, bool) or not isinstance(version, (int, str)) or version == "":
        raise DatasetError(f"{path}: 'version' must be an integer or a string like '3', got {version!r}.")
    if not isinstance(raw["cases"], list) or not raw["cases"]:
        raise DatasetError(f"{path}: 'cases' must be a non-empty list of cases.")
    changelog = raw.get("changelog") or ""
    if isinstance(changelog, list):
        changelog = str(changelog[-1]) if changelog else ""
    return GoldenSet(name=name, version=version, sha256=sha, path=path,
                     cases=_cases(raw["cases"], path, lines), changelog=str(changelog))


def _case_lines(node: yaml.Node | None) -> list[int | None]:
    """Line number of each entry of `cases:` (YAML), for error messages."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "cases" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    if isinstance(node, yaml.SequenceNode):
        return [item.start_mark.line + 1 for item in node.value]
    return []


def _from_seed(path: Path, index: int, item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise DatasetError(f"{path}: case #{index + 1} must be a mapping, got {type(item).__name__}.")
    if any(k in item for k in SEED_KEYS if k != "id"):
        return {SEED_KEYS.get(k, k): v for k, v in item.items()}
    return item


def _where(path: Path, index: int, lines: Sequence[int | None], case_id: Any = None) -> str:
    line = lines[index] if index < len(lines) else None
    label = f"case '{case_id}'" if isinstance(case_id, str) and case_id else f"case #{index + 1}"
    return f"{path}: line {line}: {label}" if line else f"{path}: {label}"


def _cases(items: list[Any], path: Path, lines: Sequence[int | None]) -> tuple[Case, ...]:
    seen: dict[str, int] = {}
    out: list[Case] = []
    for index, item in enumerate(items):
        where = _where(path, index, lines, item.get("id") if isinstance(item, dict) else None)
        if not isinstance(item, dict):
            raise DatasetError(f"{where}: must be a mapping of case fields, got {type(item).__name__}.")
        for key in item:
            if key not in CASE_KEYS:
                raise DatasetError(f"{where}: unknown key '{key}'{did_you_mean(str(key), CASE_KEYS)}. "
                                   f"Valid keys: {', '.join(CASE_KEYS)}.")
        case_id = item.get("id")
        if not isinstance(case_id, (str, int)) or isinstance(case_id, bool) or str(case_id) == "":
            raise DatasetError(f"{where}: missing 'id' (a short unique string such as q01).")
        case_id = str(case_id)
        if case_id in seen:
            raise DatasetError(MSG_DUPLICATE.format(path=path, id=case_id,
                                                    where=f"cases #{seen[case_id] + 1} and #{index + 1}"))
        seen[case_id] = index
        question = item.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}: missing 'question' (the text a user would ask).")
        sections, grades = _expected(item.get("expected_sections", []), where)
        out.append(Case(
            id=case_id,
            question=question,
            expected_sections=sections,
            grades=grades,
            expected_answer=_str(item.get("expected_answer", ""), "expected_answer", where),
            source=_str(item.get("source", ""), "source", where),
            slice=_slice(item.get("slice", {}), where),
            tags=_str_list(item.get("tags", []), "tags", where),
            must_include=_phrases(item.get("must_include", []), "must_include", where),
            must_not_include=_phrases(item.get("must_not_include", []), "must_not_include", where),
            out_of_scope=_bool(item.get("out_of_scope", False), where),
        ))
        case = out[-1]
        if not case.out_of_scope and not case.expected_sections and not case.expected_answer:
            raise DatasetError(f"{where}: give 'expected_sections' and/or 'expected_answer', "
                               "or mark the case `out_of_scope: true`.")
    return tuple(out)


def _expected(value: Any, where: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """``expected_sections``: a list of ids (grade 1 each) or a mapping id → grade (graded relevance)."""
    if not isinstance(value, dict):
        return _str_list(value, "expected_sections", where), {}
    grades: dict[str, int] = {}
    for section, grade in value.items():
        if isinstance(section, bool) or not isinstance(section, (str, int)) or str(section) == "":
            raise DatasetError(f"{where}: 'expected_sections' keys must be section ids, got {section!r}.")
        if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
            raise DatasetError(MSG_GRADES.format(where=where, got=grade, section=section))
        grades[str(section)] = grade
    return tuple(grades), grades


def _str(value: Any, key: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: '{key}' must be a string, got {value!r}.")
    return value


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if type(value) is list and all(type(v) is str for v in value):     # the usual case, at once
        return tuple(value)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise DatasetError(f"{where}: '{key}' must be a list of strings, e.g. [DT-1], got {value!r}.")
    return tuple(str(v) for v in value)


def _phrases(value: Any, key: str, where: str) -> tuple[str, ...]:
    """must_include / must_not_include: strings with words (compared as ``rageval.text.normalize``
    makes them, so one of spaces only is as empty as "")."""
    phrases = _str_list(value, key, where)
    for n, phrase in enumerate(phrases, 1):
        if not normalize(phrase):
            raise DatasetError(MSG_EMPTY_PHRASE.format(where=where, key=key, n=n))
    return phrases


def _slice(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise DatasetError(f"{where}: 'slice' must be a mapping of simple values, e.g. {{type: lookup, numeric: true}}, "
                           f"got {value!r}.")
    return {str(k): v for k, v in value.items()}


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise DatasetError(f"{where}: 'out_of_scope' must be true or false, got {value!r}.")
    return value
