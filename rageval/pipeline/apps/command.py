"""Command: the user's own program answers. One long-lived process; we write one JSON request
per line to its stdin ({"id", "question"}) and read one trace per line from its stdout, in order.
Its stderr passes through to ours. A request that gets no line within ``timeout_s`` is an error
for that case and the process is restarted for the next one. The process gets exactly the
environment it is given (``env``): the caller decides what it may see.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from rageval.errors import ConfigError, DatasetError
from rageval.golden.set import Case
from rageval.pipeline.apps import Trace, request_for, trace_from_dict


class CommandApp:
    deterministic = False

    def __init__(self, argv: tuple[str, ...], cwd: Path, timeout_s: float = 60.0, *,
                 env: Mapping[str, str]) -> None:
        self.argv, self.cwd, self.timeout_s = list(argv), cwd, timeout_s
        self.env = dict(env)
        self.name = f"command:{argv[0]}"
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, encoding="utf-8", bufsize=1, env=self.env)
        except OSError as exc:
            raise ConfigError(f"app.command: cannot start {self.argv[0]!r}: {exc.strerror}. "
                              "Check the command and that it is installed.") from None
        self._lines = queue.Queue()
        lines = self._lines

        def pump() -> None:
            assert proc.stdout is not None  # noqa: S101 - Popen(stdout=PIPE) guarantees it
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        return proc

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            started = time.monotonic()
            try:
                assert proc.stdin is not None  # noqa: S101
                proc.stdin.write(json.dumps(request_for(case), ensure_ascii=False) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return Trace(case.id, error=f"{self.argv[0]} exited (code {proc.poll()}) before reading the request")
            try:
                line = self._lines.get(timeout=self.timeout_s)
            except queue.Empty:
                self.close()
                return Trace(case.id, error=f"no answer from {self.argv[0]} within {self.timeout_s:g} s")
            if line is None:
                code = proc.wait(timeout=5)
                self._proc = None
                return Trace(case.id, error=f"{self.argv[0]} exited with code {code} without answering")
            latency = (time.monotonic() - started) * 1000
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            return Trace(case.id, error=f"{self.argv[0]} wrote a line that is not JSON ({exc.msg}): {line[:80]!r}")
        try:
            trace = trace_from_dict(data, f"{self.argv[0]} answer for case '{case.id}'")
        except DatasetError as exc:
            return Trace(case.id, error=str(exc))
        if trace.id != case.id:
            return Trace(case.id, error=f"{self.argv[0]} answered case '{trace.id}' when asked for '{case.id}'")
        return trace if trace.latency_ms is not None else Trace(**{**trace.__dict__, "latency_ms": round(latency, 1)})

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
