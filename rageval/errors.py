"""Every exception rageval raises and every exit code. The library raises; only the CLI and the
action's entry print.

Exit codes: 0 ok / the gate passed, 1 the gate blocked, 2 bad input or configuration
(``RagevalError``), 3 internal error (a bug). Every message names the file (and key, line or case
id where there is one), says what was wrong and how to fix it. ``RagevalError.exit_code`` is what
the CLI exits with.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from datetime import datetime

EXIT_OK, EXIT_BLOCKED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class RagevalError(Exception):
    """Base class: bad input or an environment problem the user can fix. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tip = tip

    def __str__(self) -> str:
        return self.message


class ConfigError(RagevalError):
    """rageval.yml is missing, malformed, or names something that does not exist."""


class DatasetError(RagevalError):
    """The golden set, corpus or a trace file is malformed."""


class ResultError(RagevalError):
    """A RunResult or verdict file is not one rageval can read (shape, types, non-finite numbers)."""


class BaselineError(ResultError):
    """A baseline RunResult could not be found, read or trusted."""


class ModelError(RagevalError):
    """A model endpoint failed in a way that stops the run (not a per-case error)."""


class BudgetExceeded(ModelError):
    """Spending reached ``llm.max_cost_usd``; no further network calls are made."""


class ModelCallError(ModelError):
    """One model call failed after its retries (or could not be retried): a per-case error."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1, tip: str | None = None) -> None:
        super().__init__(message, tip=tip)
        self.status_code = status_code
        self.attempts = attempts


class MalformedResponse(Exception):
    """A model endpoint answered 200 but the body is not a usable response (retried once)."""


class MalformedOutput(ValueError):
    """A model answered, but twice not in the shape asked for (the check becomes an error)."""


class GithubError(RagevalError):
    """The GitHub API refused or failed a request: ``method`` and ``path`` of the request,
    ``status`` (None: no HTTP answer, or no request), ``retry_at`` (when a rate limit resets, if
    known)."""

    def __init__(self, message: str, *, tip: str | None = None, method: str | None = None,
                 path: str | None = None, status: int | None = None, retry_at: datetime | None = None) -> None:
        super().__init__(message, tip=tip)
        self.method = method
        self.path = path
        self.status = status
        self.retry_at = retry_at


class ActionInputError(RagevalError):
    """An action input or the runner environment is invalid."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'gate'?)`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
