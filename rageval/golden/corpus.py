"""Source documents → Sections.

Two forms load:
- markdown files whose level-2 headings start with the section id: ``## DT-1 Thời hạn đổi trả``;
  the section runs to the next level-1/2 heading. A ``# title`` line is the document's title.
- a YAML/JSON mapping ``{section_id: text}`` or ``{section_id: {title: …, text: …}}``.

``corpus`` in the config is a path or a glob, relative to the config file.
"""

from __future__ import annotations

import glob as globlib
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from rageval.errors import DatasetError
from rageval.parse import load_json, load_yaml, read_bytes, read_text

_HEADING = re.compile(r"^(#{1,2})\s+(.*?)\s*$")
_SECTION_ID = re.compile(r"^([A-Za-z][\w.]*-[\w.-]+|[A-Za-z]+\d[\w.-]*)\b[:.]?\s*(.*)$")


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    text: str          # the heading line and the body, as the chunker and generator see it
    document: str      # file stem the section came from

    @property
    def body(self) -> str:
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""


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

    def text_of(self, ids: list[str] | tuple[str, ...]) -> str:
        found = self._by_id
        return "\n\n".join(found[i].text for i in ids if i in found)


def resolve_files(pattern: str, root: Path) -> list[Path]:
    full = pattern if Path(pattern).is_absolute() else str(root / pattern)
    if any(ch in pattern for ch in "*?["):
        files = sorted(Path(p) for p in globlib.glob(full, recursive=True) if Path(p).is_file())
    else:
        p = Path(full)
        files = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in (".md", ".markdown", ".yaml", ".yml", ".json")) \
            if p.is_dir() else ([p] if p.is_file() else [])
    if not files:
        raise DatasetError(f"corpus '{pattern}' (relative to {root}) matches no file. "
                           "Check `corpus:` in the config: a path or glob such as docs/*.md.")
    return files


def load_corpus(pattern: str, root: Path) -> Corpus:
    sections: list[Section] = []
    files = resolve_files(pattern, root)
    for path in files:
        if path.suffix.lower() in (".yaml", ".yml", ".json"):
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
                           "'## DT-1 Title'; mappings need {section_id: text}.")
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


def _load_mapping(path: Path) -> list[Section]:
    load = load_json if path.suffix.lower() == ".json" else load_yaml
    data = load(read_bytes(path, error=DatasetError), str(path), error=DatasetError)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: a corpus mapping must be {{section_id: text}}, got {type(data).__name__}.")
    out = []
    for sid, value in data.items():
        if isinstance(value, dict):
            title, body = str(value.get("title", "")), value.get("text")
        else:
            title, body = "", value
        if not isinstance(body, str) or not body.strip():
            raise DatasetError(f"{path}: section '{sid}' must map to non-empty text (or {{title, text}}).")
        heading = f"{sid} {title}".strip()
        out.append(Section(str(sid), title, f"{heading}\n{body.strip()}", path.stem))
    return out
