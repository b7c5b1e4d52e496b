"""The sticky PR comment: one comment carrying a hidden marker, updated in place."""

from __future__ import annotations

import re

from rageval.errors import GithubError
from rageval.github.client import GitHubClient, parse_time

MARKER_TEMPLATE = "<!-- rag-eval-gate:{key} -->"
ACTIONS_BOT = "github-actions[bot]"  # the author of comments made with GITHUB_TOKEN
MAX_COMMENT_CHARS = 65536  # GitHub answers 422 "Body is too long (maximum is 65536 characters)"
_KEY_RE = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def comment_marker(key: str) -> str:
    """The hidden HTML marker for ``key``; the key may hold letters, digits and ``_.:/-``."""
    if not _KEY_RE.match(key) or "--" in key:
        raise ValueError(
            f"comment key {key!r} must use only letters, digits and '_.:/-' (no '--'),"
            " so it stays inside an HTML comment"
        )
    return MARKER_TEMPLATE.format(key=key)


def is_ours(comment: dict, logins: tuple[str, ...] = (ACTIONS_BOT,)) -> bool:
    """Written by us: the author's login is one of ``logins`` — the login our own POST returned,
    ``github-actions[bot]`` (the default token's) until one did. Another GitHub App's comment
    (``user.type`` Bot too) or a person's is never ours, whatever it says."""
    user = comment.get("user")
    return isinstance(user, dict) and isinstance(user.get("login"), str) and user["login"] in logins


def upsert_comment(
    client: GitHubClient, owner: str, repo: str, number: int, key: str, body: str,
    *, logins: tuple[str, ...] = (ACTIONS_BOT,), create: bool = True,
) -> dict | None:
    """Create or update the one PR/issue comment that carries the marker for ``key``.

    The posted body is the marker on its own line followed by ``body``. Our comment is one whose
    author is ours (`is_ours`) and whose body *starts* with the marker. Every page of comments is
    read; if several of ours carry the marker (two runs raced), the newest by ``created_at`` (then
    id) is updated and the others are left alone. An unchanged body is not re-sent. When the edit
    is refused (403 or 404: the comment was deleted, locked, or is not ours to edit after all), a
    new comment is created instead. Raises ValueError when the body with the marker exceeds
    MAX_COMMENT_CHARS — fitting the report is the report module's job — and GithubError on API
    failures (a 403 on creating means the token is read-only, e.g. a fork PR). With
    ``create=False`` only an existing comment is updated: None when there is none.
    """
    marker = comment_marker(key)
    full = f"{marker}\n{body}"
    if len(full) > MAX_COMMENT_CHARS:
        raise ValueError(
            f"comment body is {len(full)} characters with the marker; GitHub's limit is"
            f" {MAX_COMMENT_CHARS}. Shorten the report before posting."
        )
    ours = [
        c
        for c in client.list_issue_comments(owner, repo, number)
        if isinstance(c, dict) and isinstance(c.get("body"), str) and c["body"].lstrip().startswith(marker)
        and is_ours(c, logins)
    ]
    if not ours:
        return client.create_issue_comment(owner, repo, number, full) if create else None

    def newest(c: dict) -> tuple[float, int]:
        created = parse_time(c.get("created_at"))
        return (created.timestamp() if created else 0.0, c.get("id") or 0)

    target = max(ours, key=newest)
    if target.get("body") == full:
        return target
    try:
        return client.update_issue_comment(owner, repo, target["id"], full)
    except GithubError as exc:
        if getattr(exc, "status", None) not in (403, 404):
            raise
    return client.create_issue_comment(owner, repo, number, full)
