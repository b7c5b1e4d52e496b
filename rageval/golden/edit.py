"""`rageval golden add`: turn an incident into a golden case by editing the user's file in place.

The edit is made on the text, guided by PyYAML's node tree (``yaml.compose`` gives the start and
end of ``version``, ``changelog``, ``cases`` and every case), so every byte outside the edited
spots is kept: comments, blank lines, key order, quoting, line endings. Three spots change:

* ``version`` is bumped in its own scalar style (``4`` -> ``5``, ``"7"`` -> ``"8"``,
  ``'1.4'`` -> ``'1.5'``);
* a changelog line ``v4 -> v5: + q124 (incident-2026-11-29): <question>`` is appended — to the
  list in the list's own style (block or flow); a scalar changelog becomes a block list holding the
  old text and then the new line (the loader reads the last item as "the changelog line"); a file
  without a changelog gets ``changelog: ["<line>"]`` right after the version line;
* the new case, preceded by a ``# added by rageval golden add …`` comment, goes right after the
  last line of the last case, in the indentation and spacing of the existing cases. Comments that
  follow the last case (a footer, a "to do" note) stay where they are, below the new case.

JSON golden sets have no comments to keep: they are rewritten with ``json.dumps(indent=2)`` in the
original key order. The seeds' flat list format has no version to bump and is refused.

:func:`add_case` computes the new text and checks it (it must load with
:func:`rageval.golden.set.load_golden`, hold exactly one more case, equal to the one asked for, and
leave every other case unchanged); it writes nothing. :func:`write_added` writes the result
atomically and refuses if the file changed in between.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from rageval.errors import DatasetError, did_you_mean
from rageval.files import write_bytes
from rageval.golden.set import HOLDOUT_TAG, Case, GoldenSet, load_golden
from rageval.golden.yaml_text import (
    content_end,
    flow_list,
    flow_mapping,
    flow_quoted_list,
    line_end,
    plain_or_quoted,
    quoted_like,
    scalar_like,
    yaml_double_quoted,
)
from rageval.text import fold

MSG_EMPTY_QUESTION = "{path}: the new case needs a question (the text a user asked). Pass --question \"…\"."
MSG_NO_EXPECTATION = ("{path}: the new case needs --expected-sections and/or --expected-answer, "
                      "or --out-of-scope when the right answer is that the documents do not say.")
MSG_BAD_SOURCE = ("{path}: source '{source}' is not a valid incident reference: the date after 'incident-' "
                  "must be a real date written YYYY-MM-DD, e.g. incident-2026-11-29.")
MSG_BLANK_SOURCE = "{path}: source {source!r} must be one line of text, e.g. incident-2026-11-29 or chat-2026-10."
MSG_UNKNOWN_SECTION = ("{path}: expected section '{section}' is not in the corpus{hint}. "
                       "Fix the label, or add a '## {section} …' heading to the corpus first.")
MSG_DUPLICATE_QUESTION = ("{path}: case '{id}' already asks this question ({existing!r}). "
                          "Edit that case instead of adding a second one.")
MSG_BAD_VERSION = ("{path}: version {version!r} cannot be bumped automatically (it is not a number like 4, '4' "
                   "or '1.4'). Bump it by hand and add the case with your editor.")
MSG_SEED_FORMAT = ("{path}: this golden set is the seeds' flat list of cases, which has no version or changelog "
                   "to bump. Convert it to the canonical format (a mapping with dataset, version, changelog and "
                   "cases) first.")
MSG_FLOW_CASES = ("{path}: line {line}: `cases` is written in flow style ([...]). `golden add` appends to a block "
                  "list (one `- id: …` per case); convert `cases` to block style or add the case by hand.")
MSG_FLOW_ROOT = ("{path}: the golden set is one flow mapping ({{...}}). `golden add` edits block-style YAML; "
                 "rewrite it in block style (one key per line) or add the case by hand.")
MSG_BAD_CHANGELOG = ("{where}: `changelog` must be a string or a list of strings to append to; "
                     "fix it by hand first.")
MSG_LAYOUT = ("{path}: line {line}: cannot tell how the case list is laid out (no '-' before the case). "
              "Add the case by hand.")
MSG_SELF_CHECK = ("{path}: the edited golden set would not be what was asked ({problem}); nothing was written. "
                  "Add the case by hand, and please report this with the file attached.")
MSG_CHANGED = ("{path}: the file changed after the new case was prepared; nothing was written. "
               "Run `rageval golden add` again.")

_INCIDENT = re.compile(r"incident-(\d{4})-(\d{2})-(\d{2})")
_NUMBERED_ID = re.compile(r"(.*?)(\d+)")
_DOTTED = re.compile(r"\d+(?:\.\d+)*")
QUESTION_IN_CHANGELOG = 60


@dataclass(frozen=True)
class AddResult:
    """What :func:`add_case` prepared: the new case's id, the version bump, the changelog line and
    the full new file text. ``original_sha256`` is the file it was computed from."""

    path: Path
    case_id: str
    old_version: int | str
    new_version: int | str
    changelog_line: str
    text: str
    case: Case
    original_sha256: str


def add_case(path: Path, *, question: str, expected_sections: Sequence[str] = (), expected_answer: str = "",
             source: str = "", tags: Sequence[str] = (), slice: Mapping[str, Any] | None = None,
             must_include: Sequence[str] = (), must_not_include: Sequence[str] = (), out_of_scope: bool = False,
             known_sections: Iterable[str] | None = None, today: date | None = None,
             retired_ids: Iterable[str] = ()) -> AddResult:
    """Prepare the golden set at ``path`` with one more case; write nothing (see :func:`write_added`).
    ``retired_ids`` (ids earlier versions used, e.g. from git history; the current ones may be among
    them) are never handed out again.

    Raises DatasetError when the input is invalid (empty question, bad incident date, unknown
    section, a question already in the set), when the file cannot be edited safely (seed format,
    flow-style cases, a version that is not a number) or when the result would not load.
    """
    path = Path(path)
    today = today or date.today()
    golden = load_golden(path)
    if isinstance(_raw_top(path), list):
        raise DatasetError(MSG_SEED_FORMAT.format(path=path))
    fields = _validated_fields(path, golden, question=question, expected_sections=expected_sections,
                               expected_answer=expected_answer, source=source, tags=tags, slice=slice,
                               must_include=must_include, must_not_include=must_not_include,
                               out_of_scope=out_of_scope, known_sections=known_sections)
    case_id = next_case_id([c.id for c in golden.cases], retired=retired_ids)
    case = Case(id=case_id, **fields)
    old_version = golden.version
    new_version = bump_version(old_version, path)
    line = changelog_line(old_version, new_version, case_id, case.source, case.question,
                          holdout=HOLDOUT_TAG in case.tags)
    raw_bytes = path.read_bytes()
    text = raw_bytes.decode("utf-8")
    if path.suffix.lower() == ".json":
        new_text = _edit_json(path, text, case, new_version, line)
    else:
        new_text = _edit_yaml(path, text, case, new_version, line, today)
    _self_check(path, golden, new_text, case, new_version, line)
    return AddResult(path=path, case_id=case_id, old_version=old_version, new_version=new_version,
                     changelog_line=line, text=new_text, case=case,
                     original_sha256=hashlib.sha256(raw_bytes).hexdigest())


def write_added(path: Path, result: AddResult) -> None:
    """Write ``result.text`` to ``path`` atomically (temp file in the same folder + os.replace),
    keeping the file's permissions. Refuses if the file no longer matches what add_case read."""
    path = Path(path)
    if hashlib.sha256(path.read_bytes()).hexdigest() != result.original_sha256:
        raise DatasetError(MSG_CHANGED.format(path=path))
    write_bytes(path, result.text.encode("utf-8"), mode=path.stat().st_mode & 0o7777)


# --------------------------------------------------------------------------------------------
# Pure pieces: id, version, changelog line.
# --------------------------------------------------------------------------------------------

def next_case_id(existing: Sequence[str], retired: Iterable[str] = ()) -> str:
    """Follow the file's id scheme: q01..q123 -> q124 (prefix + highest number + 1, zero-padded to
    the widest number seen). Ids with no common ``<prefix><number>`` form -> ``case-<n>``.
    Never returns an id that exists, nor a ``retired`` one (an id an earlier version used for
    another question: after q124 was removed, the next case is q125, not q124 again)."""
    retired = [i for i in retired if i not in set(existing)]
    taken = set(existing) | set(retired)
    numbered = [m for m in (_NUMBERED_ID.fullmatch(i) for i in existing) if m]
    prefixes = {m.group(1) for m in numbered}
    if numbered and len(prefixes) == 1:
        prefix = prefixes.pop()
        width = max(len(m.group(2)) for m in numbered)
        same_scheme = [m for m in (_NUMBERED_ID.fullmatch(i) for i in retired) if m and m.group(1) == prefix]
        n = max(int(m.group(2)) for m in [*numbered, *same_scheme]) + 1
        while f"{prefix}{str(n).zfill(width)}" in taken:
            n += 1
        return f"{prefix}{str(n).zfill(width)}"
    n = len(existing) + 1
    while f"case-{n}" in taken:
        n += 1
    return f"case-{n}"


def bump_version(version: int | str, path: Path | str = "golden set") -> int | str:
    """4 -> 5; "7" -> "8" (zero padding kept: "007" -> "008"); "1.4" -> "1.5". Anything else is
    a DatasetError asking the user to bump it by hand."""
    if isinstance(version, int) and not isinstance(version, bool):
        return version + 1
    if isinstance(version, str) and _DOTTED.fullmatch(version):
        head, _, last = version.rpartition(".")
        bumped = str(int(last) + 1).zfill(len(last))
        return f"{head}.{bumped}" if head else bumped
    raise DatasetError(MSG_BAD_VERSION.format(path=path, version=version))


def changelog_line(old_version: int | str, new_version: int | str, case_id: str, source: str, question: str,
                   *, holdout: bool = False) -> str:
    """``v4 -> v5: + q124 (incident-2026-11-29): <question, shortened to ~60 characters>``. A holdout
    case is only counted: the changelog reaches the PR comment, which never shows holdout cases."""
    origin = f" ({source})" if source else ""
    if holdout:
        return f"v{old_version} -> v{new_version}: + 1 holdout case{origin}"
    return f"v{old_version} -> v{new_version}: + {case_id}{origin}: {shorten(question)}"


def shorten(text: str, limit: int = QUESTION_IN_CHANGELOG) -> str:
    """Whitespace collapsed; cut at a word boundary with "…" when longer than ``limit``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    if text[limit - 1] != " " and " " in cut[limit // 2:]:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:.") + "…"


# --------------------------------------------------------------------------------------------
# Validation of what the user asked for.
# --------------------------------------------------------------------------------------------

def _str_items(value: Sequence[str] | str, name: str, path: Path) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise DatasetError(f"{path}: {name} must be non-empty strings, got {item!r}.")
    return tuple(i.strip() for i in items)


def _validated_fields(path: Path, golden: GoldenSet, *, question: str, expected_sections: Sequence[str],
                      expected_answer: str, source: str, tags: Sequence[str], slice: Mapping[str, Any] | None,
                      must_include: Sequence[str], must_not_include: Sequence[str], out_of_scope: bool,
                      known_sections: Iterable[str] | None) -> dict[str, Any]:
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(MSG_EMPTY_QUESTION.format(path=path))
    question = question.strip()
    sections = _str_items(expected_sections, "expected sections", path)
    if not isinstance(expected_answer, str):
        raise DatasetError(f"{path}: the expected answer must be text, got {expected_answer!r}.")
    expected_answer = expected_answer.strip()
    if not isinstance(out_of_scope, bool):
        raise DatasetError(f"{path}: out_of_scope must be true or false, got {out_of_scope!r}.")
    if not out_of_scope and not sections and not expected_answer:
        raise DatasetError(MSG_NO_EXPECTATION.format(path=path))
    if not isinstance(source, str) or source != source.strip() or "\n" in source:
        raise DatasetError(MSG_BLANK_SOURCE.format(path=path, source=source))
    if source.startswith("incident-"):
        m = _INCIDENT.fullmatch(source)
        try:
            if not m:
                raise ValueError(source)
            date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            raise DatasetError(MSG_BAD_SOURCE.format(path=path, source=source)) from None
    if known_sections is not None:
        known = set(known_sections)
        for section in sections:
            if section not in known:
                raise DatasetError(MSG_UNKNOWN_SECTION.format(path=path, section=section,
                                                              hint=did_you_mean(section, known)))
    key = fold(question)
    for case in golden.cases:
        if fold(case.question) == key:
            raise DatasetError(MSG_DUPLICATE_QUESTION.format(path=path, id=case.id, existing=case.question))
    slice_values = dict(slice or {})
    for name, value in slice_values.items():
        if not isinstance(name, str) or not name:
            raise DatasetError(f"{path}: slice keys must be non-empty strings, got {name!r}.")
        if not isinstance(value, (str, int, float, bool)) or (isinstance(value, float) and not math.isfinite(value)):
            raise DatasetError(f"{path}: slice '{name}' must be a simple value (text, number, true/false), "
                               f"got {value!r}.")
    return {"question": question, "expected_sections": sections, "expected_answer": expected_answer,
            "source": source, "slice": slice_values, "tags": _str_items(tags, "tags", path),
            "must_include": _str_items(must_include, "must_include", path),
            "must_not_include": _str_items(must_not_include, "must_not_include", path),
            "out_of_scope": out_of_scope}


def _raw_top(path: Path) -> Any:
    """The top-level value's kind, without constructing every case again."""
    text = path.read_bytes().decode("utf-8")
    if path.suffix.lower() == ".json":
        return json.loads(text)
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    return [] if isinstance(node, yaml.SequenceNode) else {}


# --------------------------------------------------------------------------------------------
# The edits.
# --------------------------------------------------------------------------------------------

def _edit_json(path: Path, text: str, case: Case, new_version: int | str, line: str) -> str:
    raw = json.loads(text)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "version":
            out[key] = new_version
            if "changelog" not in raw:
                out["changelog"] = [line]
        elif key == "changelog":
            if isinstance(value, list):
                out[key] = [*value, line]
            elif value in (None, ""):
                out[key] = [line]
            elif isinstance(value, str):
                out[key] = [value, line]
            else:
                raise DatasetError(MSG_BAD_CHANGELOG.format(where=path))
        elif key == "cases":
            out[key] = [*value, _case_mapping(case)]
        else:
            out[key] = value
    ending = "\n" if text.endswith("\n") else ""
    return json.dumps(out, indent=2, ensure_ascii=False) + ending


def _case_mapping(case: Case) -> dict[str, Any]:
    """The keys written for a new case, in the canonical order; optional ones only when set."""
    out: dict[str, Any] = {"id": case.id, "question": case.question,
                           "expected_sections": list(case.expected_sections)}
    if case.expected_answer:
        out["expected_answer"] = case.expected_answer
    if case.source:
        out["source"] = case.source
    if case.slice:
        out["slice"] = dict(case.slice)
    out["tags"] = list(case.tags)
    if case.must_include:
        out["must_include"] = list(case.must_include)
    if case.must_not_include:
        out["must_not_include"] = list(case.must_not_include)
    if case.out_of_scope:
        out["out_of_scope"] = True
    return out


def _case_yaml_values(case: Case) -> list[tuple[str, str]]:
    rendered: list[tuple[str, str]] = []
    for key, value in _case_mapping(case).items():
        if key in ("question", "expected_answer"):
            rendered.append((key, yaml_double_quoted(value)))
        elif key in ("id", "source"):
            rendered.append((key, plain_or_quoted(value)))
        elif key in ("expected_sections", "tags"):
            rendered.append((key, flow_list(value)))
        elif key in ("must_include", "must_not_include"):
            rendered.append((key, flow_quoted_list(value)))
        elif key == "slice":
            rendered.append((key, flow_mapping(value)))
        else:
            rendered.append((key, "true" if value else "false"))
    return rendered


def _dash_column(text: str, item: yaml.Node, path: Path) -> int:
    """Column of the '-' that introduces a block sequence item."""
    pos = item.start_mark.index - 1
    while pos >= 0 and text[pos] in " \t\r\n":
        pos -= 1
    if pos < 0 or text[pos] != "-":
        raise DatasetError(MSG_LAYOUT.format(path=path, line=item.start_mark.line + 1))
    return pos - (text.rfind("\n", 0, pos) + 1)


#: One text edit: (start, end, order among edits at the same start, replacement).
Edit = tuple[int, int, int, str]


def _edit_yaml(path: Path, text: str, case: Case, new_version: int | str, line: str, today: date) -> str:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root.flow_style:
        raise DatasetError(MSG_FLOW_ROOT.format(path=path))
    top = {key.value: (key, value) for key, value in root.value}
    nl = "\r\n" if "\r\n" in text else "\n"
    cases_key, cases = top["cases"]
    case_edit, dash_col, key_col = _case_edit(path, text, cases, case, today, nl)
    edits: list[Edit] = [case_edit]

    version_key, version = top["version"]
    vsrc = text[version.start_mark.index:version.end_mark.index]
    edits.append((version.start_mark.index, version.end_mark.index, 0, scalar_like(version, vsrc, new_version)))

    if "changelog" not in top:
        at = line_end(text, version.end_mark.index)
        entry = f"{' ' * version_key.start_mark.column}changelog: [{yaml_double_quoted(line)}]"
        edits.append((at, at, 1, _as_lines(text, at, entry, nl)))
    else:
        item_offset = dash_col - cases_key.start_mark.column
        gap = " " * (key_col - dash_col - 1)
        edits += _changelog_edits(path, text, *top["changelog"], line, item_offset, gap, nl)

    new = text
    for start, end, _, replacement in sorted(edits, key=lambda e: (e[0], e[2]), reverse=True):
        new = new[:start] + replacement + new[end:]
    return new


def _as_lines(text: str, at: int, lines: str, nl: str) -> str:
    """``lines`` as whole lines to insert at ``at``, a line start or the end of an unterminated
    last line (then the newline goes first)."""
    return nl + lines if not text[:at].endswith("\n") else lines + nl


def _case_edit(path: Path, text: str, cases: yaml.Node, case: Case, today: date, nl: str) -> tuple[Edit, int, int]:
    """The new case, after the last one, laid out like it: (edit, column of its '-', column of its keys)."""
    if cases.flow_style:
        raise DatasetError(MSG_FLOW_CASES.format(path=path, line=cases.start_mark.line + 1))
    last = cases.value[-1]
    dash_col = _dash_column(text, last, path)
    key_col = max(last.start_mark.column, dash_col + 2) if isinstance(last, yaml.MappingNode) else dash_col + 2
    blank_between = False
    if len(cases.value) > 1:
        between = text[line_end(text, content_end(text, cases.value[-2])):last.start_mark.index]
        blank_between = any(not ln.strip() for ln in between.split("\n")[:-1])
    origin = f" from {case.source}" if case.source else ""
    block = [""] if blank_between else []
    block.append(f"{' ' * dash_col}# added by rageval golden add{origin} on {today.isoformat()}")
    for i, (key, value) in enumerate(_case_yaml_values(case)):
        lead = f"{' ' * dash_col}-{' ' * (key_col - dash_col - 1)}" if i == 0 else " " * key_col
        block.append(f"{lead}{key}: {value}")
    at = line_end(text, content_end(text, last))
    return (at, at, 2, _as_lines(text, at, nl.join(block), nl)), dash_col, key_col


def _changelog_edits(path: Path, text: str, key: yaml.Node, value: yaml.Node, line: str, item_offset: int,
                     gap: str, nl: str) -> list[Edit]:
    """``line`` appended to the changelog in its own style; a scalar changelog becomes a block list
    (its items indented and spaced like the cases) holding the old text and then ``line``."""
    if isinstance(value, yaml.SequenceNode) and value.flow_style:
        if value.value:
            at = value.value[-1].end_mark.index
            return [(at, at, 1, ", " + quoted_like(value.value[-1], line))]
        at = value.end_mark.index - 1
        return [(at, at, 1, yaml_double_quoted(line))]
    if isinstance(value, yaml.SequenceNode):
        item_dash = _dash_column(text, value.value[-1], path)
        item_gap = " " * max(1, value.value[-1].start_mark.column - item_dash - 1)
        at = line_end(text, content_end(text, value.value[-1]))
        entry = f"{' ' * item_dash}-{item_gap}{quoted_like(value.value[-1], line)}"
        return [(at, at, 1, _as_lines(text, at, entry, nl))]
    if isinstance(value, yaml.ScalarNode):
        indent = " " * (key.start_mark.column + item_offset)
        items = [] if value.tag.endswith(":null") or value.value == "" else [_old_changelog(text, value)]
        items.append(yaml_double_quoted(line))
        end = content_end(text, value)
        at = line_end(text, end)
        lines = nl.join(f"{indent}-{gap}{item}" for item in items)
        return [(key.end_mark.index, end, 0, ":"), (at, at, 1, _as_lines(text, at, lines, nl))]
    raise DatasetError(MSG_BAD_CHANGELOG.format(where=f"{path}: line {key.start_mark.line + 1}"))


def _old_changelog(text: str, node: yaml.ScalarNode) -> str:
    """The old changelog as a list item: its own source when it is a one-line quoted scalar (kept
    verbatim), otherwise its value double-quoted (a plain "v3 -> v4: …" would read as a mapping)."""
    source = text[node.start_mark.index:node.end_mark.index]
    if node.style in ('"', "'") and "\n" not in source and source[:1] == node.style:
        return source
    return yaml_double_quoted(node.value)


# --------------------------------------------------------------------------------------------
# The result must load and hold exactly the case asked for.
# --------------------------------------------------------------------------------------------

def _self_check(path: Path, before: GoldenSet, new_text: str, case: Case, new_version: int | str, line: str) -> None:
    with tempfile.TemporaryDirectory(prefix="rageval-golden-add-") as tmp:
        probe = Path(tmp) / path.name
        probe.write_bytes(new_text.encode("utf-8"))
        try:
            after = load_golden(probe)
        except DatasetError as exc:
            problem = f"it would not load: {exc.message.replace(str(probe), str(path))}"
            raise DatasetError(MSG_SELF_CHECK.format(path=path, problem=problem)) from None
    problems = []
    if len(after.cases) != len(before.cases) + 1:
        problems.append(f"{len(after.cases)} cases instead of {len(before.cases) + 1}")
    elif after.cases[:-1] != before.cases:
        problems.append("an existing case would change")
    elif after.cases[-1] != case:
        problems.append(f"the new case would read back as {after.cases[-1]!r}")
    if after.version != new_version:
        problems.append(f"version would read {after.version!r}, not {new_version!r}")
    if after.changelog != line:
        problems.append(f"the changelog line would read {after.changelog!r}")
    if after.name != before.name:
        problems.append("the dataset name would change")
    if problems:
        raise DatasetError(MSG_SELF_CHECK.format(path=path, problem="; ".join(problems)))
