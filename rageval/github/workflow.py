"""The runner's workflow commands and file commands: log lines, ``::error::``, groups, masks,
``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class Console:
    """Workflow commands and log lines on ``out``; every line passes through ``redact``."""

    def __init__(self, out: TextIO, secrets: list[str]) -> None:
        self.out = out
        self.secrets = secrets

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _command(self, name: str, message: str) -> None:
        data = self.redact(message).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        self.out.write(f"::{name}::{data}\n")
        self.out.flush()

    def mask(self, value: str) -> None:
        # the runner swallows this line and hides the value in every later log line
        for line in value.splitlines() or [value]:
            if line.strip():
                self.out.write(f"::add-mask::{line}\n")
        self.out.flush()

    def error(self, message: str) -> None:
        self._command("error title=rag-eval-gate", message)

    def warning(self, message: str) -> None:
        self._command("warning title=rag-eval-gate", message)

    def notice(self, message: str) -> None:
        self._command("notice title=rag-eval-gate", message)

    def log(self, message: str) -> None:
        # a log line must never start a workflow command by accident
        for line in self.redact(message).splitlines() or [""]:
            self.out.write(("  " + line if line.startswith("::") else line) + "\n")
        self.out.flush()

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self.out.write(f"::group::{self.redact(title)}\n")
        self.out.flush()
        try:
            yield
        finally:
            self.out.write("::endgroup::\n")
            self.out.flush()


def write_output(path: str | os.PathLike[str], name: str, value: str) -> None:
    """Append ``name`` to a $GITHUB_OUTPUT file, multiline-safe (``name<<DELIM``)."""
    while True:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter not in value and delimiter not in name:
            break
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_text(path: str | os.PathLike[str], text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


class Progress:
    """A log line at every 25% of the cases."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label, self.shown = console, label, -1

    def __call__(self, done: int, total: int) -> None:
        quarter = 4 * done // total if total else 4
        if quarter > self.shown:
            self.shown = quarter
            self.console.log(f"{self.label}: {done}/{total} cases")
