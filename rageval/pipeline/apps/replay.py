"""Replay: answers come from a JSONL file of precomputed traces (one JSON object per line)."""

from __future__ import annotations

from pathlib import Path

from rageval.errors import DatasetError
from rageval.golden.set import Case
from rageval.parse import load_json, read_text
from rageval.pipeline.apps import Trace, trace_from_dict


class ReplayApp:
    deterministic = True

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = f"replay:{self.path.name}"
        self.traces = load_traces(self.path)

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        trace = self.traces.get(case.id)
        if trace is None:
            return Trace(case.id, error=f"no trace for case '{case.id}' in {self.path.name}")
        return trace


def load_traces(path: Path) -> dict[str, Trace]:
    if not path.is_file():
        raise DatasetError(f"{path}: trace file not found. Check `app.path` in the config or --app replay:FILE.")
    traces: dict[str, Trace] = {}
    for lineno, line in enumerate(read_text(path, error=DatasetError).split("\n"), 1):
        if not line.strip():
            continue
        trace = trace_from_dict(load_json(line, str(path), error=DatasetError, line=lineno), f"{path}: line {lineno}")
        if trace.id in traces:
            raise DatasetError(f"{path}: line {lineno}: a second trace for case '{trace.id}'. Keep one per case.")
        traces[trace.id] = trace
    return traces
