"""HTTP: POST each case ({"id", "question"}) as JSON to a running service; the response body is
the trace. Header values may name environment variables as ``${NAME}`` (for tokens), resolved at
call time and never stored in results.

Bounds, so that a broken or hostile service costs one case, never the run:

- ``timeout_s`` is a total deadline for one request (connect, headers and body), not a limit per
  read: when it passes, the request's socket is shut down, which ends any read blocked on it (a
  server sending one byte every half second cannot hold a case longer).
- A body over ``max_bytes`` (``MAX_TRACE_BYTES``, 10 MB) is an error for that case; reading stops
  there, so memory stays bounded whatever the service sends. So is a trace of more than
  ``MAX_RETRIEVED`` (10,000) retrieved items, and an answer whose ``id`` is another case's.
- A password in the URL (``http://user:pass@host/``) is sent, but never shown: the app's name
  and every case error carry the URL as ``http://user:***@host/`` (``rageval.text.hide_password``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3 import ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from rageval.errors import DatasetError
from rageval.golden.set import Case
from rageval.pipeline.apps import (
    MAX_TRACE_BYTES,
    MSG_OTHER_CASE,
    Trace,
    load_trace_json,
    request_for,
    trace_from_dict,
)
from rageval.settings import ENV_REF
from rageval.text import hide_password

_CHUNK = 64 * 1024


class HttpApp:
    deterministic = False

    def __init__(self, url: str, timeout_s: float = 60.0, headers: Mapping[str, str] | None = None, *,
                 env: Mapping[str, str], max_bytes: int = MAX_TRACE_BYTES) -> None:
        self.url, self.timeout_s, self.max_bytes = url, timeout_s, max_bytes
        self.shown_url = hide_password(url)
        self.name = f"http:{self.shown_url}"
        self._headers = {k: ENV_REF.sub(lambda m: env.get(m.group(1), ""), v) for k, v in (headers or {}).items()}

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        body = request_for(case)
        if fresh:
            body["fresh"] = True
        started = time.monotonic()
        outcome = self._post(body)
        if isinstance(outcome, str):
            return Trace(case.id, error=f"POST {self.shown_url} {outcome}")
        latency = round((time.monotonic() - started) * 1000, 1)
        where = f"response of {self.shown_url} for case '{case.id}'"
        try:
            data = load_trace_json(outcome, where)
            if isinstance(data, dict) and "id" not in data:
                data = {**data, "id": case.id}
            trace = trace_from_dict(data, where)
        except DatasetError as exc:
            return Trace(case.id, error=str(exc))
        if trace.id != case.id:
            return Trace(case.id, error=MSG_OTHER_CASE.format(app=f"POST {self.shown_url}", got=trace.id, want=case.id))
        return trace if trace.latency_ms is not None else Trace(**{**trace.__dict__, "latency_ms": latency})

    def _post(self, body: dict[str, Any]) -> bytes | str:
        """The response body, or what went wrong (completing "POST <url> …"). One session per
        request: a connection whose socket the deadline may shut down is never handed to another."""
        deadline = _Deadline(self.timeout_s)
        session = requests.Session()
        session.mount("http://", _DeadlineAdapter())
        session.mount("https://", _DeadlineAdapter())
        try:
            with deadline:
                resp = session.post(self.url, json=body, headers=self._headers, stream=True,
                                    timeout=(self.timeout_s, self.timeout_s))
                with resp:
                    outcome = (f"answered HTTP {resp.status_code}" if resp.status_code != 200
                               else _read_body(resp, self.max_bytes, deadline))
        except (requests.RequestException, OSError) as exc:
            outcome = f"failed: {type(exc).__name__}"
        finally:
            session.close()
        if deadline.expired:
            return f"gave no complete answer within {self.timeout_s:g} s (app.timeout_s)"
        return outcome


def _read_body(resp: requests.Response, limit: int, deadline: _Deadline) -> bytes | str:
    too_big = f"answered more than {limit:,} bytes, the most one trace may take; send a smaller trace"
    length = resp.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        return too_big
    chunks, size = [], 0
    for chunk in resp.iter_content(_CHUNK):
        size += len(chunk)
        if size > limit:
            return too_big
        if deadline.expired:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# --- the total deadline ------------------------------------------------------------------------

_local = threading.local()


class _Deadline:
    """A total deadline for one request. When it passes, the sockets the request opened are shut
    down, which ends a read blocked on any of them; ``expired`` says it happened."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        _local.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _local.deadline = None

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


class _Watched:
    """A urllib3 connection that hands its socket to the current thread's deadline on connect."""

    sock: socket.socket | None

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        deadline = getattr(_local, "deadline", None)
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)


class _HTTPConnection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter, with connections that the deadline can shut down (also through an
    http(s) proxy; a SOCKS proxy keeps the per-read timeout only)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if isinstance(manager, ProxyManager):
            manager.pool_classes_by_scheme = _POOLS
        return manager
