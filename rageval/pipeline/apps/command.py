"""Command: the user's own program answers. We write one JSON request per line to its stdin
({"id", "question"}) and read one trace per line from its stdout, in order. The process gets
exactly the environment it is given (``env``): the caller decides what it may see.

Concurrency (``app.concurrency``): the runner asks from up to that many threads at once, and each
request takes an idle process of a pool, or starts one, so N threads keep N long-lived processes
busy (one per worker); a process answers one request at a time. Results stay in case order (the
runner's), and a broken process costs its own case only.

Every wait is bounded, so a broken program costs one case, never the run:

- ``timeout_s`` is a total deadline for one request: writing it and reading the whole answer line.
  A request without a complete line by then is an error for that case, and the process is
  stopped (the next request starts a fresh one).
- A line over ``max_bytes`` (``MAX_TRACE_BYTES``, 10 MB) is an error for that case; reading stops
  there and the process is stopped (the rest of the line must not pass for the next answer).
- A line that is not UTF-8 or not JSON is an error for that case; the process goes on.

Reading and writing poll the pipes (POSIX ``select.poll``) in the calling thread.

Where the process runs (`Isolation`): its stderr passes through to ours unless a ``stderr`` sink
is given, which then receives the process's stderr line by line (a drain thread per process, lines
cut at ``MAX_STDERR_LINE`` bytes); with ``user`` / ``group`` it runs as that user with no
supplementary groups (the caller must be root). The process-wide default (`isolated`) lets the
caller that owns the process (the GitHub action) set it once for every command app started.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rageval.errors import ConfigError, DatasetError
from rageval.golden.set import Case
from rageval.pipeline.apps import MAX_TRACE_BYTES, Trace, load_trace_json, request_for, trace_from_dict

_CHUNK = 64 * 1024
_EXIT_WAIT_S = 5.0    # how long a process that closed its output or its input gets to exit
MAX_ERROR_LINE = 300         # of the app's last stderr line, quoted in a case error
MAX_STDERR_LINE = 8 * 1024   # a longer stderr line is handed on in pieces of this many bytes


@dataclass(frozen=True)
class Isolation:
    """How command apps are started: as which user, and where their stderr goes."""

    user: int | None = None                        # uid to run as (needs root); None: ours
    group: int | None = None                       # gid to run as; None: ours
    stderr: Callable[[str], None] | None = None    # receives the app's stderr, a few whole lines at a time


_default = [Isolation()]


@contextmanager
def isolated(policy: Isolation) -> Iterator[None]:
    """Start every command app created inside the block with ``policy`` (unless one is given)."""
    _default.append(policy)
    try:
        yield
    finally:
        _default.remove(policy)


class _NoAnswer(Exception):
    """The request got no usable line; the message completes "<program> …" in the case error."""

    def __init__(self, message: str, *, restart: bool) -> None:
        super().__init__(message)
        self.restart = restart


class _Process:
    """One running app process and what it wrote after the last line we took."""

    def __init__(self, proc: subprocess.Popen[bytes], drain: threading.Thread | None) -> None:
        self.proc = proc
        self.buffer = bytearray()
        self.drain = drain      # the thread handing its stderr on, if any
        self.last_error = ""    # the last line it wrote to stderr: why it died, when it did

    def heard(self, text: str) -> None:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            self.last_error = lines[-1][:MAX_ERROR_LINE]

    def join(self) -> None:
        """Wait (bounded) until everything the process wrote to stderr was handed on."""
        if self.drain is not None:
            self.drain.join(timeout=_EXIT_WAIT_S)


class CommandApp:
    deterministic = False

    def __init__(self, argv: tuple[str, ...], cwd: Path, timeout_s: float = 60.0, *,
                 env: Mapping[str, str], max_bytes: int = MAX_TRACE_BYTES,
                 isolation: Isolation | None = None) -> None:
        self.argv, self.cwd, self.timeout_s, self.max_bytes = list(argv), cwd, timeout_s, max_bytes
        self.env = dict(env)
        self.isolation = isolation if isolation is not None else _default[-1]
        self.name = f"command:{argv[0]}"
        self._lock = threading.Lock()
        self._idle: list[_Process] = []
        self._all: list[_Process] = []

    def _start(self) -> _Process:
        iso = self.isolation
        extra = {} if iso.user is None and iso.group is None else {"extra_groups": []}
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, bufsize=0, env=self.env,
                                    user=iso.user, group=iso.group, **extra)
        except OSError as exc:
            raise ConfigError(f"app.command: cannot start {self.argv[0]!r}: {exc.strerror}. "
                              "Check the command and that it is installed.") from None
        assert proc.stdin is not None and proc.stdout is not None  # noqa: S101 - PIPE guarantees both
        os.set_blocking(proc.stdin.fileno(), False)
        started = _Process(proc, None)
        sink = iso.stderr or _pass_through

        def hand_on(text: str) -> None:
            started.heard(text)
            sink(text)
        if proc.stderr is not None:
            started.drain = threading.Thread(target=_drain, args=(proc.stderr, hand_on), daemon=True,
                                             name=f"stderr of {self.argv[0]}")
            started.drain.start()
        with self._lock:
            self._all.append(started)
        return started

    def _take(self) -> _Process:
        """An idle live process, else a new one."""
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
                self._forget(worker)
        return self._start()

    def _forget(self, worker: _Process) -> None:
        if worker in self._all:
            self._all.remove(worker)

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        request = (json.dumps(request_for(case), ensure_ascii=False) + "\n").encode("utf-8")
        worker = self._take()
        started = time.monotonic()
        deadline = started + self.timeout_s
        try:
            self._write(worker.proc, request, deadline)
            line = self._read_line(worker, deadline)
        except _NoAnswer as exc:
            if exc.restart:
                self._kill(worker)
            else:
                self._give_back(worker)
            return Trace(case.id, error=f"{self.argv[0]} {exc}")
        except BaseException:
            self._kill(worker)
            raise
        latency = (time.monotonic() - started) * 1000
        self._give_back(worker)
        try:
            data = load_trace_json(line, f"{self.argv[0]} answer for case '{case.id}'")
            trace = trace_from_dict(data, f"{self.argv[0]} answer for case '{case.id}'")
        except DatasetError as exc:
            return Trace(case.id, error=str(exc))
        if trace.id != case.id:
            return Trace(case.id, error=f"{self.argv[0]} answered case '{trace.id}' when asked for '{case.id}'")
        return trace if trace.latency_ms is not None else Trace(**{**trace.__dict__, "latency_ms": round(latency, 1)})

    def _give_back(self, worker: _Process) -> None:
        with self._lock:
            self._idle.append(worker)

    def _write(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float) -> None:
        assert proc.stdin is not None  # noqa: S101
        fd, view = proc.stdin.fileno(), memoryview(data)
        while view:
            if not _ready(fd, deadline, write=True):
                raise _NoAnswer(f"did not read the request within {self.timeout_s:g} s (app.timeout_s)", restart=True)
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
            except OSError:  # BrokenPipeError: it exited
                raise _NoAnswer(f"{_exited(proc)} before reading the request", restart=True) from None

    def _read_line(self, worker: _Process, deadline: float) -> bytes:
        """The next line of the process's output (without its newline), by ``deadline``."""
        proc, buffer = worker.proc, worker.buffer
        assert proc.stdout is not None  # noqa: S101
        fd, searched = proc.stdout.fileno(), 0
        while True:
            end = buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                if len(line) > self.max_bytes:
                    raise _NoAnswer(self._too_long(), restart=True)
                return line
            searched = len(buffer)
            if searched > self.max_bytes:
                raise _NoAnswer(self._too_long(), restart=True)
            if not _ready(fd, deadline):
                raise _NoAnswer(f"gave no complete answer line within {self.timeout_s:g} s (app.timeout_s)",
                                restart=True)
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                raise _NoAnswer(f"{_exited(proc)} without answering{_last_words(worker)}", restart=True)
            buffer += chunk

    def _too_long(self) -> str:
        return f"wrote a line of more than {self.max_bytes:,} bytes, the most one trace may take"

    def _kill(self, worker: _Process) -> None:
        with self._lock:
            self._forget(worker)
        proc = worker.proc
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=_EXIT_WAIT_S)
        _close_pipes(proc)
        worker.join()

    def close(self) -> None:
        """Close every process's input and wait for it to exit (killed after a grace period)."""
        with self._lock:
            workers, self._all, self._idle = self._all, [], []
        for worker in workers:
            proc = worker.proc
            if proc.poll() is None:
                if proc.stdin:
                    proc.stdin.close()
                try:
                    proc.wait(timeout=_EXIT_WAIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=_EXIT_WAIT_S)
            _close_pipes(proc)
            worker.join()


def _drain(pipe: IO[bytes], sink: Callable[[str], None]) -> None:
    """Hand ``pipe``'s bytes to ``sink`` as whole lines (decoded, undecodable bytes replaced),
    cutting a line at MAX_STDERR_LINE bytes, until the process closes it."""
    pending = bytearray()
    try:
        while chunk := os.read(pipe.fileno(), _CHUNK):
            pending += chunk
            cut = pending.rfind(b"\n") + 1
            while not cut and len(pending) >= MAX_STDERR_LINE:
                cut = MAX_STDERR_LINE
            if cut:
                sink(bytes(pending[:cut]).decode("utf-8", "replace"))
                del pending[:cut]
    except (OSError, ValueError):   # the pipe was closed under us
        pass
    finally:
        pipe.close()
    if pending:
        sink(bytes(pending).decode("utf-8", "replace"))


def _ready(fd: int, deadline: float, *, write: bool = False) -> bool:
    """Whether ``fd`` can be read (or written) before ``deadline``; False once it has passed, so
    output trickling in cannot stretch a request past it."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    poller = select.poll()   # not select.select: it cannot wait on a descriptor numbered over 1023
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(left * 1000))


def _pass_through(text: str) -> None:
    """The app's stderr, on ours (the CLI: a person reads both)."""
    sys.stderr.write(text)
    sys.stderr.flush()


def _last_words(worker: _Process) -> str:
    """``: <the last line the app wrote to stderr>`` (its traceback's last line), once it is in."""
    worker.join()
    return f": {worker.last_error}" if worker.last_error else ""


def _exited(proc: subprocess.Popen[bytes]) -> str:
    try:
        return f"exited with code {proc.wait(timeout=_EXIT_WAIT_S)}"
    except subprocess.TimeoutExpired:
        return "closed its pipe (still running)"


def _close_pipes(proc: subprocess.Popen[bytes] | None) -> None:
    for pipe in (proc.stdin, proc.stdout) if proc is not None else ():
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
