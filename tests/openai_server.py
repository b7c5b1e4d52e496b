"""A small OpenAI-compatible HTTP server for tests: real sockets on 127.0.0.1, an ephemeral port,
one background thread.

It answers ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` with correctly shaped JSON,
records every request (path, headers, body), counts calls per endpoint and per model, tracks how
many requests are in flight at once, and injects faults from a queue consumed in order.

    with OpenAIServer(rules=[("trả hàng", "Trong 7 ngày.")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        ...
        server.faults.append(Fault.rate_limit(retry_after=1))
        assert server.calls["chat"] == 1

Answers: ``responder(request_json) -> str`` if given, else the first rule whose substring occurs
in the last user message, else ``"echo: <last user message>"``. A responder (or rule) may answer
``Refusal("…")`` instead of a string: the message then has ``content: null`` and that
``refusal`` text, as OpenAI sends a model's refusal; or ``ToolCall(name, arguments)``: ``content:
null`` and one ``tool_calls`` entry, as a model that called a tool answers; or ``Raw(body)``: that
body sent as is with status 200 (bytes, or JSON). ``usage=False`` leaves ``usage`` out of every
chat and embedding body (as many local servers and gateways do); ``served`` maps a requested model
to the name the response's ``model`` field says served it (as an alias resolves to a dated
snapshot). Embeddings are deterministic unit
vectors derived from sha256(model, text), ``dim`` long; ``encoding_format: base64`` is honoured
the way OpenAI does it (little-endian float32).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_FAULT_DELAY_S = 5.0


@dataclass
class Fault:
    """One injected failure. ``times`` is how many matching requests it affects before it is used
    up; ``endpoint`` ("chat" | "embeddings") and ``model`` restrict which requests match."""

    kind: str                      # status | slow | malformed_json | malformed_content
    status: int = 500
    message: str = "injected failure"
    retry_after: str | None = None     # Retry-After header value (seconds)
    retry_after_ms: str | None = None  # retry-after-ms header value
    delay_s: float = 0.0               # slow: sleep before answering normally
    endpoint: str | None = None
    model: str | None = None
    times: int = 1

    @classmethod
    def rate_limit(cls, retry_after: float | None = None, *, retry_after_ms: float | None = None, **kw: Any) -> Fault:
        return cls("status", status=429, message="Rate limit reached for requests",
                   retry_after=None if retry_after is None else _num(retry_after),
                   retry_after_ms=None if retry_after_ms is None else _num(retry_after_ms), **kw)

    @classmethod
    def server_error(cls, status: int = 500, message: str = "The server had an error processing your request", **kw: Any) -> Fault:
        return cls("status", status=status, message=message, **kw)

    @classmethod
    def slow(cls, delay_s: float, **kw: Any) -> Fault:
        return cls("slow", delay_s=min(delay_s, MAX_FAULT_DELAY_S), **kw)

    @classmethod
    def malformed_json(cls, **kw: Any) -> Fault:
        """A 200 whose body claims to be JSON but is not."""
        return cls("malformed_json", status=200, **kw)

    @classmethod
    def malformed_content(cls, **kw: Any) -> Fault:
        """A 200 with valid JSON of the wrong shape (no ``choices`` / no ``data``)."""
        return cls("malformed_content", status=200, **kw)

    def matches(self, endpoint: str, model: str | None) -> bool:
        return (self.endpoint is None or self.endpoint == endpoint) and (self.model is None or self.model == model)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Refusal:
    """A chat answer that declines: ``content: null`` and ``refusal: text`` in the message."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A chat answer that calls a tool: ``content: null`` and one ``tool_calls`` entry."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Raw:
    """A chat answer sent exactly as given, status 200: bytes as they are, anything else as JSON."""

    body: Any


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    endpoint: str | None
    headers: dict[str, str]      # lower-cased names
    body: Any                    # parsed JSON, or None when the body was not JSON


def deterministic_embedding(model: str, text: str, dim: int) -> list[float]:
    """A unit vector from sha256(model, text): same input, same vector, on any machine."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{model}\x00{text}\x00{counter}".encode()).digest()
        for i in range(0, len(digest), 4):
            (n,) = struct.unpack("<I", digest[i:i + 4])
            values.append(n / 2**31 - 1.0)
        counter += 1
    values = values[:dim]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    # round-trip through float32 so float and base64 encodings agree exactly
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in values]


def _count_tokens(text: str) -> int:
    return len(text.split())


def _last_user_message(messages: Any) -> str:
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):  # content parts
                    return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class OpenAIServer:
    """Start with ``start()`` (or ``with``), stop with ``stop()``. ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        *,
        responder: Callable[[dict[str, Any]], str] | None = None,
        rules: Iterable[tuple[str, str]] = (),
        dim: int = 8,
        latency_s: float = 0.0,
        usage: tuple[int, int] | None | bool = None,
        require_api_key: str | None = None,
        served: dict[str, str] | None = None,
    ) -> None:
        self.responder = responder
        self.rules = list(rules)
        self.dim = dim
        self.latency_s = min(latency_s, MAX_FAULT_DELAY_S)   # every request sleeps this long
        self.usage = usage                                    # fixed (prompt, completion) tokens for chat; False: none
        self.served = dict(served or {})                      # requested model -> the model the response names
        self.require_api_key = require_api_key                # 401 unless "Bearer <key>" is sent
        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.calls: Counter[str] = Counter()                  # endpoint -> answered requests (incl. faults)
        self.calls_by_model: Counter[tuple[str, str]] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"server_state": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- inspection ------------------------------------------------------------------------
    def bodies(self, endpoint: str) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests if r.endpoint == endpoint]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.calls.clear()
            self.calls_by_model.clear()
            self.faults.clear()
            self.max_in_flight = 0

    # --- behaviour -------------------------------------------------------------------------
    def _take_fault(self, endpoint: str, model: str | None) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self.faults):
                if fault.matches(endpoint, model):
                    fault.times -= 1
                    if fault.times <= 0:
                        del self.faults[i]
                    return fault
        return None

    def answer_for(self, body: dict[str, Any]) -> str | Refusal | ToolCall | Raw:
        if self.responder is not None:
            return self.responder(body)
        last = _last_user_message(body.get("messages"))
        for needle, answer in self.rules:
            if needle in last:
                return answer
        return f"echo: {last}"


class _Handler(BaseHTTPRequestHandler):
    server_state: OpenAIServer
    # HTTP/1.0: one request per connection, so every handler thread ends with its answer and
    # stop() never waits on an idle keep-alive socket.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._error(404, f"Unknown path {self.path}", "invalid_request_error")

    def do_POST(self) -> None:
        state = self.server_state
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._error(413, "request body too large", "invalid_request_error")
            return
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        endpoint = ENDPOINTS.get(self.path.split("?", 1)[0])
        headers = {k.lower(): v for k, v in self.headers.items()}
        model = body.get("model") if isinstance(body, dict) else None
        with state._lock:
            state.requests.append(RecordedRequest(self.path, endpoint, headers, body))
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
            if endpoint is not None:
                state.calls[endpoint] += 1
                state.calls_by_model[(endpoint, str(model))] += 1
        try:
            self._dispatch(endpoint, body, headers, model)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
        finally:
            with state._lock:
                state.in_flight -= 1

    def _dispatch(self, endpoint: str | None, body: Any, headers: dict[str, str], model: str | None) -> None:
        state = self.server_state
        if state.latency_s:
            time.sleep(state.latency_s)
        if endpoint is None:
            self._error(404, f"Unknown path {self.path}", "invalid_request_error")
            return
        if state.require_api_key is not None and headers.get("authorization") != f"Bearer {state.require_api_key}":
            self._error(401, "Incorrect API key provided", "invalid_request_error", code="invalid_api_key")
            return
        if not isinstance(body, dict) or not isinstance(model, str):
            self._error(400, "request body must be a JSON object with a 'model'", "invalid_request_error")
            return
        fault = state._take_fault(endpoint, model)
        if fault is not None:
            if fault.kind == "status":
                extra = {}
                if fault.retry_after is not None:
                    extra["Retry-After"] = fault.retry_after
                if fault.retry_after_ms is not None:
                    extra["retry-after-ms"] = fault.retry_after_ms
                kind = "rate_limit_error" if fault.status == 429 else "server_error"
                self._error(fault.status, fault.message, kind, headers=extra)
                return
            if fault.kind == "slow":
                time.sleep(fault.delay_s)
            elif fault.kind == "malformed_json":
                self._send(200, b'{"id": "chatcmpl-broken", "choices": [', "application/json")
                return
            elif fault.kind == "malformed_content":
                self._json(200, {"id": "x", "object": "chat.completion" if endpoint == "chat" else "list",
                                 "model": model, "unexpected": True})
                return
        if endpoint == "chat":
            self._chat(body, model)
        else:
            self._embeddings(body, model)

    def _chat(self, body: dict[str, Any], model: str) -> None:
        state = self.server_state
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self._error(400, "'messages' must be a non-empty array", "invalid_request_error", param="messages")
            return
        answer = state.answer_for(body)
        if isinstance(answer, Raw):
            data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
            self._send(200, data, "application/json")
            return
        refusal = answer.text if isinstance(answer, Refusal) else None
        content = None if refusal is not None or isinstance(answer, ToolCall) else answer
        if isinstance(state.usage, tuple):
            prompt_tokens, completion_tokens = state.usage
        else:
            prompt_tokens = sum(_count_tokens(m.get("content") or "") for m in messages
                                if isinstance(m, dict) and isinstance(m.get("content"), str))
            completion_tokens = _count_tokens(content or refusal or "")
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
        if isinstance(answer, ToolCall):
            message["tool_calls"] = [{"id": f"call_{digest[:8]}", "type": "function",
                                      "function": {"name": answer.name, "arguments": answer.arguments}}]
        payload = {
            "id": f"chatcmpl-{digest}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": state.served.get(model, model),
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if isinstance(answer, ToolCall) else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if state.usage is False:
            del payload["usage"]
        self._json(200, payload)

    def _embeddings(self, body: dict[str, Any], model: str) -> None:
        state = self.server_state
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error(400, "'input' must be a string or a non-empty array of strings", "invalid_request_error",
                        param="input")
            return
        dim = body.get("dimensions") if isinstance(body.get("dimensions"), int) else state.dim
        base64_out = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = deterministic_embedding(model, text, dim)
            emb: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() if base64_out else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(_count_tokens(t) for t in texts)
        payload = {"object": "list", "data": data, "model": model,
                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        if state.usage is False:
            del payload["usage"]
        self._json(200, payload)

    # --- wire ------------------------------------------------------------------------------
    def _error(self, status: int, message: str, kind: str, *, param: str | None = None, code: str | None = None,
               headers: dict[str, str] | None = None) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": param, "code": code}}, headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
