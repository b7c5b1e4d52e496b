"""Reading the files rageval is given: bytes → text → data, strictly and within bounds.

The bottom layer: it imports only the standard library, PyYAML and ``rageval.errors``. Every
input file (rageval.yml, the golden set, corpus mappings, replay traces, and later results files,
artifacts, cache files and app output lines) goes through it, so one set of rules holds for all:

- UTF-8 only: other bytes are an error naming the byte offset and line; a NUL byte means a
  binary file. A leading byte order mark is dropped.
- A key twice in one YAML mapping or JSON object is an error naming both lines (readers would
  silently keep the last one, so ``gate:`` written twice could drop the floors).
- Nothing nested deeper than ``MAX_DEPTH`` levels: refused before any object is built, so a
  100,000-deep document costs milliseconds, never a RecursionError.
- YAML aliases (``*name``) are refused outright, so an alias bomb ("billion laughs") never expands.
- JSON ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to infinity are refused.
- YAML goes through PyYAML's C parser (libyaml) when it is installed, else the pure-Python one;
  nodes are composed here, without recursion, so both behave the same. ``load_yaml`` first tries
  ``rageval.yaml_fast`` (a plain document's data straight from the parser's events, ~5× faster) and
  reads the text the strict way whenever that declines, so it accepts and refuses the same files.

The API; ``where`` names the input in messages (a path, or ``"runresult.json in artifact 7"``),
``error`` is the RagevalError subclass to raise (ConfigError, DatasetError, BaselineError …):

- ``read_bytes(path, error=…, limit=None, links=True)``: a file's bytes; an unreadable file is
  ``error``, not OSError. With ``limit``, only a regular file (a symlink to one is followed unless
  ``links=False``) of at most ``limit`` bytes is read: a device, FIFO or socket (``/dev/zero``
  never ends) and a bigger file are ``error`` before anything is read.
- ``decode(data, where, error=…)``: UTF-8 text from bytes (or a str, checked for NUL);
  ``read_text(path, error=…)``: both, for a file.
- ``load_json(data, where, error=…, line=1)``: one JSON document; ``line`` is the line the text
  starts on in its file (a JSONL line), so messages name the file's line.
- ``load_yaml(data, where, error=…)``: one YAML document (safe types only).
- ``load_yaml_node(data, where, error=…)``: the data and its node tree, for line numbers.
- ``key_lines(node)``: the line of every mapping key of a node tree, by dotted path.
- ``shown(value)``: a value's repr cut short, for messages; ``finite(number)``: fits a float.
- ``file_kind(mode)``: what a non-regular file is ("a folder", "a pipe (FIFO)" …), for messages.
- ``parse_yaml(text)``: the data and node tree, raising ``yaml.YAMLError`` (the strict rules
  above included) for callers that word their own message.

Every message starts with ``where`` and, where there is one, ``line N``.
"""

from __future__ import annotations

import bisect
import email.utils
import errno
import json
import math
import os
import re
import stat
from collections.abc import Callable
from datetime import timezone
from itertools import accumulate
from typing import Any

import yaml
from yaml.error import Mark, MarkedYAMLError
from yaml.reader import Reader

from rageval.errors import RagevalError
from rageval.yaml_fast import Unsure, plain_data

#: The deepest nesting of mappings and lists any input may have (rageval's own files need < 10).
MAX_DEPTH = 64

MSG_CANNOT_READ = "{where}: cannot read the file ({problem}). Check the path and its permissions."
MSG_NOT_REGULAR = "{where}: not a regular file but {kind}. Give the path of a file."
MSG_TOO_BIG = ("{where}: more than {limit:,} bytes, the most rageval reads from such a file. Check that "
               "this is the right file.")
MSG_NOT_UTF8 = "{where}: not UTF-8 text (byte {offset}, line {line}). Save the file as UTF-8."
MSG_BINARY = "{where}: line {line}: a NUL byte, so this is a binary file, not text. Check the path."
MSG_YAML = "{where}: line {line}: not valid YAML: {problem}. Fix the syntax there."
MSG_YAML_VALUE = "{where}: line {line}: this value cannot be read ({problem}). Fix it."
MSG_SECOND_DOCUMENT = "{where}: line {line}: a second YAML document ('---'); rageval reads one per file. Remove it."
MSG_JSON = "{where}: line {line}: not valid JSON: {problem} (column {column}). Fix the syntax there."
MSG_DUPLICATE = ("{where}: line {line}: key '{key}' appears twice (lines {first} and {line}); a reader would "
                 "silently keep the last. Keep one.")
MSG_TOO_DEEP = ("{where}: line {line}: nested more than {limit} levels deep. rageval's files need only a few "
                "levels; check that this is the right file.")
MSG_ALIAS = ("{where}: line {line}: YAML alias '*{name}': rageval does not expand aliases (a few lines "
             "can expand to gigabytes). Write the value out in full.")
MSG_NOT_FINITE = "{where}: line {line}: {value} is not a finite number. Write a number, or null."
MSG_CHARACTER = "{where}: line {line}: character U+{code:04X} is not allowed in YAML. Remove it."

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed


def read_bytes(path: str | os.PathLike[str], *, error: type[RagevalError], limit: int | None = None,
               links: bool = True) -> bytes:
    """The file's bytes; a missing or unreadable file raises ``error`` naming it. With ``limit``:
    only a regular file of at most ``limit`` bytes, and with ``links=False`` not through a symlink."""
    if limit is None and links:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise error(MSG_CANNOT_READ.format(where=path, problem=exc.strerror or exc)) from None
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)    # O_NONBLOCK: opening a FIFO does not wait for a writer
    except OSError as exc:
        if exc.errno == errno.ELOOP and not links:
            raise error(MSG_NOT_REGULAR.format(where=path, kind="a symbolic link")) from None
        raise error(MSG_CANNOT_READ.format(where=path, problem=exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(MSG_NOT_REGULAR.format(where=path, kind=file_kind(info.st_mode)))
        if limit is not None and info.st_size > limit:
            raise error(MSG_TOO_BIG.format(where=path, limit=limit))
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read() if limit is None else fh.read(limit + 1)
    except OSError as exc:
        raise error(MSG_CANNOT_READ.format(where=path, problem=exc.strerror or exc)) from None
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit:   # it grew since fstat
        raise error(MSG_TOO_BIG.format(where=path, limit=limit))
    return data


def file_kind(mode: int) -> str:
    """What a non-regular file is, as a message names it ("a folder", "a character device" …)."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_text(path: str | os.PathLike[str], *, error: type[RagevalError]) -> str:
    """A file's text: its bytes, decoded strictly (see ``decode``)."""
    return decode(read_bytes(path, error=error), str(path), error=error)


def decode(data: bytes | str, where: str, *, error: type[RagevalError], line: int = 1) -> str:
    """UTF-8 text without NUL characters; a leading byte order mark is dropped. ``line``: the line
    the text starts on in its file (messages name the file's line)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            at = data.count(b"\n", 0, exc.start) + line
            raise error(MSG_NOT_UTF8.format(where=where, offset=exc.start, line=at)) from None
    nul = data.find("\x00")
    if nul >= 0:
        raise error(MSG_BINARY.format(where=where, line=data.count("\n", 0, nul) + line))
    return data[1:] if data.startswith("\ufeff") else data


def shown(value: Any, limit: int = 80) -> str:
    """A value as a message quotes it: its repr, cut short (an input can hold megabytes)."""
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python prints
        text = f"an integer of {value.bit_length()} bits"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finite(value: int | float) -> bool:
    """Whether a number is finite and fits a float (an int of 400 digits does not)."""
    return math.isfinite(value) if isinstance(value, float) else abs(value) < 1e300


def _line(text: str, position: int, first_line: int = 1) -> int:
    return text.count("\n", 0, position) + first_line


# --- JSON ----------------------------------------------------------------------------------

#: The characters that matter to JSON's structure: quotes, backslashes (inside strings), brackets.
_JSON_SPECIAL = re.compile(r'["\\\[\]{}]')
_JSON_ESCAPE = re.compile(r"\\.", re.S)
_JSON_STRING = re.compile(r'"[^"]*"')  # once escapes are gone, no string holds a quote
_JSON_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_JSON_KEY_END = re.compile(r"\s*:")
_JSON_NUMBER = re.compile(r"-?Infinity|NaN|-?\d[\d.eE+-]*")


class _Duplicate(Exception):
    pass


class _NotFinite(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return data


def _constant(name: str) -> Any:
    raise _NotFinite(name)


#: what a float too large for a double needs: an exponent of three digits or a run of 300 digits
#: (without either, every float of a text is finite and the checked parse_float is left out)
_MAYBE_INFINITE = re.compile(r"[eE][+-]?[0-9]{3}|[0-9]{300}")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def load_json(data: bytes | str, where: str, *, error: type[RagevalError], line: int = 1) -> Any:
    """One JSON document, strictly (see the module docstring). ``line``: the line the text starts on."""
    text = decode(data, where, error=error, line=line)
    _check_json_depth(text, where, error, line)
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant,
                          parse_float=_float if _MAYBE_INFINITE.search(text) else None)
    except json.JSONDecodeError as exc:
        raise error(MSG_JSON.format(where=where, line=exc.lineno + line - 1, problem=exc.msg,
                                    column=exc.colno)) from None
    except _Duplicate as exc:
        first, second = _duplicate_positions(text, exc.args[0])
        raise error(MSG_DUPLICATE.format(where=where, key=exc.args[0], first=_line(text, first, line),
                                         line=_line(text, second, line))) from None
    except _NotFinite as exc:
        at = _constant_position(text, exc.args[0])
        raise error(MSG_NOT_FINITE.format(where=where, line=_line(text, at, line), value=exc.args[0])) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise error(MSG_JSON.format(where=where, line="?", problem=exc, column="?")) from None


def _json_tokens(text: str) -> Any:
    """``(start, end, kind)`` of every bracket and string of a JSON text in order, kind ``"[" "]"
    "{" "}"`` or ``'"'``: one pass over the special characters, linear even for broken text."""
    string_start, escaped = -1, -1
    for m in _JSON_SPECIAL.finditer(text):
        at, char = m.start(), m.group()
        if at == escaped:
            continue
        if string_start < 0:
            if char == '"':
                string_start = at
            elif char != "\\":
                yield at, at + 1, char
        elif char == "\\":
            escaped = at + 1
        elif char == '"':
            yield string_start, at + 1, '"'
            string_start = -1


def _check_json_depth(text: str, where: str, error: type[RagevalError], first_line: int) -> None:
    """Refuse nesting deeper than MAX_DEPTH: a few regex passes measure it (linear, in C); only
    then does the slower token walk find the line."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    outside = _JSON_STRING.sub("", _JSON_ESCAPE.sub("", text) if '\\"' in text else text)
    if max(accumulate(map(_DEPTH_STEP.__getitem__, _JSON_NOT_BRACKET.sub("", outside))), default=0) <= MAX_DEPTH:
        return
    depth = 0
    for start, _, kind in _json_tokens(text):
        if kind in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise error(MSG_TOO_DEEP.format(where=where, line=_line(text, start, first_line), limit=MAX_DEPTH))
        elif kind in "]}":
            depth -= 1


def _duplicate_positions(text: str, key: str) -> tuple[int, int]:
    """Where ``key`` first and then again appears in one object (the text parsed that far)."""
    objects: list[dict[str, int] | None] = []  # per open bracket: the keys seen, None for a list
    for start, end, kind in _json_tokens(text):
        if kind in "[{":
            objects.append({} if kind == "{" else None)
        elif kind in "]}":
            del objects[-1:]
        elif objects and objects[-1] is not None and _JSON_KEY_END.match(text, end):
            name = json.loads(text[start:end])
            if name == key and name in objects[-1]:
                return objects[-1][name], start
            objects[-1].setdefault(name, start)
    return 0, 0


def _constant_position(text: str, value: str) -> int:
    """Where ``value`` (NaN, -Infinity, 1e999 …) first appears outside a string."""
    strings = [(start, end) for start, end, kind in _json_tokens(text) if kind == '"']
    for m in _JSON_NUMBER.finditer(text):
        inside = bisect.bisect_right(strings, (m.start(), len(text))) - 1
        if m.group() == value and not (inside >= 0 and strings[inside][1] > m.start()):
            return m.start()
    return 0


# --- YAML ----------------------------------------------------------------------------------

class _Refused(MarkedYAMLError):
    """What the strict reader refuses in otherwise valid YAML: a message template and its values."""

    def __init__(self, template: str, mark: Any, **kw: Any) -> None:
        super().__init__(problem=template.format(where="YAML", line=mark.line + 1, **kw), problem_mark=mark)
        self.template, self.kw = template, kw


class _Strict:
    """Mixed into a SafeLoader (C or pure Python): refuses duplicate keys, and says which value
    could not be built; nodes come from ``_compose``."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]
        except (ValueError, OverflowError) as exc:  # a timestamp or integer Python cannot hold
            raise _Refused(MSG_YAML_VALUE, node.start_mark, problem=exc) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # unhashable: the constructor says so below
                    continue
                if first is not key_node:
                    raise _Refused(MSG_DUPLICATE, key_node.start_mark, key=key, first=first.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _StrictLoader(_Strict, _SafeLoader):  # type: ignore[misc, valid-type]
    pass


def _compose(loader: Any) -> yaml.Node | None:
    """The single document's node tree, built from parser events with an explicit stack: no
    recursion, no aliases, no deeper than MAX_DEPTH (PyYAML's Composer, made strict)."""
    loader.get_event()  # stream start
    root = None
    if not loader.check_event(yaml.StreamEndEvent):
        loader.get_event()  # document start
        root = _compose_node(loader)
        loader.get_event()  # document end
    if not loader.check_event(yaml.StreamEndEvent):
        raise _Refused(MSG_SECOND_DOCUMENT, loader.get_event().start_mark)
    loader.get_event()  # stream end
    return root


_NODES = {yaml.ScalarEvent: yaml.ScalarNode, yaml.SequenceStartEvent: yaml.SequenceNode,
          yaml.MappingStartEvent: yaml.MappingNode}
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _compose_node(loader: Any) -> yaml.Node:
    stack: list[tuple[yaml.Node, list[yaml.Node]]] = []  # open collections, and a mapping's pending key
    tags: dict[tuple[Any, ...], str] = {}   # an untagged node's tag depends on its kind, value and style alone
    get_event, resolve = loader.get_event, loader.resolve
    while True:
        event = get_event()
        seen = type(event)
        if seen is yaml.AliasEvent:
            raise _Refused(MSG_ALIAS, event.start_mark, name=event.anchor)
        if seen in _ENDS:
            node = stack.pop()[0]
            node.end_mark = event.end_mark
        else:
            kind = _NODES[seen]
            value = event.value if kind is yaml.ScalarNode else None
            tag = event.tag
            if tag is None or tag == "!":
                known = (kind, value, event.implicit)
                tag = tags.get(known) or tags.setdefault(known, resolve(kind, value, event.implicit))
            if kind is yaml.ScalarNode:
                node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, style=event.style)
            else:
                if len(stack) >= MAX_DEPTH:
                    raise _Refused(MSG_TOO_DEEP, event.start_mark, limit=MAX_DEPTH)
                stack.append((kind(tag, [], event.start_mark, None, flow_style=event.flow_style), []))
                continue
        if not stack:
            return node
        parent, pending = stack[-1]
        if parent.id == "sequence":
            parent.value.append(node)
        elif pending:
            parent.value.append((pending.pop(), node))
        else:
            pending.append(node)


def parse_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """One YAML document from text: the data and the node tree that knows every line number.
    Raises ``yaml.YAMLError`` for bad syntax and for what the module docstring refuses."""
    bad = Reader.NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start())
        raise _Refused(MSG_CHARACTER, Mark("<yaml>", bad.start(), line, 0, None, None), code=ord(bad.group()))
    loader = _StrictLoader(text)
    try:
        node = _compose(loader)
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def load_yaml_node(data: bytes | str, where: str, *, error: type[RagevalError]) -> tuple[Any, yaml.Node | None]:
    """One YAML document, strictly: the data and its node tree (for line numbers)."""
    text = decode(data, where, error=error)
    try:
        return parse_yaml(text)
    except _Refused as exc:
        raise error(exc.template.format(where=where, line=exc.problem_mark.line + 1, **exc.kw)) from None
    except yaml.YAMLError as exc:
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", exc)
        line = mark.line + 1 if mark else "?"
        if problem == "exceeded maximum nesting depth":  # libyaml's own limit, met while it scans ahead
            raise error(MSG_TOO_DEEP.format(where=where, line=line, limit=MAX_DEPTH)) from None
        raise error(MSG_YAML.format(where=where, line=line, problem=problem)) from None


def load_yaml(data: bytes | str, where: str, *, error: type[RagevalError]) -> Any:
    """One YAML document, strictly (see the module docstring): built from the parser's events when
    it is plain (``rageval.yaml_fast``), else — and for every message — by ``load_yaml_node``."""
    text = decode(data, where, error=error)
    if not Reader.NON_PRINTABLE.search(text):
        loader = _StrictLoader(text)
        try:
            return plain_data(loader, MAX_DEPTH)
        except Unsure:
            pass
        finally:
            loader.dispose()
    return load_yaml_node(text, where, error=error)[0]


def key_lines(node: yaml.Node | None) -> dict[str, int]:
    """The 1-based line of every mapping key under ``node``, by dotted path (``gate.floors.hit@3``)."""
    lines: dict[str, int] = {}
    _walk(node, "", lines)
    return lines


def _walk(node: yaml.Node | None, prefix: str, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            lines[key] = key_node.start_mark.line + 1
            _walk(value_node, key, lines)


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait from ``now`` (epoch seconds): delta-seconds or
    an HTTP date (RFC 9110 §10.2.3), never negative; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(when.timestamp() - now, 0.0)


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """Every string (object keys too) of a JSON value passed through ``fn`` (secrets redacted, say)."""
    if isinstance(value, dict):
        return {fn(str(k)): map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, fn) for v in value]
    return fn(value) if isinstance(value, str) else value
