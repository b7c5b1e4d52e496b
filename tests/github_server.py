"""A fake GitHub REST API over real HTTP on 127.0.0.1, for contract tests of `rageval.github.client`.

It serves exactly the ten operations of ``../shared/github-rest-subset/openapi-subset.json``
under an Enterprise-style prefix (``/api/v3``), with in-memory state, plus one storage route that
stands in for the signed blob URL an artifact download redirects to.

    with FakeGitHub(token="t") as gh:
        art = gh.add_artifact("rag-baseline", zip_bytes=..., created_at="2026-09-01T00:00:00Z")
        gh.fail("issues/create-comment", 403, message="Resource not accessible by integration")
        client = GitHubClient("t", api_url=gh.api_url)
        ...
        gh.requests  # every request: method, path, query, headers, json body, operation, answer

Responses are shaped like the REST description (ids, node_id, url fields, workflow_run,
created_at/expires_at, total_count, Link headers); the tests validate them against the schemas.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

PREFIX = "/api/v3"
STORAGE_PREFIX = "/_storage/artifacts/"
SIGNED_URL_SECONDS = 60  # GitHub: "The URL expires after 1 minute"

# (method, path regex, operation id) — the ten operations of the subset, nothing else.
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), op)
    for m, p, op in [
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/actions/artifacts$",
         "actions/list-artifacts-for-repo"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/actions/artifacts/(?P<artifact_id>[^/]+)"
                r"/(?P<archive_format>[^/]+)$", "actions/download-artifact"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/actions/runs/(?P<run_id>[^/]+)/artifacts$",
         "actions/list-workflow-run-artifacts"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/actions/workflows/(?P<workflow_id>[^/]+)/runs$",
         "actions/list-workflow-runs"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/(?P<issue_number>[^/]+)/comments$",
         "issues/list-comments"),
        ("POST", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/(?P<issue_number>[^/]+)/comments$",
         "issues/create-comment"),
        ("PATCH", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/comments/(?P<comment_id>[^/]+)$",
         "issues/update-comment"),
        ("POST", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/statuses/(?P<sha>[^/]+)$",
         "repos/create-commit-status"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<pull_number>[^/]+)$",
         "pulls/get"),
        ("GET", r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)$", "repos/get"),
    ]
]
STORAGE_OPERATION = "storage/download"


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"0{len(kind)}:{kind}{ident}".encode()).decode()


@dataclass
class Fault:
    """A scripted answer for the next ``times`` requests to ``operation`` (an operation id)."""

    operation: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    times: int = 1


@dataclass
class LoggedRequest:
    method: str
    path: str  # without the API prefix and query
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Any
    operation: str | None
    status: int = 0
    response_json: Any = None
    response_headers: dict[str, str] = field(default_factory=dict)
    faulted: bool = False


class FakeGitHub:
    """In-memory GitHub for one repository ``owner/repo``; start with ``with`` or `start()`."""

    def __init__(
        self,
        *,
        owner: str = "acme",
        repo: str = "shop",
        repo_id: int = 4242,
        token: str | None = None,
        max_page_size: int | None = None,
        default_branch: str = "main",
    ) -> None:
        self.owner, self.repo, self.repo_id = owner, repo, repo_id
        self.default_branch = default_branch
        self.token = token
        self.max_page_size = max_page_size
        self.artifacts: list[dict] = []
        self.zips: dict[int, bytes] = {}
        self.gone: set[int] = set()
        self.runs: list[dict] = []
        self.comments: dict[int, list[dict]] = {}
        self.statuses: dict[str, list[dict]] = {}
        self.pulls: dict[int, dict] = {}
        self.faults: list[Fault] = []
        self.requests: list[LoggedRequest] = []
        self._next_id = 1000
        self._clock = datetime(2026, 9, 1, 12, 0, tzinfo=timezone.utc)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeGitHub is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.origin + PREFIX

    @property
    def html_url(self) -> str:
        return self.origin + "/html"

    # ------------------------------------------------------------------ state

    def _id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def _tick(self) -> str:
        with self._lock:
            self._clock += timedelta(seconds=1)
            return iso(self._clock)

    def fail(
        self,
        operation: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str | None = None,
        body: Any = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` requests for ``operation`` with ``status``; the body is
        ``body`` if given, else GitHub's error shape with ``message``."""
        if body is None:
            body = {
                "message": message or _REASONS.get(status, "Error"),
                "documentation_url": "https://docs.github.com/rest",
                "status": str(status),
            }
        self.faults.append(Fault(operation, status, dict(headers or {}), body, times))

    def add_artifact(
        self,
        name: str,
        *,
        zip_bytes: bytes = b"",
        branch: str = "main",
        created_at: str | None = None,
        expires_at: str | None = "2099-01-01T00:00:00Z",
        expired: bool = False,
        head_repository_id: int | None = None,
        gone: bool = False,
        with_run: bool = True,
    ) -> dict:
        """An artifact from a workflow run on ``branch``; ``head_repository_id`` ≠ repo id is a fork."""
        art_id = self._id()
        api = f"{self.api_url}/repos/{self.owner}/{self.repo}"
        created = created_at or self._tick()
        run = None
        if with_run:
            run_id = self._id()
            head_sha = f"{run_id:040x}"
            run = {
                "id": run_id,
                "repository_id": self.repo_id,
                "head_repository_id": self.repo_id if head_repository_id is None else head_repository_id,
                "head_branch": branch,
                "head_sha": head_sha,
            }
            self.runs.append(self._workflow_run(run, created))
        art = {
            "id": art_id,
            "node_id": _node_id("Artifact", art_id),
            "name": name,
            "size_in_bytes": len(zip_bytes),
            "url": f"{api}/actions/artifacts/{art_id}",
            "archive_download_url": f"{api}/actions/artifacts/{art_id}/zip",
            "expired": expired,
            "created_at": created,
            "expires_at": expires_at,
            "updated_at": created,
            "digest": None,
            "workflow_run": run,
        }
        self.artifacts.append(art)
        self.zips[art_id] = zip_bytes
        if gone:
            self.gone.add(art_id)
        return art

    def add_comment(self, issue: int, body: str, *, login: str = "github-actions[bot]") -> dict:
        comment = self._comment(issue, body, login)
        self.comments.setdefault(issue, []).append(comment)
        return comment

    def add_pull(self, number: int, *, head_ref: str = "feature", head_sha: str | None = None,
                 base_ref: str = "main", head_repo_id: int | None = None) -> dict:
        pull = self._pull(number, head_ref, head_sha or f"{number:040x}", base_ref,
                          head_repo_id or self.repo_id)
        self.pulls[number] = pull
        return pull

    def find(self, operation: str) -> list[LoggedRequest]:
        return [r for r in self.requests if r.operation == operation]

    # ------------------------------------------------------------------ JSON shapes

    def _user(self, login: str, user_id: int) -> dict:
        api, html = f"{self.api_url}/users/{login}", f"{self.html_url}/{login}"
        return {
            "login": login, "id": user_id, "node_id": _node_id("User", user_id),
            "avatar_url": f"{self.origin}/avatars/u/{user_id}", "gravatar_id": "",
            "url": api, "html_url": html,
            "followers_url": f"{api}/followers", "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}", "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions", "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False,
        }

    def _repo(self, repo_id: int, *, full: bool) -> dict:
        owner = self.owner if repo_id == self.repo_id else f"fork{repo_id}"
        api = f"{self.api_url}/repos/{owner}/{self.repo}"
        repo = {
            "id": repo_id, "node_id": _node_id("Repository", repo_id), "name": self.repo,
            "full_name": f"{owner}/{self.repo}", "owner": self._user(owner, repo_id + 1),
            "private": False, "html_url": f"{self.html_url}/{owner}/{self.repo}",
            "description": None, "fork": repo_id != self.repo_id, "url": api,
        }
        templated = {
            "archive_url": "/{archive_format}{/ref}", "assignees_url": "/assignees{/user}",
            "blobs_url": "/git/blobs{/sha}", "branches_url": "/branches{/branch}",
            "collaborators_url": "/collaborators{/collaborator}", "comments_url": "/comments{/number}",
            "commits_url": "/commits{/sha}", "compare_url": "/compare/{base}...{head}",
            "contents_url": "/contents/{+path}", "contributors_url": "/contributors",
            "deployments_url": "/deployments", "downloads_url": "/downloads", "events_url": "/events",
            "forks_url": "/forks", "git_commits_url": "/git/commits{/sha}",
            "git_refs_url": "/git/refs{/sha}", "git_tags_url": "/git/tags{/sha}", "hooks_url": "/hooks",
            "issue_comment_url": "/issues/comments{/number}", "issue_events_url": "/issues/events{/number}",
            "issues_url": "/issues{/number}", "keys_url": "/keys{/key_id}", "labels_url": "/labels{/name}",
            "languages_url": "/languages", "merges_url": "/merges", "milestones_url": "/milestones{/number}",
            "notifications_url": "/notifications{?since,all,participating}", "pulls_url": "/pulls{/number}",
            "releases_url": "/releases{/id}", "stargazers_url": "/stargazers", "statuses_url": "/statuses/{sha}",
            "subscribers_url": "/subscribers", "subscription_url": "/subscription", "tags_url": "/tags",
            "teams_url": "/teams", "trees_url": "/git/trees{/sha}",
        }
        repo.update({k: api + v for k, v in templated.items()})
        if full:
            host = urlsplit(self.origin).netloc
            repo.update({
                "clone_url": f"{self.html_url}/{owner}/{self.repo}.git",
                "git_url": f"git://{host}/{owner}/{self.repo}.git",
                "ssh_url": f"git@{host}:{owner}/{self.repo}.git",
                "svn_url": f"{self.html_url}/{owner}/{self.repo}", "mirror_url": None,
                "homepage": None, "language": "Python", "default_branch": self.default_branch,
                "forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0,
                "watchers_count": 0, "size": 120, "open_issues": 1, "open_issues_count": 1,
                "has_issues": True, "has_projects": False, "has_wiki": False, "has_pages": False,
                "has_downloads": True, "archived": False, "disabled": False, "license": None,
                "pushed_at": "2026-08-31T10:00:00Z", "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-08-31T10:00:00Z",
            })
        return repo

    def _workflow_run(self, run: dict, created: str) -> dict:
        api = f"{self.api_url}/repos/{self.owner}/{self.repo}/actions/runs/{run['id']}"
        return {
            "id": run["id"], "node_id": _node_id("WorkflowRun", run["id"]),
            "head_branch": run["head_branch"], "head_sha": run["head_sha"],
            "run_number": len(self.runs) + 1, "display_title": "baseline", "event": "push",
            "status": "completed", "conclusion": "success", "workflow_id": 1,
            "path": ".github/workflows/rag-eval.yml", "url": api,
            "html_url": f"{self.html_url}/{self.owner}/{self.repo}/actions/runs/{run['id']}",
            "created_at": created, "updated_at": created, "pull_requests": [],
            "head_commit": {
                "id": run["head_sha"], "tree_id": run["head_sha"][::-1], "message": "update docs",
                "timestamp": created, "author": {"name": "A", "email": "a@example.com"},
                "committer": {"name": "A", "email": "a@example.com"},
            },
            "repository": self._repo(run["repository_id"], full=False),
            "head_repository": self._repo(run["head_repository_id"], full=False),
            "jobs_url": f"{api}/jobs", "logs_url": f"{api}/logs",
            "check_suite_url": f"{self.api_url}/repos/{self.owner}/{self.repo}/check-suites/1",
            "artifacts_url": f"{api}/artifacts", "cancel_url": f"{api}/cancel",
            "rerun_url": f"{api}/rerun",
            "workflow_url": f"{self.api_url}/repos/{self.owner}/{self.repo}/actions/workflows/1",
        }

    def _comment(self, issue: int, body: str, login: str) -> dict:
        cid = self._id()
        now = self._tick()
        api = f"{self.api_url}/repos/{self.owner}/{self.repo}"
        return {
            "id": cid, "node_id": _node_id("IssueComment", cid),
            "url": f"{api}/issues/comments/{cid}",
            "html_url": f"{self.html_url}/{self.owner}/{self.repo}/pull/{issue}#issuecomment-{cid}",
            "issue_url": f"{api}/issues/{issue}", "body": body,
            "user": self._user(login, 41898282 if login.endswith("[bot]") else 7),
            "created_at": now, "updated_at": now, "author_association": "NONE",
        }

    def _pull(self, number: int, head_ref: str, head_sha: str, base_ref: str, head_repo_id: int) -> dict:
        api = f"{self.api_url}/repos/{self.owner}/{self.repo}"
        html = f"{self.html_url}/{self.owner}/{self.repo}/pull/{number}"
        user = self._user("contributor", 7)

        def side(ref: str, sha: str, repo_id: int) -> dict:
            repo = self._repo(repo_id, full=True)
            return {"label": f"{repo['owner']['login']}:{ref}", "ref": ref, "sha": sha,
                    "user": repo["owner"], "repo": repo}

        def link(href: str) -> dict:
            return {"href": href}

        return {
            "url": f"{api}/pulls/{number}", "id": 9000 + number, "node_id": _node_id("PullRequest", number),
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{number}", "commits_url": f"{api}/pulls/{number}/commits",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{number}/comments", "statuses_url": f"{api}/statuses/{head_sha}",
            "number": number, "state": "open", "locked": False, "title": "Change chunk size",
            "user": user, "body": None, "labels": [], "milestone": None, "active_lock_reason": None,
            "created_at": "2026-09-01T08:00:00Z", "updated_at": "2026-09-01T09:00:00Z",
            "closed_at": None, "merged_at": None, "merge_commit_sha": None, "assignee": None,
            "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": side(head_ref, head_sha, head_repo_id),
            "base": side(base_ref, "b" * 40, self.repo_id),
            "_links": {
                "self": link(f"{api}/pulls/{number}"), "html": link(html),
                "issue": link(f"{api}/issues/{number}"), "comments": link(f"{api}/issues/{number}/comments"),
                "review_comments": link(f"{api}/pulls/{number}/comments"),
                "review_comment": link(f"{api}/pulls/comments{{/number}}"),
                "commits": link(f"{api}/pulls/{number}/commits"), "statuses": link(f"{api}/statuses/{head_sha}"),
            },
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": False,
            "merged": False, "mergeable": True, "rebaseable": True, "mergeable_state": "clean",
            "merged_by": None, "comments": 0, "review_comments": 0, "maintainer_can_modify": False,
            "commits": 1, "additions": 3, "deletions": 1, "changed_files": 1,
        }

    def _status(self, sha: str, body: dict) -> dict:
        sid = self._id()
        now = self._tick()
        return {
            "url": f"{self.api_url}/repos/{self.owner}/{self.repo}/statuses/{sha}",
            "avatar_url": None, "id": sid, "node_id": _node_id("StatusContext", sid),
            "state": body["state"], "description": body.get("description"),
            "target_url": body.get("target_url"), "context": body.get("context", "default"),
            "created_at": now, "updated_at": now, "creator": self._user("github-actions[bot]", 41898282),
        }


_REASONS = {
    302: "Found", 400: "Bad Request", 401: "Bad credentials", 403: "Forbidden", 404: "Not Found",
    410: "Gone", 422: "Validation Failed", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
}


class _Response(Exception):
    """Raised inside a route to answer with (status, body, headers)."""

    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
                 raw: bytes | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers, self.raw = status, body, dict(headers or {}), raw


def _error(status: int, message: str) -> _Response:
    return _Response(status, {"message": message, "documentation_url": "https://docs.github.com/rest",
                              "status": str(status)})


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; avoid 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output quiet
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        fake = self.fake
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("latin-1")
        path, operation, params = parts.path, None, {}
        if path.startswith(STORAGE_PREFIX):
            operation = STORAGE_OPERATION
        elif path.startswith(PREFIX + "/"):
            path = path[len(PREFIX):]
            for m, pattern, op in ROUTES:
                match = pattern.match(path)
                if match and m == method:
                    operation, params = op, match.groupdict()
                    break
        entry = LoggedRequest(method, path, query, dict(self.headers.items()), body, operation)
        with fake._lock:
            fake.requests.append(entry)
        try:
            self._dispatch(entry, params)
        except _Response as resp:
            self._send(entry, resp)

    def _dispatch(self, entry: LoggedRequest, params: dict[str, str]) -> None:
        fake = self.fake
        if entry.operation is None:
            raise _error(404, "Not Found")
        with fake._lock:
            fault = next((f for f in fake.faults if f.operation == entry.operation and f.times > 0), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None:
            entry.faulted = True
            raise _Response(fault.status, fault.body, fault.headers)
        if entry.operation == STORAGE_OPERATION:
            raise self._storage(entry)
        if fake.token is not None and entry.headers.get("Authorization") != f"Bearer {fake.token}":
            raise _error(401, "Bad credentials")
        if (params["owner"], params["repo"]) != (fake.owner, fake.repo):
            raise _error(404, "Not Found")
        raise getattr(self, "_op_" + entry.operation.replace("/", "_").replace("-", "_"))(entry, params)

    # ------------------------------------------------------------------ operations

    def _op_actions_list_artifacts_for_repo(self, entry: LoggedRequest, params: dict) -> _Response:
        name = entry.query.get("name", [None])[0]
        arts = [a for a in self.fake.artifacts if name is None or a["name"] == name]
        arts.sort(key=lambda a: (a["created_at"] or "", a["id"]), reverse=True)   # GitHub: newest first
        return self._page(entry, arts, lambda items, total: {"total_count": total, "artifacts": items})

    def _op_actions_list_workflow_run_artifacts(self, entry: LoggedRequest, params: dict) -> _Response:
        name = entry.query.get("name", [None])[0]
        arts = [a for a in self.fake.artifacts
                if a["workflow_run"] and str(a["workflow_run"]["id"]) == params["run_id"]
                and (name is None or a["name"] == name)]
        if entry.query.get("direction", ["desc"])[0] == "desc":
            arts = sorted(arts, key=lambda a: a["created_at"] or "", reverse=True)
        return self._page(entry, arts, lambda items, total: {"total_count": total, "artifacts": items})

    def _op_actions_list_workflow_runs(self, entry: LoggedRequest, params: dict) -> _Response:
        branch = entry.query.get("branch", [None])[0]
        runs = [r for r in self.fake.runs if branch is None or r["head_branch"] == branch]
        return self._page(entry, runs, lambda items, total: {"total_count": total, "workflow_runs": items})

    def _op_actions_download_artifact(self, entry: LoggedRequest, params: dict) -> _Response:
        fake = self.fake
        if params["archive_format"] != "zip" or not params["artifact_id"].isdigit():
            return _error(404, "Not Found")
        art_id = int(params["artifact_id"])
        if art_id not in fake.zips:
            return _error(404, "Not Found")
        if art_id in fake.gone:
            return _error(410, "Artifact has expired")
        expiry = int(time.time()) + SIGNED_URL_SECONDS
        sig = f"sig{art_id}x{expiry}"
        location = f"{fake.origin}{STORAGE_PREFIX}{art_id}?" + urlencode({"se": expiry, "sig": sig})
        return _Response(302, None, {"Location": location})

    def _storage(self, entry: LoggedRequest) -> _Response:
        art_id = entry.path[len(STORAGE_PREFIX):]
        expiry = entry.query.get("se", ["0"])[0]
        if not art_id.isdigit() or entry.query.get("sig", [""])[0] != f"sig{art_id}x{expiry}":
            return _Response(403, raw=b"<Error>AuthenticationFailed</Error>")
        if int(expiry) < time.time():
            return _Response(403, raw=b"<Error>AuthenticationFailed: expired</Error>")
        if "Authorization" in entry.headers:  # like real blob storage: one auth mechanism only
            return _Response(400, raw=b"<Error>InvalidAuthenticationInfo</Error>")
        data = self.fake.zips[int(art_id)]
        return _Response(200, headers={"Content-Type": "application/zip"}, raw=data)

    def _op_issues_list_comments(self, entry: LoggedRequest, params: dict) -> _Response:
        comments = self.fake.comments.get(int(params["issue_number"]), [])
        return self._page(entry, comments, lambda items, total: items)

    def _op_issues_create_comment(self, entry: LoggedRequest, params: dict) -> _Response:
        body = entry.json
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            return _error(422, "Invalid request.\n\n\"body\" wasn't supplied.")
        if len(body["body"]) > 65536:
            return _error(422, "Body is too long (maximum is 65536 characters)")
        issue = int(params["issue_number"])
        comment = self.fake.add_comment(issue, body["body"])
        return _Response(201, comment, {"Location": comment["url"]})

    def _op_issues_update_comment(self, entry: LoggedRequest, params: dict) -> _Response:
        body = entry.json
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            return _error(422, "Invalid request.\n\n\"body\" wasn't supplied.")
        for comments in self.fake.comments.values():
            for comment in comments:
                if str(comment["id"]) == params["comment_id"]:
                    comment["body"] = body["body"]
                    comment["updated_at"] = self.fake._tick()
                    return _Response(200, comment)
        return _error(404, "Not Found")

    def _op_repos_create_commit_status(self, entry: LoggedRequest, params: dict) -> _Response:
        body = entry.json
        if not isinstance(body, dict) or body.get("state") not in ("error", "failure", "pending", "success"):
            return _error(422, "Validation Failed")
        if len(body.get("description") or "") > 140:
            return _error(422, "description is too long (maximum is 140 characters)")
        status = self.fake._status(params["sha"], body)
        self.fake.statuses.setdefault(params["sha"], []).append(status)
        return _Response(201, status, {"Location": status["url"]})

    def _op_repos_get(self, entry: LoggedRequest, params: dict) -> _Response:
        repo = self.fake._repo(self.fake.repo_id, full=True)
        repo.update({"has_discussions": False, "network_count": 0, "subscribers_count": 1})
        return _Response(200, repo)

    def _op_pulls_get(self, entry: LoggedRequest, params: dict) -> _Response:
        pull = self.fake.pulls.get(int(params["pull_number"])) if params["pull_number"].isdigit() else None
        return _Response(200, pull) if pull else _error(404, "Not Found")

    # ------------------------------------------------------------------ plumbing

    def _page(self, entry: LoggedRequest, items: list, wrap: Any) -> _Response:
        fake = self.fake
        try:
            per_page = min(int(entry.query.get("per_page", ["30"])[0]), 100)
            page = int(entry.query.get("page", ["1"])[0])
        except ValueError:
            return _error(422, "Invalid per_page or page")
        if fake.max_page_size is not None:
            per_page = min(per_page, fake.max_page_size)
        per_page, page = max(per_page, 1), max(page, 1)
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]

        def url(n: int) -> str:
            q = {k: v[0] for k, v in entry.query.items()}
            q.update({"per_page": str(per_page), "page": str(n)})
            return f"{fake.api_url}{entry.path}?{urlencode(q)}"

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        headers = {"Link": ", ".join(links)} if links else {}
        return _Response(200, wrap(chunk, len(items)), headers)

    def _send(self, entry: LoggedRequest, resp: _Response) -> None:
        headers = {
            "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999",
            "x-ratelimit-reset": str(int(time.time()) + 3600), "x-ratelimit-resource": "core",
        }
        if entry.operation == STORAGE_OPERATION:
            headers = {}
        headers.update(resp.headers)
        if resp.raw is not None:
            data = resp.raw
            headers.setdefault("Content-Type", "application/octet-stream")
        elif resp.body is not None:
            data = json.dumps(resp.body).encode()
            headers["Content-Type"] = "application/json; charset=utf-8"
        else:
            data = b""
        entry.status, entry.response_json, entry.response_headers = resp.status, resp.body, headers
        self.send_response(resp.status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
