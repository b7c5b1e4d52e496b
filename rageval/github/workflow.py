"""The runner's workflow commands and file commands: log lines, ``::error::``, groups, masks,
``$GITHUB_OUTPUT`` and ``$GITHUB_STEP_SUMMARY``.

How the runner reads a step's output (actions/runner, ``src/Runner.Common/ActionCommand.cs`` and
``src/Runner.Worker/ActionCommandManager.cs``): every line of stdout *and* stderr is offered to
``TryParseV2`` — the line, with leading whitespace trimmed, starts with ``::``, and the command
name runs up to the next ``::`` — and then to the older ``TryParse``, which finds ``##[`` anywhere
in the line. ``::stop-commands::TOKEN`` pauses all processing until a line whose command is
``TOKEN`` (``::TOKEN::``). Command data is unescaped (``%25``, ``%0D``, ``%0A``).

So text we do not control — answers, app errors, golden text, reasons quoting them, tracebacks —
is printed only through `Console.log`, which prints a message as is when no line of it could be a
command, and otherwise between ``::stop-commands::<random token>`` and ``::<token>::`` (what
@actions/core's docs describe), with ``##[`` broken up so the log viewer does not render it as
the runner's own markup either. Everything goes to ``out`` (stdout): a second stream would race
with an open stop-commands block, because the runner reads the two streams independently.
"""

from __future__ import annotations

import os
import secrets
import threading
import unicodedata
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rageval.files import append_text
from rageval.gate.markdown import printable
from rageval.text import redact, secret_lines

#: what ``##[`` becomes in printed text: visible, and not ``##[`` under any string comparison
#: (a zero-width character would not do: .NET's culture-sensitive IndexOf ignores it).
NEUTRAL_PREFIX = "# #["


def escape_data(value: str) -> str:
    """A command's data as @actions/core escapes it and the runner unescapes it."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def could_be_command(text: str) -> bool:
    """True unless no line of ``text`` can be a workflow command, judged conservatively: after
    NFKC folding and with every invisible, combining and separator character removed (so that no
    comparison rule of the runner can see ``::`` or ``##[`` where this check does not), the
    text holds neither ``::`` nor ``##[``. Line breaks are removed too, which only widens it."""
    folded = unicodedata.normalize("NFKC", text)
    visible = "".join(ch for ch in folded if ch == " " or unicodedata.category(ch)[0] not in "CMZ")
    return "::" in visible or "##[" in visible


def neutralise(text: str) -> str:
    """``##[`` (the runner's older command form and its log markup) broken up, visibly."""
    return text.replace("##[", NEUTRAL_PREFIX)


class Console:
    """Workflow commands and log lines on ``out``; every line passes through ``redact``."""

    def __init__(self, out: TextIO, secrets_: list[str]) -> None:
        self.out = out
        self.secrets = secrets_
        self._lock = threading.Lock()   # a command app's stderr is printed from its own thread

    def redact(self, text: str) -> str:
        """Every secret, and every line of a multi-line secret, replaced with ``***``."""
        return redact(text, self.secrets)

    def _write(self, text: str) -> None:
        with self._lock:     # one block (a stop-commands block too) is one write, never interleaved
            self.out.write(text)
            self.out.flush()

    def _command(self, name: str, message: str) -> None:
        self._write(f"::{name}::{escape_data(self.redact(message))}\n")

    def add_secret(self, value: str) -> None:
        """Redact ``value`` from everything printed and written, and ask the runner to mask it."""
        if value and value not in self.secrets:
            self.secrets.append(value)
        self.mask(value)

    def mask(self, value: str) -> None:
        # The runner swallows this line and masks the value in every later log line. It reads
        # line by line, so each line of a multi-line value is registered on its own.
        for line in secret_lines(value):
            self._write(f"::add-mask::{escape_data(line)}\n")

    def error(self, message: str) -> None:
        self._command("error title=rag-eval-gate", message)

    def warning(self, message: str) -> None:
        self._command("warning title=rag-eval-gate", message)

    def notice(self, message: str) -> None:
        self._command("notice title=rag-eval-gate", message)

    def log(self, message: str) -> None:
        """Plain log text, which may hold anything (answers, errors): never run as a command."""
        text = printable(neutralise(self.redact(message)), newlines=True)   # no escape sequences, no bidi tricks
        if not text.endswith("\n"):
            text += "\n"
        if could_be_command(text):
            token = secrets.token_hex(16)
            text = f"::stop-commands::{token}\n{text}::{token}::\n"
        self._write(text)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self._write(f"::group::{escape_data(neutralise(self.redact(title)))}\n")
        try:
            yield
        finally:
            self._write("::endgroup::\n")


def write_output(path: str | os.PathLike[str], name: str, value: str) -> None:
    """Append ``name`` to a $GITHUB_OUTPUT file, multiline-safe (``name<<DELIM``)."""
    while True:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter not in value and delimiter not in name:
            break
    append_text(path, f"{name}<<{delimiter}\n{value}\n{delimiter}")


class Progress:
    """A log line at every 25% of the cases."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label, self.shown = console, label, -1

    def __call__(self, done: int, total: int) -> None:
        quarter = 4 * done // total if total else 4
        if quarter > self.shown:
            self.shown = quarter
            self.console.log(f"{self.label}: {done}/{total} cases")
