"""HTTP: POST each case ({"id", "question"}) as JSON to a running service; the response body is
the trace. Header values may name environment variables as ``${NAME}`` (for tokens), resolved at
call time and never stored in results."""

from __future__ import annotations

import time
from collections.abc import Mapping

import requests

from rageval.config import ENV_REF
from rageval.errors import DatasetError
from rageval.golden.set import Case
from rageval.pipeline.apps import Trace, request_for, trace_from_dict


class HttpApp:
    deterministic = False

    def __init__(self, url: str, timeout_s: float = 60.0, headers: Mapping[str, str] | None = None, *,
                 env: Mapping[str, str]) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.name = f"http:{url}"
        self._headers = {k: ENV_REF.sub(lambda m: env.get(m.group(1), ""), v) for k, v in (headers or {}).items()}
        self._session = requests.Session()

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        body = request_for(case)
        if fresh:
            body["fresh"] = True
        started = time.monotonic()
        try:
            resp = self._session.post(self.url, json=body, headers=self._headers, timeout=self.timeout_s)
        except requests.RequestException as exc:
            return Trace(case.id, error=f"POST {self.url} failed: {type(exc).__name__}")
        latency = round((time.monotonic() - started) * 1000, 1)
        if resp.status_code != 200:
            return Trace(case.id, error=f"POST {self.url} answered HTTP {resp.status_code}")
        try:
            data = resp.json()
        except ValueError:
            return Trace(case.id, error=f"POST {self.url} answered a body that is not JSON")
        if isinstance(data, dict) and "id" not in data:
            data = {**data, "id": case.id}
        try:
            trace = trace_from_dict(data, f"response of {self.url} for case '{case.id}'")
        except DatasetError as exc:
            return Trace(case.id, error=str(exc))
        return trace if trace.latency_ms is not None else Trace(**{**trace.__dict__, "latency_ms": latency})
