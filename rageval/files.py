"""Reading and writing rageval's files: strict JSON in, typed access to it with the key path in every
message (:class:`Reader`), and atomic writes out.

* ``read_result_file`` / ``parse_result_json``: a results file (a RunResult, a verdict) is a regular
  file of at most ``MAX_RESULT_BYTES``, parsed under ``rageval.parse``'s rules (UTF-8, no key twice,
  no ``NaN`` or ``±Infinity``, bounded nesting); ``RunResult.from_json`` and ``Verdict.from_json``
  are built on them;
* ``to_json`` / ``write_json`` never write them (``allow_nan=False``);
* ``write_bytes`` / ``write_text`` write a temp file beside a regular file (or a new path) and
  rename it, so a failed run never leaves half a file where a results file or report used to be; a
  device or a pipe (``/dev/stdout``, ``/dev/null``, a FIFO) is written in place and never replaced by
  a regular file; a symlink to a file is refused, never written through;
* ``append_text`` appends to a file another program reads as it grows (the runner's
  ``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY``, which the action and `rageval gate` append to).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rageval.errors import RagevalError, ResultError
from rageval.parse import MSG_TOO_BIG, file_kind, finite, load_json, read_bytes, shown

# --- validation ------------------------------------------------------------------------------

class Reader:
    """Typed access to one JSON value with the dotted key path of every value in its messages:
    ``baseline.json: summary.metrics.pass_rate: expected a finite number or null, got 'NaN'``."""

    def __init__(self, where: str, error: type[RagevalError] = ResultError) -> None:
        self.where, self.error = where, error

    def fail(self, key: str, problem: str) -> RagevalError:
        return self.error(f"{self.where}: {key}: {problem}")

    def _got(self, key: str, expected: str, value: Any) -> RagevalError:
        got = type(value).__name__ if isinstance(value, dict | list) else shown(value)
        return self.fail(key, f"expected {expected}, got {got}")

    def obj(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self._got(key, "an object", value)
        return value

    def req(self, data: Mapping[str, Any], name: str, key: str) -> Any:
        if name not in data:
            raise self.fail(f"{key}.{name}" if key else name, "missing")
        return data[name]

    def keys(self, data: Mapping[str, Any], allowed: Iterable[str], key: str) -> None:
        allowed = tuple(allowed)
        for name in data:
            if name not in allowed:
                raise self.fail(f"{key}.{name}" if key else str(name),
                                f"unknown key (this rageval knows: {', '.join(allowed)})")

    def lst(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise self._got(key, "a list", value)
        return list(value)

    def num(self, value: Any, key: str, *, optional: bool = False, minimum: float | None = None,
            maximum: float | None = None) -> float | None:
        if value is None and optional:
            return None
        kind = type(value)
        if not ((kind is float and math.isfinite(value)) or (kind is int and -1e300 < value < 1e300)) and (
                isinstance(value, bool) or not isinstance(value, int | float) or not finite(value)):
            raise self._got(key, "a finite number" + (" or null" if optional else ""), value)
        if maximum is not None and not (minimum or 0) <= value <= maximum:
            raise self.fail(key, f"expected a number from {minimum or 0:g} to {maximum:g}, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"expected a number ≥ {minimum:g}, got {value!r}")
        return value

    def int_(self, value: Any, key: str, *, optional: bool = False, minimum: int | None = 0) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._got(key, "an integer" + (" or null" if optional else ""), value)
        if minimum is not None and value < minimum:
            raise self.fail(key, f"expected an integer ≥ {minimum}, got {value!r}")
        return value

    def str_(self, value: Any, key: str, *, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self._got(key, "a string" + (" or null" if optional else ""), value)
        return value

    def bool_(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self._got(key, "true or false", value)
        return value

    def strs(self, value: Any, key: str) -> tuple[str, ...]:
        items = self.lst(value, key)
        if all(type(v) is str for v in items):      # the common case, without a key per item
            return tuple(items)
        return tuple(self.str_(v, f"{key}[{i}]") for i, v in enumerate(items))  # type: ignore[misc]

    def numbers(self, value: Any, key: str, *, optional: bool = True,
                bounds: Callable[[str], tuple[float, float | None]] | None = None) -> dict[str, float | None]:
        """A {name: number} object; ``bounds(name)`` gives each value's (minimum, maximum)."""
        out = {}
        for k, v in self.obj(value, key).items():
            low, high = bounds(str(k)) if bounds else (None, None)
            out[str(k)] = self.num(v, f"{key}.{k}", optional=optional, minimum=low, maximum=high)
        return out

    def json(self, value: Any, key: str, depth: int = 0) -> Any:
        """Any JSON value, with every number finite; returned as plain dicts and lists."""
        kind = type(value)
        if kind is str or kind is bool or value is None or (kind is int and -1e300 < value < 1e300):
            return value                                                    # most values: at once
        if kind is list and all(type(v) is str for v in value):
            return list(value)
        if depth > 64:
            raise self.fail(key, "nested deeper than 64 levels")
        if kind is float and math.isfinite(value):
            return value
        if kind is dict or isinstance(value, Mapping):
            return {str(k): self.json(v, f"{key}.{k}", depth + 1) for k, v in value.items()}
        if kind is list or isinstance(value, list | tuple):
            return [self.json(v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value)]
        if isinstance(value, int | float) and not isinstance(value, bool) and not finite(value):
            raise self._got(key, "a finite number", value)
        if value is None or isinstance(value, str | int | float | bool):
            return value
        raise self._got(key, "a JSON value", value)


# --- files -----------------------------------------------------------------------------------

#: The most bytes a results file (a RunResult, a verdict) may have. A 5,000-case RunResult is ~12 MB
#: and loads at a peak of ~87 MB, about 7× its size (``python bench/bench_results_io.py``); 512 MiB
#: (~200,000 such cases) then peaks near 3.5 GB, within a GitHub-hosted runner's 7 GB, while a wrong
#: file (a log, a disk image, ``/dev/zero``) is refused before it is read.
MAX_RESULT_BYTES = 512 * 2**20
MSG_NOT_FOUND = "{path}: {what} file not found."


def read_result_file(path: str | os.PathLike[str], error: type[RagevalError] = ResultError,
                     what: str = "RunResult") -> bytes:
    """A results file's bytes: a regular file (a symlink to one is followed) of at most
    ``MAX_RESULT_BYTES``; ``what`` names the kind of file in messages."""
    path = Path(path)
    if not path.exists():
        raise error(MSG_NOT_FOUND.format(path=path, what=what))
    return read_bytes(path, error=error, limit=MAX_RESULT_BYTES)


def parse_result_json(data: bytes, where: str, error: type[RagevalError] = ResultError) -> Any:
    """A results file's JSON from its bytes, wherever they came from (a file, an artifact's
    member): at most ``MAX_RESULT_BYTES``, then ``rageval.parse.load_json``'s rules."""
    if len(data) > MAX_RESULT_BYTES:
        raise error(MSG_TOO_BIG.format(where=where, limit=MAX_RESULT_BYTES))
    return load_json(data, where, error=error)


class Streamed:
    """A JSON array of ``length`` items that ``items()`` makes while it is written (``json_pieces``,
    ``write_json``): a large list of records is never held whole. Anywhere else json writes it as
    the list it makes."""

    def __init__(self, length: int, items: Callable[[], Iterable[Any]]) -> None:
        self._length, self._items = length, items

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())


def _streamed(value: Any) -> list[Any]:
    """json's ``default``: a Streamed as its items; anything else unwritable, as json says it."""
    if isinstance(value, Streamed):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_streamed)
_INDENTED = json.JSONEncoder(ensure_ascii=False, indent=1, allow_nan=False, default=_streamed)


def to_json(data: Any, *, compact: bool = False) -> str:
    """The JSON rageval writes: UTF-8 text, never NaN or Infinity; indented by one space, or
    ``compact`` (no whitespace at all) for large machine-read files."""
    return (_COMPACT if compact else _INDENTED).encode(data) + "\n"


#: characters of JSON text encoded and written at a time by ``write_json``
PIECE_CHARS = 1 << 18


def json_pieces(data: Any, *, compact: bool = False) -> Iterator[str]:
    """``to_json(data, compact=compact)``'s text in consecutive pieces, the same characters, so a
    writer holds one piece rather than the whole text (and its UTF-8 copy): 20,000 cases are a
    50 MB file. Indented text comes from the encoder's own iteration (the pure-Python encoder,
    which ``json.dumps`` also uses with ``indent``); compact text from the C encoder, called on the
    items of the large containers (the top two levels, and any with 64 items or more)."""
    yield from (_compact_pieces(data, 0) if compact else _INDENTED.iterencode(data))
    yield "\n"


def _compact_pieces(value: Any, depth: int) -> Iterator[str]:
    if isinstance(value, dict) and value and (depth < 2 or len(value) >= 64) \
            and all(type(key) is str for key in value):          # other keys: json's own conversion
        opening = "{"
        for key, item in value.items():
            yield opening + _COMPACT.encode(key) + ":"
            yield from _compact_pieces(item, depth + 1)
            opening = ","
        yield "}"
    elif isinstance(value, (list, tuple, Streamed)) and value and (depth < 2 or len(value) >= 64):
        opening = "["
        for item in value:
            yield opening
            yield from _compact_pieces(item, depth + 1)
            opening = ","
        yield "]"
    else:
        yield _COMPACT.encode(value)


def _utf8_blocks(pieces: Iterable[str]) -> Iterator[bytes]:
    """The pieces as UTF-8, joined into blocks of about ``PIECE_CHARS`` characters."""
    block: list[str] = []
    size = 0
    for piece in pieces:
        block.append(piece)
        size += len(piece)
        if size >= PIECE_CHARS:
            out = "".join(block).encode("utf-8")
            block.clear()                       # before the writer takes the block: one is held, not two
            size = 0
            yield out
    if block:
        yield "".join(block).encode("utf-8")


def write_json(path: str | os.PathLike[str], data: Any, *, compact: bool | None = None, links: bool = True) -> None:
    """Write JSON atomically (see write_bytes), streamed in blocks (``json_pieces``); a record with
    ``to_dict`` is written as that (as ``to_json_tree``, the same JSON with lists it makes while
    they are written, when it has one), and compact when it says so (``compact_json``) unless
    ``compact`` says. An unwritable value (NaN, an object json cannot encode) fails before the
    file is replaced, as ever."""
    compact = getattr(data, "compact_json", False) if compact is None else compact
    with paused_gc():
        if hasattr(data, "to_json_tree"):
            data = data.to_json_tree()
        elif hasattr(data, "to_dict"):
            data = data.to_dict()
        write_bytes(path, _utf8_blocks(json_pieces(data, compact=compact)), links=links)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large tree of new, acyclic objects is built (a
    RunResult's JSON, a golden set): each of its passes walks every object the process holds (an
    index, a run), ~0.3 s of a 5,000-case write. Reference counting still frees what is dropped;
    the collector resumes as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def kept_out_of_gc() -> Iterator[Callable[[], None]]:
    """Move every object the process holds out of the cyclic collector's reach (``gc.freeze``)
    while a long computation adds to what it keeps (a run's index, golden set and corpus, then its
    cases' results): each full pass of the collector would walk them all again, ~1 s of a
    20,000-case run. Yields a function that does the same for what was made since (call it when the
    new objects are kept: a block of results). Young objects are still collected; what is frozen
    is handed back to the collector at the end, unless an outer caller froze first (gc has one
    permanent generation: it is that caller's to hand back)."""
    outer = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        if not outer:
            gc.unfreeze()


def _umask() -> int:
    """The process umask (read once, at import, while nothing else runs)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: mode of every file rageval writes: what ``open()`` would give (0644 under umask 022). A
#: temporary file gets 0600; in a Docker action the next steps run as another user (uid 1001) and
#: must be able to read the results, the report and the cache.
FILE_MODE = 0o666 & ~_umask()
MSG_WRITE = "{path}: could not write the file ({problem}); {old}. Free some space or check the folder's permissions."
MSG_WRITE_IN_PLACE = ("{path}: could not write to it ({problem}); it is a device or a pipe, written in place, "
                      "so part of the output may have gone through. Check the path.")
MSG_LINK = ("{path}: a symbolic link (to {target}). rageval writes to a plain path, a device or a pipe, never "
            "through a link to a file (in a checkout a pull request controls, a link could point anywhere). Give "
            "the path of the file itself.")
MSG_SPECIAL = "{path}: {kind}, not something rageval writes to. Give the path of a file."
#: links that name a file this process already has open (``/dev/stdout`` → ``/proc/self/fd/1``)
_OPEN_FILE = re.compile(r"^/(proc/(self|\d+)|dev)/fd/")


def write_bytes(path: str | os.PathLike[str], data: bytes | Iterable[bytes], *, mode: int | None = None,
                replace: bool = False, links: bool = True) -> None:
    """Write ``data`` (bytes, or blocks of them made as they are written) to ``path``, by what is
    there (a RagevalError naming the path if it fails):

    - nothing, or a regular file: a temp file in the same folder (``mode``, default FILE_MODE), then
      a rename, so a failed run never leaves half a file (the old file stays as it was);
    - a character device or a FIFO, also through links (``/dev/stdout``, ``/dev/null``), or a link
      to a file this process has open (``/dev/stdout`` redirected to a file): written in place,
      appended to, never replaced (a rename over ``/dev/stdout`` as root replaced it with a file);
    - any other symlink (to a file, a folder, nowhere), a block device or a socket: refused.

    ``links=False`` refuses every symlink at ``path``, ``/dev/stdout``-like ones too: the action
    writes into a checkout a pull request controls, where a link to ``/proc/self/fd/1`` would put
    the report's untrusted text into the job log unescaped. ``replace=True`` is for rageval's own
    files (a cache entry): whatever is at ``path``, a planted link included, is replaced by the
    rename, never written through."""
    path = Path(path)
    if not links and path.is_symlink():
        raise RagevalError(MSG_LINK.format(path=path, target=os.readlink(path)))
    if not replace and _in_place(path):
        # made whole first: a block that fails to be made must not leave half a text in a pipe
        _write_in_place(path, data if isinstance(data, bytes) else b"".join(data))
        return
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, FILE_MODE if mode is None else mode)
        with os.fdopen(fd, "wb") as fh:
            for block in (data,) if isinstance(data, bytes) else data:
                fh.write(block)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        old = "the previous file is unchanged" if path.exists() else "nothing was written"
        raise RagevalError(MSG_WRITE.format(path=path, problem=exc.strerror or exc, old=old)) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _in_place(path: Path) -> bool:
    """Whether ``path`` is written in place rather than by a rename; RagevalError for what rageval
    does not write to (see ``write_bytes``)."""
    try:
        info = os.stat(path)                       # through any link
    except OSError:
        info = None                                # nothing there, a dangling link, a path under a file
    if info is not None and (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        return True
    if path.is_symlink():
        if _names_an_open_file(path):
            return True
        raise RagevalError(MSG_LINK.format(path=path, target=os.readlink(path)))
    if info is not None and (stat.S_ISBLK(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
        raise RagevalError(MSG_SPECIAL.format(path=path, kind=file_kind(info.st_mode)))
    return False


def _names_an_open_file(path: Path) -> bool:
    """Whether ``path`` or a link on the way leads through ``/proc/<pid>/fd/`` or ``/dev/fd/``."""
    current = os.path.abspath(path)
    for _ in range(40):                            # the kernel's own limit on a chain of links
        if _OPEN_FILE.match(current):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return False


def _write_in_place(path: Path, data: bytes) -> None:
    """Write to a device, pipe or open file as it is: appended, no create, no truncate, no rename."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as exc:
        raise RagevalError(MSG_WRITE_IN_PLACE.format(path=path, problem=exc.strerror or exc)) from None


def write_text(path: str | os.PathLike[str], text: str, *, links: bool = True) -> None:
    """``write_bytes`` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"), links=links)


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` to ``path``, ending it with a newline; a full disk or a missing folder is a
    RagevalError naming the file (exit 2), never a traceback."""
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise RagevalError(f"{path}: could not append to the runner's file ({exc.strerror or exc}).") from None
