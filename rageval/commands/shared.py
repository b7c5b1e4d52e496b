"""What several commands use: the progress printer and the evaluation the CLI runs."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from rageval.clock import Clock
from rageval.pipeline.runner import Evaluation, prepare
from rageval.results import Shard
from rageval.settings import Config
from rageval.text import redact


class ProgressPrinter:
    """A bar on a TTY; otherwise a line every 10% (or at least every 5 seconds)."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label, self.stream = label, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_pct, self.last_time = -1, time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        pct = int(100 * done / total) if total else 100
        if self.tty:
            width = 30
            fill = int(width * done / total) if total else width
            self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
            if done == total:
                self.stream.write("\n")
            self.stream.flush()
            return
        now = time.monotonic()
        if done == total or pct // 10 > self.last_pct // 10 or now - self.last_time >= 5:
            self.stream.write(f"{self.label}: {done}/{total} cases ({pct}%)\n")
            self.stream.flush()
            self.last_pct, self.last_time = pct, now


def build_evaluation(cfg: Config, subset: str | None, app_spec: str | None, shard: Shard | None = None, *,
                     reproducible: bool = False) -> Evaluation:
    """The evaluation the CLI runs: the user's own environment is what their app sees; its
    SOURCE_DATE_EPOCH, and ``--reproducible``, decide what the clock writes (rageval.clock)."""
    clock = Clock.from_env(os.environ, reproducible=reproducible)
    return prepare(cfg, subset=subset, app_spec=app_spec, env=os.environ, shard=shard, clock=clock)


def split_list(values: Sequence[str] | None) -> list[str]:
    """``--tags pr,holdout`` and ``--tags pr --tags holdout`` alike."""
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def secret_filter(cfg: Config, env: Mapping[str, str] | None = None) -> Callable[[str], str] | None:
    """What the CLI writes passes through this: the model API key's value (``llm.api_key_env``)
    replaced by ``***`` — a model that echoes its key, or an app error quoting it, leaves it in no
    results file, verdict, report or step summary. None when the key is not set."""
    value = (os.environ if env is None else env).get(cfg.llm.api_key_env, "")
    if len(value.strip()) < 8:        # nothing, or too short to be a key (and to replace safely)
        return None
    return lambda text: redact(text, [value], min_piece=8)
