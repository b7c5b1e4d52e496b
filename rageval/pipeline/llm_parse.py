"""What a model endpoint answered, read without I/O: chat and embedding bodies, error bodies and
the ``Retry-After`` headers of ``LLMClient`` (``rageval.pipeline.llm``).

A 200 whose body is not a usable response raises :class:`MalformedResponse`; the client retries it once.
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


def _load(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        snippet = " ".join(body.split())[:60]
        raise MalformedResponse(f"the body is not JSON ({snippet!r})") from None
    if not isinstance(data, dict):
        raise MalformedResponse("the body is not a JSON object")
    return data


def _usage(data: dict[str, Any]) -> tuple[int, int]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return 0, 0          # some servers omit usage; the call still counts, its tokens are unknown
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    if not (is_count(prompt) and is_count(completion)):
        raise MalformedResponse("usage token counts are not non-negative integers")
    return prompt, completion


def parse_chat(body: str, model: str) -> dict[str, Any]:
    """``{text, refusal, prompt_tokens, completion_tokens, model}`` of a chat completion body.

    A refusal (``message.refusal`` a string, as OpenAI sends it with ``content: null``) is kept
    apart from the content — ``text`` is then the content or "" — so a caller can tell a model
    that declined from one that answered."""
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
            raise MalformedResponse("choices[0].message.content is not a string")
        content = ""
    prompt, completion = _usage(data)
    served = data.get("model")
    return {"text": content, "refusal": refusal, "prompt_tokens": prompt, "completion_tokens": completion,
            "model": served if isinstance(served, str) and served else model}


def parse_embeddings(body: str, n: int) -> dict[str, Any]:
    """``{vectors, prompt_tokens, completion_tokens}`` of an embeddings body for ``n`` inputs."""
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
    prompt, _ = _usage(data)
    return {"vectors": vectors, "prompt_tokens": prompt, "completion_tokens": 0}


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
