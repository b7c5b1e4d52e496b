"""A small GitHub REST client: auth, pagination, retries, rate limits, error mapping.

What the action needs from GitHub is built on it: the baseline artifact (``rageval.github.baseline``)
and the sticky PR comment (``rageval.github.comment``).

Only the ten operations in GitHub's REST description subset are used (see
``../shared/github-rest-subset/``). The caller passes the API URL (``GITHUB_API_URL`` on GitHub
Enterprise) and the token; this module reads no environment variables and never prints. Every
failure raises `rageval.errors.GithubError` (with ``.status``, ``.method`` and ``.path``) or
`rageval.errors.BaselineError`; the token never appears in a message, a repr or a log line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from rageval.errors import BaselineError, GithubError
from rageval.parse import retry_after as parse_retry_after

__all__ = [
    "API_VERSION",
    "MAX_PAGES",
    "MAX_STATUS_DESCRIPTION",
    "GitHubClient",
    "PageLimitReached",
    "github_error",
    "parse_time",
]

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
USER_AGENT = "rag-eval-gate"
MAX_STATUS_DESCRIPTION = 140  # commit status descriptions are cut by GitHub at 140 characters
COMMIT_STATES = ("error", "failure", "pending", "success")

MAX_PAGES = 50
DEFAULT_PER_PAGE = 100
DEFAULT_MAX_WAIT = 60.0  # seconds; a rate limit that resets later than this is an error
DEFAULT_MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024
_CHUNK = 64 * 1024

_TIPS = {
    401: "The token was rejected: check that the workflow passes a valid `github-token`.",
    403: (
        "The token lacks a permission. Give the job `permissions:` `pull-requests: write` (comments),"
        " `statuses: write` (commit status) and `actions: read` (artifacts); pull requests from forks"
        " only get a read-only token."
    ),
    404: "Check the owner, repository and number, and that the token can see the repository.",
    410: "The resource is gone (an expired artifact or a deleted issue).",
    422: "GitHub rejected the request body; the message above says which field.",
}


def github_error(
    message: str,
    *,
    method: str,
    path: str,
    status: int | None,
    tip: str | None = None,
    retry_at: datetime | None = None,
) -> GithubError:
    """A GithubError carrying ``.method``, ``.path``, ``.status`` (None: no HTTP answer) and
    ``.retry_at`` (when a rate limit resets, if known)."""
    return GithubError(message, tip=tip, method=method, path=path, status=status, retry_at=retry_at)


class PageLimitReached(GithubError):
    """A list had more than MAX_PAGES pages; ``.pages`` were read. A caller that can do with the
    newest entries (the baseline search) turns it into a notice."""

    pages: int = MAX_PAGES


class _NoAuth(requests.auth.AuthBase):
    """Strip any Authorization header (and stop requests from filling one in from ~/.netrc)."""

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        return r


class GitHubClient:
    """GitHub REST over `requests`: auth header, pagination, retries, rate limits, error mapping.

    Retries (at most ``max_retries`` after the first attempt) happen on connection errors, 5xx,
    and rate limits (429, or 403 with ``x-ratelimit-remaining: 0`` / ``retry-after`` / a
    "secondary rate limit" message). The wait is ``Retry-After`` seconds, else the time until
    ``x-ratelimit-reset`` plus one second of slack, else exponential backoff (1, 2, 4 … s; for a
    rate limit with no header, GitHub asks for at least a minute). A wait longer than ``max_wait``
    is not slept: the request fails with a GithubError saying when the limit resets.

    Mutating requests (POST/PATCH) are retried too: a rare duplicate comment after a lost 5xx
    answer is better than a missing gate report, and the next run updates the newest one.
    """

    def __init__(
        self,
        token: str | None,
        api_url: str = "https://api.github.com",
        timeout: float = 30,
        max_retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        *,
        per_page: int = DEFAULT_PER_PAGE,
        max_wait: float = DEFAULT_MAX_WAIT,
        max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not api_url.startswith(("https://", "http://")):
            raise ValueError(f"api_url must be an http(s) URL, got {api_url!r}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if not 1 <= per_page <= 100:
            raise ValueError("per_page must be between 1 and 100 (GitHub's maximum)")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.per_page = per_page
        self.max_wait = max_wait
        self.max_download_bytes = max_download_bytes
        self._sleep = sleep
        self._clock = clock
        self._token = token or None
        self._api_origin = _origin(self.api_url)
        self._session = requests.Session()
        self._session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            }
        )
        if self._token:
            self._session.headers["Authorization"] = f"Bearer {self._token}"
        # The signed storage URL must never see our token: a separate session with no auth.
        self._storage = requests.Session()
        self._storage.headers.clear()
        self._storage.headers.update({"User-Agent": USER_AGENT, "Accept": "*/*"})

    def __repr__(self) -> str:
        auth = "token=<redacted>" if self._token else "token=None"
        return f"GitHubClient(api_url={self.api_url!r}, {auth})"

    def close(self) -> None:
        self._session.close()
        self._storage.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ operations

    def artifact_pages(self, owner: str, repo: str, name: str) -> Iterator[list[dict]]:
        """GET /repos/{owner}/{repo}/actions/artifacts?name=… — one page's ``artifacts`` at a time,
        read only when asked for (GitHub lists them newest first). More than MAX_PAGES pages raise
        `PageLimitReached`."""
        path = f"/repos/{owner}/{repo}/actions/artifacts"
        for page in self._paginate(path, {"name": name}):
            if not isinstance(page, dict) or not isinstance(page.get("artifacts"), list):
                raise github_error(
                    f"GitHub API GET {path} returned an unexpected body (no 'artifacts' list).",
                    method="GET", path=path, status=200,
                )
            yield page["artifacts"]

    def list_artifacts(self, owner: str, repo: str, name: str) -> list[dict]:
        """Every page's ``artifacts`` (see `artifact_pages`)."""
        return [art for page in self.artifact_pages(owner, repo, name) for art in page]

    def download_artifact_zip(self, owner: str, repo: str, artifact_id: int) -> bytes:
        """GET …/actions/artifacts/{id}/zip, then the 302 ``Location`` without our token.

        410 (expired or deleted) raises GithubError with ``.status == 410``. The body is streamed
        and capped at ``max_download_bytes``; a bigger one raises BaselineError.
        """
        path = f"/repos/{owner}/{repo}/actions/artifacts/{int(artifact_id)}/zip"
        resp = self._request("GET", path, allow_redirects=False, stream=True)
        try:
            if resp.status_code in (301, 302, 303, 307, 308):
                location = urljoin(self.api_url + path, resp.headers.get("Location") or "")
                if not resp.headers.get("Location"):
                    raise github_error(
                        f"GitHub API GET {path} answered {resp.status_code} without a Location header.",
                        method="GET", path=path, status=resp.status_code,
                    )
            elif resp.status_code == 200:  # some servers answer with the zip directly
                return self._read_capped(resp, artifact_id, path)
            else:
                raise github_error(
                    f"GitHub API GET {path} answered {resp.status_code}; expected a 302 redirect"
                    " to the artifact download.",
                    method="GET", path=path, status=resp.status_code,
                )
        finally:
            resp.close()
        storage = self._request("GET", location, stream=True, storage=True)
        try:
            return self._read_capped(storage, artifact_id, _safe_url(location))
        finally:
            storage.close()

    def list_issue_comments(self, owner: str, repo: str, number: int) -> list[dict]:
        """GET /repos/{owner}/{repo}/issues/{number}/comments — all pages, oldest first."""
        path = f"/repos/{owner}/{repo}/issues/{int(number)}/comments"
        out: list[dict] = []
        for page in self._paginate(path, {}):
            if not isinstance(page, list):
                raise github_error(
                    f"GitHub API GET {path} returned an unexpected body (not a list of comments).",
                    method="GET", path=path, status=200,
                )
            out.extend(page)
        return out

    def create_issue_comment(self, owner: str, repo: str, number: int, body: str) -> dict:
        """POST /repos/{owner}/{repo}/issues/{number}/comments."""
        path = f"/repos/{owner}/{repo}/issues/{int(number)}/comments"
        return self._json(self._request("POST", path, json={"body": body}), "POST", path)

    def update_issue_comment(self, owner: str, repo: str, comment_id: int, body: str) -> dict:
        """PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}."""
        path = f"/repos/{owner}/{repo}/issues/comments/{int(comment_id)}"
        return self._json(self._request("PATCH", path, json={"body": body}), "PATCH", path)

    def create_commit_status(
        self,
        owner: str,
        repo: str,
        sha: str,
        state: str,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> dict:
        """POST /repos/{owner}/{repo}/statuses/{sha}; the description is cut to 140 characters."""
        if state not in COMMIT_STATES:
            raise ValueError(f"commit status state must be one of {COMMIT_STATES}, got {state!r}")
        if len(description) > MAX_STATUS_DESCRIPTION:
            description = description[: MAX_STATUS_DESCRIPTION - 1] + "…"
        payload: dict[str, Any] = {"state": state, "context": context, "description": description}
        if target_url is not None:
            payload["target_url"] = target_url
        path = f"/repos/{owner}/{repo}/statuses/{sha}"
        return self._json(self._request("POST", path, json=payload), "POST", path)

    def get_repo(self, owner: str, repo: str) -> dict:
        """GET /repos/{owner}/{repo} — the repository (its ``default_branch``)."""
        path = f"/repos/{owner}/{repo}"
        return self._json(self._request("GET", path), "GET", path)

    def get_pull(self, owner: str, repo: str, number: int) -> dict:
        """GET /repos/{owner}/{repo}/pulls/{number}."""
        path = f"/repos/{owner}/{repo}/pulls/{int(number)}"
        return self._json(self._request("GET", path), "GET", path)

    # ------------------------------------------------------------------ machinery

    def _paginate(self, path: str, params: dict[str, Any]) -> Iterator[Any]:
        """Yield each page's decoded body, following ``Link: <…>; rel="next"`` (≤ MAX_PAGES)."""
        url = self.api_url + path
        query: dict[str, Any] | None = {**params, "per_page": self.per_page}
        for _ in range(MAX_PAGES):
            resp = self._request("GET", url, params=query, label=path)
            yield self._json(resp, "GET", path)
            nxt = resp.links.get("next", {}).get("url")
            if not nxt:
                return
            if _origin(nxt) != self._api_origin:
                raise github_error(
                    f"GitHub API GET {path}: the pagination link points to another host"
                    f" ({_origin(nxt)}); refusing to send the token there.",
                    method="GET", path=path, status=resp.status_code,
                )
            url, query = nxt, None  # the next link already carries the query
        err = PageLimitReached(f"GitHub API GET {path}: more than {MAX_PAGES} pages of {self.per_page} results;"
                               " stopped following the pagination links.")
        err.method, err.path, err.status, err.retry_at = "GET", path, None, None  # type: ignore[attr-defined]
        raise err

    def _request(
        self,
        method: str,
        url_or_path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        allow_redirects: bool = True,
        stream: bool = False,
        storage: bool = False,
        label: str | None = None,
    ) -> requests.Response:
        """Send one request with retries; return a response with status < 400 or raise."""
        if url_or_path.startswith(("http://", "https://")):
            url = url_or_path
        else:
            url = self.api_url + url_or_path
        shown = label or (_safe_url(url) if storage else _api_path(url, self.api_url))
        session = self._storage if storage else self._session
        kind = "Artifact storage" if storage else "GitHub API"
        attempts = self.max_retries + 1
        send = {"params": params, "json": json, "allow_redirects": allow_redirects, "stream": stream,
                "timeout": self.timeout, "auth": _NoAuth() if storage else None}
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = session.request(method, url, **send)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if last:
                    raise github_error(
                        f"{kind} {method} {shown}: no answer after {attempts} attempts"
                        f" ({type(exc).__name__}).",
                        method=method, path=shown, status=None,
                        tip="Check the network and `GITHUB_API_URL`.",
                    ) from None
                wait = self._backoff(attempt)
                log.debug("%s %s: %s; retrying in %.1f s", method, shown, type(exc).__name__, wait)
                self._sleep(wait)
                continue
            rate_limited = _is_rate_limited(resp)
            if not (rate_limited or resp.status_code >= 500):
                if resp.status_code >= 400:
                    raise self._http_error(resp, method, shown, kind=kind)
                return resp
            wait, reset_at = self._wait_for(resp, attempt, rate_limited)
            if wait > self.max_wait:
                raise self._wait_too_long(resp, f"{kind} {method} {shown}", shown, wait, reset_at, rate_limited)
            if last:
                raise self._http_error(resp, method, shown, kind=kind, attempts=attempts)
            resp.close()
            log.debug("%s %s: HTTP %s; retrying in %.1f s", method, shown, resp.status_code, wait)
            self._sleep(wait)
        raise AssertionError("unreachable: the retry loop returns or raises")  # pragma: no cover

    def _wait_too_long(self, resp: requests.Response, what: str, shown: str, wait: float,
                       reset_at: datetime | None, rate_limited: bool) -> GithubError:
        """The error for a rate limit (or an outage) that asks for a longer wait than ``max_wait``."""
        resp.close()
        why = "rate limit exceeded" if rate_limited else "server unavailable"
        when = (f"it resets at {reset_at:%Y-%m-%d %H:%M:%S} UTC, in {wait:.0f} s" if reset_at
                else f"GitHub asks to wait {wait:.0f} s")
        return github_error(
            f"{what}: {why} (HTTP {resp.status_code}); {when}, longer than the {self.max_wait:.0f} s this client waits.",
            method=what.split()[-2], path=shown, status=resp.status_code, retry_at=reset_at,
            tip="Re-run the job after the reset time, or use a token with a higher limit.",
        )

    def _backoff(self, attempt: int) -> float:
        return float(min(2**attempt, self.max_wait))

    def _wait_for(
        self, resp: requests.Response, attempt: int, rate_limited: bool
    ) -> tuple[float, datetime | None]:
        """Seconds to wait before retrying ``resp``, and when the limit resets (if known)."""
        now = self._clock()
        retry_after = parse_retry_after(resp.headers.get("Retry-After"), now)
        if retry_after is not None:
            return retry_after, datetime.fromtimestamp(now + retry_after, timezone.utc)
        if rate_limited and resp.headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(resp.headers["x-ratelimit-reset"])
            except (KeyError, ValueError):
                reset = None
            if reset is not None:
                return max(reset - now, 0.0) + 1.0, datetime.fromtimestamp(reset, timezone.utc)
        if rate_limited:  # secondary limit without headers: GitHub asks for at least a minute
            return max(60.0, self._backoff(attempt)), None
        return self._backoff(attempt), None

    def _http_error(
        self, resp: requests.Response, method: str, shown: str, *, kind: str, attempts: int = 1
    ) -> GithubError:
        status = resp.status_code
        message = self._redact(_github_message(resp))
        tip = _TIPS.get(status)
        if kind != "GitHub API":
            tip = "The signed download URL is valid for one minute; re-run the job."
        elif _is_rate_limited(resp):
            tip = "GitHub's rate limit was hit; re-run the job later."
        resp.close()
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return github_error(
            f"{kind} {method} {shown} failed with HTTP {status}{tries}: {message}",
            method=method, path=shown, status=status, tip=tip,
        )

    def _json(self, resp: requests.Response, method: str, path: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise github_error(
                f"GitHub API {method} {path} returned HTTP {resp.status_code} with a body that is"
                " not JSON.",
                method=method, path=path, status=resp.status_code,
            ) from None

    def _read_capped(self, resp: requests.Response, artifact_id: int, shown: str) -> bytes:
        cap = self.max_download_bytes
        declared = resp.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > cap:
            raise BaselineError(
                f"Artifact {artifact_id} ({shown}) is {int(declared)} bytes, over the"
                f" {cap}-byte download cap; a results artifact should be a small JSON file."
            )
        buf = bytearray()
        for chunk in resp.iter_content(_CHUNK):
            buf.extend(chunk)
            if len(buf) > cap:
                raise BaselineError(
                    f"Artifact {artifact_id} ({shown}) is over the {cap}-byte download cap;"
                    " a results artifact should be a small JSON file."
                )
        return bytes(buf)

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "<redacted>") if self._token else text


# ---------------------------------------------------------------------- helpers


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _safe_url(url: str) -> str:
    """scheme://host/path without the query (a signed URL's signature is a secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _api_path(url: str, api_url: str) -> str:
    path = urlsplit(url).path
    base = urlsplit(api_url).path.rstrip("/")
    return path[len(base):] if base and path.startswith(base) else path


def _is_rate_limited(resp: requests.Response) -> bool:
    if resp.status_code == 429:
        return True
    if resp.status_code != 403:
        return False
    if resp.headers.get("x-ratelimit-remaining") == "0" or "Retry-After" in resp.headers:
        return True
    return "rate limit" in _github_message(resp).lower()


def _github_message(resp: requests.Response) -> str:
    """GitHub's ``message`` field, else the start of the body."""
    try:
        data = resp.json()
    except ValueError:
        text = (resp.text or "").strip()
        return text[:200] or resp.reason or "no message"
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"]
    return json.dumps(data)[:200]


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
