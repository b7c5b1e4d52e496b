"""What the clock writes into a RunResult, and how to leave it out.

A run's results depend on its inputs; three fields depend on when and how fast it ran:
``created_at`` (the run's date), ``timings`` (seconds of index build and evaluation) and each case's
``latency_ms``. :class:`Clock` decides them:

- ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention, https://reproducible-builds.org/specs/source-date-epoch/):
  an integer of seconds since 1970-01-01 UTC; when set, ``created_at`` is that instant instead of now.
  A value that is not such an integer is refused (the convention says so), never ignored.
- ``reproducible`` (``rageval run --reproducible``): no measured durations — ``timings`` is written
  empty and every case's ``latency_ms`` null — and ``created_at`` is ``SOURCE_DATE_EPOCH``'s instant,
  or null without it. Two such runs of the same inputs write the same bytes.

Both leave the RunResult's keys as they were; null and ``{}`` are values those keys always allowed,
so any reader of schema 2 loads the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from rageval.errors import RagevalError

#: the latest instant SOURCE_DATE_EPOCH may name (9999-12-31T23:59:59Z): created_at keeps four year digits
MAX_EPOCH = 253_402_300_799

MSG_EPOCH = ("SOURCE_DATE_EPOCH is {got!r}: set it to a whole number of seconds since 1970-01-01 UTC "
             "(e.g. `git log -1 --format=%ct`), or unset it to stamp the run with the current time.")


@dataclass(frozen=True)
class Clock:
    """``epoch``: SOURCE_DATE_EPOCH's seconds (None: now); ``reproducible``: leave durations out."""

    epoch: int | None = None
    reproducible: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, reproducible: bool = False) -> Clock:
        """The clock ``env``'s SOURCE_DATE_EPOCH asks for (an empty value counts as unset, as in the
        convention's reference tools); RagevalError (exit 2) on a malformed one."""
        raw = env.get("SOURCE_DATE_EPOCH", "")
        if raw == "":
            return cls(None, reproducible)
        if not re.fullmatch(r"[0-9]{1,12}", raw) or int(raw) > MAX_EPOCH:
            raise RagevalError(MSG_EPOCH.format(got=raw))
        return cls(int(raw), reproducible)

    def created_at(self) -> str | None:
        """The RunResult's ``created_at``: SOURCE_DATE_EPOCH's instant, else null when reproducible, else now."""
        if self.epoch is not None:
            when = datetime.fromtimestamp(self.epoch, timezone.utc)
        elif self.reproducible:
            return None
        else:
            when = datetime.now(timezone.utc)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    def timings(self, measured: Mapping[str, float]) -> dict[str, float]:
        return {} if self.reproducible else dict(measured)

    def latency(self, measured: float | None) -> float | None:
        return None if self.reproducible else measured
