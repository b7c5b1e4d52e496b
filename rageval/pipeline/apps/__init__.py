"""How answers are obtained. Every App turns a golden Case into a Trace.

- ``builtin``: chunk → embed → retrieve → generate, all from the config;
- ``replay``: a JSONL file of precomputed traces, one per case id;
- ``command``: the user's own program, one JSON request per line on stdin → one trace per line on stdout;
- ``http``: POST each case as JSON to a running service, the response body is the trace.

A Trace whose ``answer`` is null is a retrieval-only case (generation checks are skipped); one
whose ``retrieved`` is null has no retrieval metrics; one with ``error`` set is an error, not a fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rageval.errors import DatasetError
from rageval.golden.set import Case
from rageval.results import Retrieved

__all__ = ["RETRIEVED_KEYS", "TRACE_KEYS", "App", "Retrieved", "Trace", "request_for", "trace_from_dict"]

TRACE_KEYS = ("id", "answer", "retrieved", "usage", "latency_ms", "error")
RETRIEVED_KEYS = ("chunk_id", "sections", "text", "score", "tokens")


@dataclass(frozen=True)
class Trace:
    id: str
    answer: str | None = None
    retrieved: tuple[Retrieved, ...] | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_ms: float | None = None
    error: str | None = None
    context_k: int | None = None     # how many of `retrieved` went to the generator (None: all)

    @property
    def context(self) -> tuple[Retrieved, ...]:
        if self.retrieved is None:
            return ()
        return self.retrieved if self.context_k is None else self.retrieved[: self.context_k]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "answer": self.answer,
                "retrieved": None if self.retrieved is None else [r.to_dict() for r in self.retrieved],
                "usage": dict(self.usage), "latency_ms": self.latency_ms, "error": self.error}


class App(Protocol):
    name: str
    deterministic: bool     # True: a re-run cannot change the answer (no model call)

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        """Answer one case. ``fresh``: bypass response caches (the gate's re-run); ``previous``: the
        first run's trace, whose deterministic stages (retrieval) the App may reuse."""
        ...


def trace_from_dict(data: Any, where: str) -> Trace:
    """Validate one trace object (a replay/command line or an http response). ``where`` names it."""
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: a trace must be a JSON object, got {type(data).__name__}.")
    unknown = [k for k in data if k not in TRACE_KEYS]
    if unknown:
        raise DatasetError(f"{where}: unknown trace key '{unknown[0]}'. Valid keys: {', '.join(TRACE_KEYS)}.")
    if not isinstance(data.get("id"), (str, int)) or isinstance(data.get("id"), bool):
        raise DatasetError(f"{where}: trace needs an 'id' matching a golden case id.")
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise DatasetError(f"{where}: 'answer' must be a string or null, got {answer!r}.")
    retrieved = data.get("retrieved")
    items: tuple[Retrieved, ...] | None = None
    if retrieved is not None:
        if not isinstance(retrieved, list):
            raise DatasetError(f"{where}: 'retrieved' must be a list of {{chunk_id, sections, text, score}}.")
        parsed = []
        for i, r in enumerate(retrieved, 1):
            if not isinstance(r, dict) or not isinstance(r.get("chunk_id"), (str, int)):
                raise DatasetError(f"{where}: retrieved item {i} needs a 'chunk_id'.")
            sections = r.get("sections", [])
            if not isinstance(sections, list) or not all(isinstance(s, str) for s in sections):
                raise DatasetError(f"{where}: retrieved item {i}: 'sections' must be a list of section ids.")
            score, tokens = r.get("score"), r.get("tokens")
            if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
                raise DatasetError(f"{where}: retrieved item {i}: 'score' must be a number.")
            if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
                raise DatasetError(f"{where}: retrieved item {i}: 'tokens' must be a non-negative integer.")
            text = r.get("text") or ""
            if not isinstance(text, str):
                raise DatasetError(f"{where}: retrieved item {i}: 'text' must be a string.")
            parsed.append(Retrieved(str(r["chunk_id"]), tuple(sections), text,
                                    None if score is None else float(score), tokens))
        items = tuple(parsed)
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise DatasetError(f"{where}: 'usage' must be an object like {{\"prompt_tokens\": 512}}.")
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        error = str(error)
    latency = data.get("latency_ms")
    if latency is not None and (not isinstance(latency, (int, float)) or isinstance(latency, bool)):
        raise DatasetError(f"{where}: 'latency_ms' must be a number.")
    return Trace(str(data["id"]), answer, items,
                 {str(k): int(v) for k, v in usage.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                 latency, error)


def request_for(case: Case) -> dict[str, Any]:
    """What command and http apps receive for one case."""
    return {"id": case.id, "question": case.question}
