"""The sticky PR comment: one comment carrying a hidden marker, updated in place."""

from __future__ import annotations

import re

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


def is_bot_comment(comment: dict, logins: tuple[str, ...] = ()) -> bool:
    """Written by a bot account: ``user.type`` is ``Bot`` (every GitHub App, GITHUB_TOKEN's
    ``github-actions[bot]`` included), or the author is one of ``logins`` (the token's own login,
    where it is known)."""
    user = comment.get("user")
    if not isinstance(user, dict):
        return False
    return user.get("type") == "Bot" or user.get("login") in (ACTIONS_BOT, *logins)


def upsert_comment(
    client: GitHubClient, owner: str, repo: str, number: int, key: str, body: str,
    *, logins: tuple[str, ...] = (),
) -> dict:
    """Create or update the one PR/issue comment that carries the marker for ``key``.

    The posted body is the marker on its own line followed by ``body``. Our comment is one written
    by a bot account (`is_bot_comment`) whose body *starts* with the marker: a person's comment is
    never adopted or overwritten, whatever it says. Every page of comments is read; if several
    bot comments carry the marker (two runs raced), the newest by ``created_at`` (then id) is
    updated and the others are left alone. An unchanged body is not re-sent. Raises ValueError when the body with the marker exceeds MAX_COMMENT_CHARS — fitting
    the report is the report module's job — and GithubError on API failures (a 403 means the
    token is read-only, e.g. a fork PR).
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
        and is_bot_comment(c, logins)
    ]
    if not ours:
        return client.create_issue_comment(owner, repo, number, full)

    def newest(c: dict) -> tuple[float, int]:
        created = parse_time(c.get("created_at"))
        return (created.timestamp() if created else 0.0, c.get("id") or 0)

    target = max(ours, key=newest)
    if target.get("body") == full:
        return target
    return client.update_issue_comment(owner, repo, target["id"], full)
