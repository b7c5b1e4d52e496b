"""What a model endpoint answered, read without I/O: chat and embedding bodies, error bodies and
the ``Retry-After`` headers of ``LLMClient`` (``rageval.pipeline.llm``).

A 200 whose body is not a usable response raises :class:`MalformedResponse`; the client retries it once
and counts it as a call all the same (:func:`usage_in` reads its token counts if it has any). A
chat body over :data:`MAX_CHAT_BODY_CHARS` is malformed without being parsed. ``usage`` is None
when the endpoint sent no token counts: the client then estimates them (``rageval.cost``).
"""

from __future__ import annotations

import base64
import json
import math
import struct
import time
from collections.abc import Mapping
from typing import Any

from rageval.errors import MalformedResponse
from rageval.parse import retry_after as parse_retry_after


def is_count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


MAX_CHAT_BODY_CHARS = 4 * 2**20     # a chat completion is a few KB; a judge reply over 64 KiB is not read anyway


def _load(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        snippet = " ".join(body.split())[:60]
        raise MalformedResponse(f"the body is not JSON ({snippet!r})") from None
    if not isinstance(data, dict):
        raise MalformedResponse("the body is not a JSON object")
    return data


def _usage(data: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt, completion) tokens the endpoint reported; None when it sent no ``usage``."""
    usage = data.get("usage")
    if not isinstance(usage, dict) or (usage.get("prompt_tokens") is None and usage.get("completion_tokens") is None):
        return None          # many local servers and gateways omit usage: the client estimates it
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    if not (is_count(prompt) and is_count(completion)):
        raise MalformedResponse("usage token counts are not non-negative integers")
    return prompt, completion


def usage_in(body: str) -> tuple[int, int] | None:
    """The token counts of a body that is not a usable response, if it has readable ones."""
    if len(body) > MAX_CHAT_BODY_CHARS:
        return None
    try:
        return _usage(_load(body))
    except MalformedResponse:
        return None


def parse_chat(body: str, model: str) -> dict[str, Any]:
    """``{text, refusal, usage, model}`` of a chat completion body (``usage``: (prompt, completion)
    tokens, None when the endpoint sent none).

    A refusal (``message.refusal`` a string, as OpenAI sends it with ``content: null``) is kept
    apart from the content — ``text`` is then the content or "" — so a caller can tell a model
    that declined from one that answered. A tool call instead of an answer is malformed."""
    if len(body) > MAX_CHAT_BODY_CHARS:
        raise MalformedResponse(f"the body is {len(body):,} characters, over the {MAX_CHAT_BODY_CHARS:,} read")
    data = _load(body)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("no 'choices' in the chat completion")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0].message is not an object")
    content, refusal = message.get("content"), message.get("refusal")
    if not isinstance(refusal, str):
        refusal = None
    if not isinstance(content, str):
        if refusal is None:
            called = "the model called a tool instead of answering: " if message.get("tool_calls") else ""
            raise MalformedResponse(f"{called}choices[0].message.content is not a string")
        content = ""
    served = data.get("model")
    return {"text": content, "refusal": refusal, "usage": _usage(data),
            "model": served if isinstance(served, str) and served else model}


def parse_embeddings(body: str, n: int) -> dict[str, Any]:
    """``{vectors, usage}`` of an embeddings body for ``n`` inputs (``usage`` as :func:`parse_chat`'s)."""
    data = _load(body)
    items = data.get("data")
    if not isinstance(items, list) or len(items) != n:
        got = len(items) if isinstance(items, list) else "no"
        raise MalformedResponse(f"expected {n} embeddings in 'data', got {got}")
    vectors: list[list[float] | None] = [None] * n
    for pos, item in enumerate(items):
        if not isinstance(item, dict):
            raise MalformedResponse("an item of 'data' is not an object")
        index = item.get("index", pos)
        if not is_count(index) or index >= n or vectors[index] is not None:
            raise MalformedResponse(f"bad embedding index {index!r}")
        emb = item.get("embedding")
        if isinstance(emb, str):     # base64 little-endian float32, as OpenAI sends when asked
            try:
                raw = base64.b64decode(emb, validate=True)
                emb = list(struct.unpack(f"<{len(raw) // 4}f", raw))
            except (ValueError, struct.error):
                raise MalformedResponse("an embedding is neither a list of numbers nor base64 float32") from None
        if not isinstance(emb, list) or not emb or not all(is_number(v) for v in emb):
            raise MalformedResponse("an embedding is not a non-empty list of numbers")
        vectors[index] = [float(v) for v in emb]
    dims = {len(v) for v in vectors if v is not None}
    if len(dims) != 1:
        raise MalformedResponse(f"embeddings have different lengths {sorted(dims)}")
    usage = _usage(data)
    return {"vectors": vectors, "usage": None if usage is None else (usage[0], 0)}


def server_message(body: object) -> str | None:
    """The message of an error body (``{"error": {"message": …}}`` and its variants), if any."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body.strip():
        return body
    return None


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``Retry-After`` as seconds
    or an HTTP date; None when it did not say (or said nonsense)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"), time.time())
