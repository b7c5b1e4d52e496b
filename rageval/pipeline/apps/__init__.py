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
from rageval.parse import finite, load_json, shown
from rageval.records import Retrieved

__all__ = ["MAX_RETRIEVED", "MAX_TRACE_BYTES", "MSG_OTHER_CASE", "RETRIEVED_KEYS", "TRACE_KEYS", "App", "Retrieved", "Trace", "load_trace_json",
           "request_for", "trace_from_dict"]

TRACE_KEYS = ("id", "answer", "retrieved", "usage", "latency_ms", "error")
RETRIEVED_KEYS = ("chunk_id", "sections", "text", "score", "tokens")

#: The most bytes one trace may take: a command app's line or an http app's response body. Over it,
#: the case is an error and reading stops (a 1.5 GB response must not take 18.5 GB of memory).
MAX_TRACE_BYTES = 10 * 1024 * 1024

#: The most retrieved items one trace may carry. A release run may use top_k 1000; 400,000 short items
#: fit in a 10 MB body and, kept, cost hundreds of MB per case (issue 18), so past this the case is an
#: error, found before any item is built.
MAX_RETRIEVED = 10_000

MSG_TOO_MANY_RETRIEVED = ("{where}: {n:,} retrieved items; at most {limit:,} per case are read "
                          "(MAX_RETRIEVED). Send the top_k the run measures, not the whole ranking.")
MSG_OTHER_CASE = "{app} answered case '{got}' when asked for '{want}'"
MSG_NO_ID = "{where}: trace needs an 'id' matching a golden case id."
MSG_ID_TYPE = "{where}: '{key}' must be a string (or an integer), got {got}."


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
    """Validate one trace object (a replay/command line or an http response). ``where`` names it.
    Every number must be finite: a NaN score would make the results file invalid JSON."""
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: a trace must be a JSON object, got {type(data).__name__}.")
    unknown = [k for k in data if k not in TRACE_KEYS]
    if unknown:
        raise DatasetError(f"{where}: unknown trace key {shown(unknown[0])}. Valid keys: {', '.join(TRACE_KEYS)}.")
    if "id" not in data:
        raise DatasetError(MSG_NO_ID.format(where=where))
    if not isinstance(data["id"], (str, int)) or isinstance(data["id"], bool):
        raise DatasetError(MSG_ID_TYPE.format(where=where, key="id", got=_kind(data["id"])))
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise DatasetError(f"{where}: 'answer' must be a string or null, got {shown(answer)}.")
    retrieved = data.get("retrieved")
    if retrieved is not None and not isinstance(retrieved, list):
        raise DatasetError(f"{where}: 'retrieved' must be a list of {{chunk_id, sections, text, score}}.")
    if retrieved is not None and len(retrieved) > MAX_RETRIEVED:
        raise DatasetError(MSG_TOO_MANY_RETRIEVED.format(where=where, n=len(retrieved), limit=MAX_RETRIEVED))
    items = None if retrieved is None else tuple(_retrieved(r, f"{where}: retrieved item {i}")
                                                 for i, r in enumerate(retrieved, 1))
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise DatasetError(f"{where}: 'usage' must be an object like {{\"prompt_tokens\": 512}}.")
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        error = str(error)
    latency = _number(data.get("latency_ms"), f"{where}: 'latency_ms'")
    # usage may hold nested details (OpenAI's completion_tokens_details): only its counts are kept
    counts = {str(k): int(_number(v, f"{where}: usage.{k}", minimum=0))  # type: ignore[arg-type]
              for k, v in usage.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Trace(str(data["id"]), answer, items, counts, latency, error)


def _retrieved(r: Any, where: str) -> Retrieved:
    if not isinstance(r, dict) or "chunk_id" not in r:
        raise DatasetError(f"{where} needs a 'chunk_id'.")
    if not isinstance(r["chunk_id"], (str, int)) or isinstance(r["chunk_id"], bool):
        raise DatasetError(MSG_ID_TYPE.format(where=where, key="chunk_id", got=_kind(r["chunk_id"])))
    sections = r.get("sections", [])
    if not isinstance(sections, list) or not all(isinstance(s, str) for s in sections):
        raise DatasetError(f"{where}: 'sections' must be a list of section ids.")
    tokens = r.get("tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
        raise DatasetError(f"{where}: 'tokens' must be a non-negative integer.")
    text = r.get("text") or ""
    if not isinstance(text, str):
        raise DatasetError(f"{where}: 'text' must be a string.")
    score = _number(r.get("score"), f"{where}: 'score'")
    return Retrieved(str(r["chunk_id"]), tuple(sections), text, None if score is None else float(score), tokens)


def _kind(value: Any) -> str:
    """A value as an id message names it: a list or an object by its kind, else its repr, cut short."""
    return {dict: "an object", list: "a list"}.get(type(value)) or shown(value)


def _number(value: Any, where: str, minimum: float | None = None) -> int | float | None:
    """A finite number (or None); NaN, ±Infinity, an int too large for a float, or a number below
    ``minimum`` is a DatasetError naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DatasetError(f"{where} must be a number, got {shown(value)}.")
    if not finite(value):
        raise DatasetError(f"{where} must be a finite number, got {shown(value)}.")
    if minimum is not None and value < minimum:
        raise DatasetError(f"{where} must be ≥ {minimum:g}, got {shown(value)}.")
    return value


def load_trace_json(data: bytes, where: str) -> Any:
    """One trace's JSON from an app's output (a command's line, an http body), read as strictly
    as a file (rageval.parse: UTF-8, no NaN/Infinity, no duplicate key, bounded nesting);
    DatasetError naming ``where`` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 4]!r}). "
                           "Write the trace as UTF-8 JSON.") from None
    return load_json(text, where, error=DatasetError)


def request_for(case: Case) -> dict[str, Any]:
    """What command and http apps receive for one case."""
    return {"id": case.id, "question": case.question}
