"""Customer messages from a JSONL chat log: one :class:`LogEntry` (line number, text as written)
per line that holds text, found in a named field, a usual key or an OpenAI-style messages list.

Each line is read by ``rageval.parse.load_json`` like every other input (UTF-8, no key twice, no
NaN, at most 64 levels deep; messages name the file and line), and is at most
``MAX_LOG_LINE_BYTES`` long, so one runaway line cannot take the memory a whole log would."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.errors import DatasetError
from rageval.parse import load_json

#: Keys tried, in order, for the customer's text of a log line when no field is given.
TEXT_FIELDS = ("question", "message", "text", "content")

MAX_LOG_LINES = 200_000
#: The longest line read (a conversation with its whole context fits; a runaway export does not).
MAX_LOG_LINE_BYTES = 10 * 1024 * 1024

MSG_TOO_MANY_LINES = ("{path}: more than {limit} lines. Candidates need a sample, not the whole history: "
                      "take a random sample first (e.g. `shuf -n 20000 {name} > sample.jsonl`).")
MSG_LONG_LINE = ("{path}: line {line}: longer than {limit:,} bytes. Each line must be one chat message "
                 "as a JSON object; check that this is a JSONL chat log.")
MSG_NOT_OBJECT = "{path}: line {line}: expected a JSON object, got {kind}. Each line must be one object like {{\"message\": \"...\"}}."
MSG_NO_FIELD = ("{path}: line {line}: no customer text found; tried {tried}, the line has keys {keys}. "
                "Name the field that holds the question with --field.")
MSG_FIELD_NOT_TEXT = ("{path}: line {line}: field '{field}' is {kind}, expected text (or an OpenAI-style messages list). "
                      "Name the field that holds the question with --field.")


@dataclass(frozen=True)
class LogEntry:
    line: int    # 1-based line number in the log file
    text: str    # the customer's text, as written


def _content_text(content: Any) -> str | None:
    """OpenAI message content: a string, or a list of parts with ``{"type": "text", "text": …}``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def _first_user_message(messages: list[Any]) -> str | None:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            text = _content_text(message.get("content"))
            if text is not None:
                return text
    return None


def _entry_text(obj: dict[str, Any], field: str | None, path: Path, line: int) -> str | None:
    if field is not None:
        if field not in obj:
            raise DatasetError(MSG_NO_FIELD.format(path=path, line=line, tried=f"'{field}'", keys=_keys(obj)))
        value = obj[field]
        if isinstance(value, list):
            text = _first_user_message(value)
            if text is None and value and not all(isinstance(m, dict) for m in value):
                raise DatasetError(MSG_FIELD_NOT_TEXT.format(path=path, line=line, field=field, kind="a list of non-messages"))
            return text
        if value is None:
            return None
        if not isinstance(value, str):
            raise DatasetError(MSG_FIELD_NOT_TEXT.format(path=path, line=line, field=field, kind=type(value).__name__))
        return value
    for key in TEXT_FIELDS:
        value = obj.get(key)
        if isinstance(value, str):
            return value
        if key == "content" and isinstance(value, list):
            return _content_text(value)
    if isinstance(obj.get("messages"), list):
        return _first_user_message(obj["messages"])
    raise DatasetError(MSG_NO_FIELD.format(path=path, line=line, tried=", ".join([*TEXT_FIELDS, "messages"]),
                                           keys=_keys(obj)))


def _keys(obj: dict[str, Any]) -> str:
    return ", ".join(sorted(map(str, obj))) if obj else "none"


def load_logs(path: str | Path, field: str | None = None) -> list[LogEntry]:
    """Customer messages from a JSONL chat log, one :class:`LogEntry` per line that has text.

    Each non-empty line is a JSON object. The text is taken from ``field`` when given, else from
    the first of ``question``, ``message``, ``text``, ``content`` that holds text, else from an
    OpenAI-style ``messages`` list (the conversation's first ``user`` message). Lines whose text is
    empty, and conversations with no user message, are skipped. Raises DatasetError naming the
    file and line for a malformed line, and for files over :data:`MAX_LOG_LINES` lines.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: log file not found. Check the --logs path.")
    entries: list[LogEntry] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LOG_LINE_BYTES + 1), b""), start=1):
            if number > MAX_LOG_LINES:
                raise DatasetError(MSG_TOO_MANY_LINES.format(path=path, limit=MAX_LOG_LINES, name=path.name))
            if len(raw) > MAX_LOG_LINE_BYTES and raw[MAX_LOG_LINE_BYTES:] != b"\n":
                raise DatasetError(MSG_LONG_LINE.format(path=path, line=number, limit=MAX_LOG_LINE_BYTES))
            entry = _entry(raw, field, path, number)
            if entry is not None:
                entries.append(entry)
    return entries


def _entry(raw: bytes, field: str | None, path: Path, number: int) -> LogEntry | None:
    """One line's entry (None when it holds no text), read strictly (``rageval.parse``)."""
    raw = raw.strip()
    if not raw:
        return None
    obj = load_json(raw, str(path), error=DatasetError, line=number)
    if not isinstance(obj, dict):
        raise DatasetError(MSG_NOT_OBJECT.format(path=path, line=number, kind=type(obj).__name__))
    found = _entry_text(obj, field, path, number)
    return LogEntry(number, found.strip()) if found is not None and found.strip() else None


def load_names(path: str | Path) -> tuple[str, ...]:
    """Names to scrub, one per line; blank lines and lines starting with ``#`` are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: names file not found. Give a text file with one customer name per line.")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start}). Save the names file as UTF-8.") from None
    return tuple(s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#"))
