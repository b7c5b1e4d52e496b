"""Command: the user's own program answers. One long-lived process; we write one JSON request
per line to its stdin ({"id", "question"}) and read one trace per line from its stdout, in order.
Its stderr passes through to ours. The process gets exactly the environment it is given
(``env``): the caller decides what it may see.

Every wait is bounded, so a broken program costs one case, never the run:

- ``timeout_s`` is a total deadline for one request: writing it and reading the whole answer line.
  A request without a complete line by then is an error for that case, and the process is
  restarted for the next one.
- A line over ``max_bytes`` (``MAX_TRACE_BYTES``, 10 MB) is an error for that case; reading stops
  there and the process is restarted (the rest of the line must not pass for the next answer).
- A line that is not UTF-8 or not JSON is an error for that case; the process goes on.

Reading and writing poll the pipes (POSIX ``select.poll``), with no reader thread.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from rageval.errors import ConfigError, DatasetError
from rageval.golden.set import Case
from rageval.pipeline.apps import MAX_TRACE_BYTES, Trace, load_trace_json, request_for, trace_from_dict

_CHUNK = 64 * 1024
_EXIT_WAIT_S = 5.0    # how long a process that closed its output or its input gets to exit


class _NoAnswer(Exception):
    """The request got no usable line; the message completes "<program> …" in the case error."""

    def __init__(self, message: str, *, restart: bool) -> None:
        super().__init__(message)
        self.restart = restart


class CommandApp:
    deterministic = False

    def __init__(self, argv: tuple[str, ...], cwd: Path, timeout_s: float = 60.0, *,
                 env: Mapping[str, str], max_bytes: int = MAX_TRACE_BYTES) -> None:
        self.argv, self.cwd, self.timeout_s, self.max_bytes = list(argv), cwd, timeout_s, max_bytes
        self.env = dict(env)
        self.name = f"command:{argv[0]}"
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()      # what the process wrote after the last line we took

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    bufsize=0, env=self.env)
        except OSError as exc:
            raise ConfigError(f"app.command: cannot start {self.argv[0]!r}: {exc.strerror}. "
                              "Check the command and that it is installed.") from None
        assert proc.stdin is not None and proc.stdout is not None  # noqa: S101 - PIPE guarantees both
        os.set_blocking(proc.stdin.fileno(), False)
        self._buffer = bytearray()
        return proc

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        request = (json.dumps(request_for(case), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            started = time.monotonic()
            deadline = started + self.timeout_s
            try:
                self._write(proc, request, deadline)
                line = self._read_line(proc, deadline)
            except _NoAnswer as exc:
                if exc.restart:
                    self._kill()
                return Trace(case.id, error=f"{self.argv[0]} {exc}")
            latency = (time.monotonic() - started) * 1000
        try:
            data = load_trace_json(line, f"{self.argv[0]} answer for case '{case.id}'")
            trace = trace_from_dict(data, f"{self.argv[0]} answer for case '{case.id}'")
        except DatasetError as exc:
            return Trace(case.id, error=str(exc))
        if trace.id != case.id:
            return Trace(case.id, error=f"{self.argv[0]} answered case '{trace.id}' when asked for '{case.id}'")
        return trace if trace.latency_ms is not None else Trace(**{**trace.__dict__, "latency_ms": round(latency, 1)})

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

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        """The next line of the process's output (without its newline), by ``deadline``."""
        assert proc.stdout is not None  # noqa: S101
        fd, searched = proc.stdout.fileno(), 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if len(line) > self.max_bytes:
                    raise _NoAnswer(self._too_long(), restart=True)
                return line
            searched = len(self._buffer)
            if searched > self.max_bytes:
                raise _NoAnswer(self._too_long(), restart=True)
            if not _ready(fd, deadline):
                raise _NoAnswer(f"gave no complete answer line within {self.timeout_s:g} s (app.timeout_s)",
                                restart=True)
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                raise _NoAnswer(f"{_exited(proc)} without answering", restart=True)
            self._buffer += chunk

    def _too_long(self) -> str:
        return f"wrote a line of more than {self.max_bytes:,} bytes, the most one trace may take"

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=_EXIT_WAIT_S)
        _close_pipes(proc)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=_EXIT_WAIT_S)
        _close_pipes(proc)


def _ready(fd: int, deadline: float, *, write: bool = False) -> bool:
    """Whether ``fd`` can be read (or written) before ``deadline``; False once it has passed, so
    output trickling in cannot stretch a request past it."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    poller = select.poll()   # not select.select: it cannot wait on a descriptor numbered over 1023
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(left * 1000))


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
