"""Source documents → Sections.

Three forms load:
- markdown files whose level-2 headings start with the section id: ``## DT-1 Thời hạn đổi trả``;
  the section runs to the next level-1/2 heading. A ``# title`` line is the document's title.
- a YAML/JSON mapping ``{section_id: text}`` or ``{section_id: {title: …, text: …}}``.
- JSON Lines (``.jsonl``), one section per line, as IR datasets ship them (BEIR's
  ``corpus.jsonl``): ``{"_id": "4983", "title": "…", "text": "…"}`` (``id`` for ``_id`` too;
  other keys, such as BEIR's ``metadata``, are not read).

Ids may be numbers (``4983``) in mappings and JSON Lines; a section with a title and no text is
its title. A section's ``text`` is its heading line (``DT-1 Thời hạn``) and body, as the generator
and the judge read it; what the index reads (``indexed``) is the title and the body — never the
id, which is a label, not a word of the document (issue 22: indexing it moved recall@100).

``corpus`` in the config is a path or a glob, relative to the config file; a folder reads every
corpus file under it, and a BEIR folder (``corpus.jsonl`` beside ``queries.jsonl``) its
``corpus.jsonl`` alone.
"""

from __future__ import annotations

import glob as globlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rageval.errors import DatasetError
from rageval.parse import load_json, load_yaml, read_bytes, read_text

_HEADING = re.compile(r"^(#{1,2})\s+(.*?)\s*$")
_SECTION_ID = re.compile(r"^([A-Za-z][\w.]*-[\w.-]+|[A-Za-z]+\d[\w.-]*)\b[:.]?\s*(.*)$")
SUFFIXES = (".md", ".markdown", ".yaml", ".yml", ".json", ".jsonl")
#: a JSON Lines corpus line: the id under one of these keys (BEIR writes ``_id``)
JSONL_ID_KEYS = ("_id", "id")

MSG_JSONL_LINE = ("{path}: line {line}: a corpus line must be a JSON object with an id ('_id' or 'id'), a "
                  "'title' and/or a 'text', e.g. {{\"_id\": \"4983\", \"title\": \"…\", \"text\": \"…\"}}{got}.")
MSG_NO_TEXT = "{where}: section '{sid}' has neither a title nor text. Give it one (or remove it)."
MSG_ID = "{where}: section id {got!r} must be a non-empty string or a whole number."


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    text: str          # the heading line ("DT-1 Title") and the body, as the generator and the judge see it
    document: str      # file stem the section came from

    @property
    def body(self) -> str:
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""

    @property
    def indexed(self) -> str:
        """What the index reads: the text without the section id (title and body only)."""
        return unlabelled(self.text, self.id)


def unlabelled(text: str, section_id: str) -> str:
    """``text`` without the section id its heading line starts with (``DT-1 Thời hạn`` → ``Thời hạn``)."""
    if not text.startswith(section_id):
        return text
    rest = text[len(section_id):]
    return rest.lstrip(" :.-\t").lstrip("\n") if not rest or not rest[0].isalnum() else text


@dataclass(frozen=True)
class Corpus:
    sections: tuple[Section, ...]
    files: tuple[Path, ...]

    def ids(self) -> list[str]:
        return [s.id for s in self.sections]

    def by_id(self) -> dict[str, Section]:
        return self._by_id

    @cached_property
    def _by_id(self) -> dict[str, Section]:
        return {s.id: s for s in self.sections}

    def texts_of(self, ids: list[str] | tuple[str, ...]) -> list[str]:
        """The text of each section of ``ids`` the corpus has, in that order."""
        found = self._by_id
        return [found[i].text for i in ids if i in found]

    def text_of(self, ids: list[str] | tuple[str, ...]) -> str:
        """:meth:`texts_of` as one text (:func:`joined`)."""
        return joined(self.texts_of(ids))


def joined(texts: Sequence[str]) -> str:
    """Sections' texts as one text, a blank line between them: what the judge reads as the source."""
    return "\n\n".join(texts)


def resolve_files(pattern: str, root: Path) -> list[Path]:
    full = pattern if Path(pattern).is_absolute() else str(root / pattern)
    if any(ch in pattern for ch in "*?["):
        files = sorted(Path(p) for p in globlib.glob(full, recursive=True) if Path(p).is_file())
    else:
        p = Path(full)
        if p.is_dir() and (p / "corpus.jsonl").is_file() and (p / "queries.jsonl").is_file():
            files = [p / "corpus.jsonl"]                   # a BEIR folder: its queries are not documents
        elif p.is_dir():
            files = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in SUFFIXES)
        else:
            files = [p] if p.is_file() else []
    if not files:
        raise DatasetError(f"corpus '{pattern}' (relative to {root}) matches no file. "
                           "Check `corpus:` in the config: a path or glob such as docs/*.md.")
    return files


def load_corpus(pattern: str, root: Path) -> Corpus:
    sections: list[Section] = []
    files = resolve_files(pattern, root)
    for path in files:
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            sections.extend(_load_jsonl(path))
        elif suffix in (".yaml", ".yml", ".json"):
            sections.extend(_load_mapping(path))
        else:
            sections.extend(_load_markdown(path))
    seen: dict[str, str] = {}
    for s in sections:
        if s.id in seen:
            raise DatasetError(f"section id '{s.id}' appears twice in the corpus ({seen[s.id]} and {s.document}). "
                               "Section ids must be unique across documents.")
        seen[s.id] = s.document
    if not sections:
        raise DatasetError(f"corpus '{pattern}': no sections found. Markdown sections need headings like "
                           "'## DT-1 Title'; mappings need {section_id: text}; JSON Lines need "
                           "{\"_id\": …, \"text\": …} per line.")
    return Corpus(tuple(sections), tuple(files))


def _load_markdown(path: Path) -> list[Section]:
    text = read_text(path, error=DatasetError)
    out: list[Section] = []
    current: tuple[str, str, int] | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            sid, heading, line = current
            content = "\n".join(body).strip()
            if not content:
                raise DatasetError(f"{path}: line {line}: section '{sid}' has no text under its heading.")
            title = heading[len(sid):].lstrip(" :.-") if heading.startswith(sid) else heading
            out.append(Section(sid, title, f"{heading}\n{content}", path.stem))

    for lineno, line in enumerate(text.splitlines(), 1):
        m = _HEADING.match(line)
        if m:
            close()
            current, body = None, []
            if len(m.group(1)) == 2:
                sm = _SECTION_ID.match(m.group(2))
                if not sm:
                    raise DatasetError(f"{path}: line {lineno}: heading '{line.strip()}' does not start with a section "
                                       "id. Write it as '## DT-1 Title' (the id is what golden cases point at).")
                current = (sm.group(1), m.group(2), lineno)
            continue
        if current is not None:
            body.append(line)
    close()
    return out


def _section(sid: Any, title: Any, body: Any, document: str, where: str) -> Section:
    """A section from a mapping entry or a JSON line, its id and fields checked."""
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or str(sid).strip() == "":
        raise DatasetError(MSG_ID.format(where=where, got=sid))
    sid = str(sid).strip()
    title = "" if title is None else title
    body = "" if body is None else body
    if not isinstance(title, str) or not isinstance(body, str):
        raise DatasetError(f"{where}: section '{sid}': 'title' and 'text' must be strings.")
    if not title.strip() and not body.strip():
        raise DatasetError(MSG_NO_TEXT.format(where=where, sid=sid))
    heading = f"{sid} {title.strip()}".strip()
    return Section(sid, title.strip(), f"{heading}\n{body.strip()}" if body.strip() else heading, document)


def _load_mapping(path: Path) -> list[Section]:
    load = load_json if path.suffix.lower() == ".json" else load_yaml
    data = load(read_bytes(path, error=DatasetError), str(path), error=DatasetError)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: a corpus mapping must be {{section_id: text}}, got {type(data).__name__}.")
    out = []
    for sid, value in data.items():
        if isinstance(value, dict):
            title, body = value.get("title", ""), value.get("text")
        elif isinstance(value, str):
            title, body = "", value
        else:
            raise DatasetError(f"{path}: section '{sid}' must map to text (or {{title, text}}), "
                               f"got {type(value).__name__}.")
        out.append(_section(sid, title, body, path.stem, str(path)))
    return out


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(read_text(path, error=DatasetError).split("\n"), 1):
        if line.strip():
            yield lineno, load_json(line, str(path), error=DatasetError, line=lineno)


def _load_jsonl(path: Path) -> list[Section]:
    out = []
    for lineno, record in _jsonl_records(path):
        key = next((k for k in JSONL_ID_KEYS if isinstance(record, dict) and k in record), None)
        if key is None:
            got = f", got {type(record).__name__}" if not isinstance(record, dict) else ", got no id"
            raise DatasetError(MSG_JSONL_LINE.format(path=path, line=lineno, got=got))
        out.append(_section(record[key], record.get("title"), record.get("text"), path.stem,
                            f"{path}: line {lineno}"))
    return out
