"""How the GitHub runner reads a step's output, reimplemented for the tests (not shared with the
code under test), after actions/runner:

* ``src/Runner.Common/ActionCommand.cs`` (commit 079cdb1d05fe0ec50f8c51de5a4fa51d0eb189b0):
  ``TryParseV2`` — trim leading whitespace; the line must start with ``::``; the command info runs
  to the next ``::``; its name, up to the first space, must be registered; properties are
  ``k=v`` pairs split on ``,``; the data (the rest) is unescaped ``%0D``/``%0A``/``%25``.
  ``TryParse`` — the older form: ``##[`` *anywhere* in the line, the command info up to ``]``,
  properties split on ``;``, data unescaped with ``%3B``/``%0D``/``%0A``/``%5D``/``%25``.
* ``src/Runner.Worker/ActionCommandManager.cs`` (commit 02523b9a60a24fe13364739abefe2255c5a6b758):
  ``TryProcessCommand`` tries V2, then the old form; command names compare ignoring case;
  ``stop-commands`` registers its data as a token and ignores every command until one whose name
  is the token; ``add-mask`` hands its data to the secret masker.
* Lines: the runner reads the process output with .NET ``StreamReader.ReadLine`` (``\\r\\n``,
  ``\\r`` or ``\\n`` end a line).

Differences, each making this stricter than the runner: .NET's ``StartsWith``/``IndexOf`` here
are culture-sensitive, Python's are ordinal; ``str.lstrip`` trims a few more characters than
.NET's ``TrimStart``; the ``notice`` command is processed whether or not the server enabled it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: commands the runner registers (ActionCommandManager.cs: every IActionCommandExtension + stop).
REGISTERED = ("stop-commands", "set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher",
              "remove-matcher", "debug", "warning", "error", "notice", "group", "endgroup", "echo")
_DATA_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
_OLD_ESCAPES = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))
_PROPERTY_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))


def _unescape(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for escaped, plain in table:   # in the runner's order, one mapping after the other
        text = text.replace(escaped, plain)
    return text


@dataclass
class Command:
    name: str
    properties: dict[str, str]
    data: str
    line: str


def split_lines(text: str) -> list[str]:
    """Lines as StreamReader.ReadLine yields them."""
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def try_parse_v2(line: str, registered: set[str]) -> Command | None:
    message = line.lstrip()
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    info = message[2:end]
    name = info.split(" ", 1)[0]
    if name.lower() not in registered:
        return None
    props: dict[str, str] = {}
    if " " in info:
        for pair in (p for p in info.split(" ", 1)[1].strip().split(",") if p):
            key, sep, value = pair.partition("=")
            if sep and key and value:
                props[key] = _unescape(value, _PROPERTY_ESCAPES)
    return Command(name, props, _unescape(message[end + 2:], _DATA_ESCAPES), line)


def try_parse(line: str, registered: set[str]) -> Command | None:
    start = line.find("##[")
    if start < 0:
        return None
    end = line.find("]", start)
    if end < 0:
        return None
    info = line[start + 3:end]
    name = info.split(" ", 1)[0]
    if name.lower() not in registered:
        return None
    props: dict[str, str] = {}
    if " " in info:
        for pair in (p for p in info.split(" ", 1)[1].split(";") if p):
            key, sep, value = pair.partition("=")
            if sep and key and value:
                props[key] = _unescape(value, _OLD_ESCAPES)
    return Command(name, props, _unescape(line[end + 1:], _OLD_ESCAPES), line)


@dataclass
class RunnerLog:
    """Feed it a step's output; it keeps the commands the runner would run, the masked values and
    the lines the log would show (masked, as the runner's secret masker does)."""

    registered: set[str] = field(default_factory=lambda: set(REGISTERED))
    commands: list[Command] = field(default_factory=list)
    masks: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    stop_token: str | None = None

    def feed(self, text: str) -> RunnerLog:
        for line in split_lines(text):
            self._process(line)
        return self

    def _show(self, line: str) -> None:
        for value in sorted(self.masks, key=len, reverse=True):
            line = line.replace(value, "***")
        self.shown.append(line)

    def _process(self, line: str) -> None:
        cmd = try_parse_v2(line, self.registered) or try_parse(line, self.registered)
        if cmd is None:
            self._show(line)
        elif self.stop_token is not None:
            self._show(line)   # printed as is, never run; only the token resumes
            if cmd.name.lower() == self.stop_token.lower():
                self.registered.discard(self.stop_token.lower())
                self.stop_token = None
        elif cmd.name.lower() == "stop-commands":
            self._show(line)
            self.stop_token = cmd.data
            self.registered.add(cmd.data.lower())
        else:
            self.commands.append(cmd)
            if cmd.name == "add-mask" and cmd.data.strip():
                self.masks.append(cmd.data)
            elif cmd.name == "group":
                self._show(f"##[group]{cmd.data}")
            elif cmd.name == "endgroup":
                self._show("##[endgroup]")

    def named(self, name: str) -> list[Command]:
        return [c for c in self.commands if c.name.lower() == name]
