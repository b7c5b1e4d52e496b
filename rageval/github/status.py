"""The commit status (input ``status-context``): ``pending`` when the run starts, ``success`` or
``failure`` with the verdict, ``error`` when the run ends with exit code 2 (bad input) or 3 (a
bug) — so a required status never waits forever for a run that stopped early.

The reporter is built from the raw environment, before the inputs are validated, so that even a
bad input or a broken config still turns the status to ``error`` when the token, the context and
the commit are known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rageval.errors import ActionInputError, GithubError
from rageval.github.client import MAX_STATUS_DESCRIPTION
from rageval.github.inputs import PR_EVENTS, get_input, read_event
from rageval.github.workflow import Console

MSG_STATUS_FAILED = ("Could not set the commit status '{context}': {error} Give the job "
                     "`permissions: statuses: write`; the verdict is unchanged.")
MAX_CONTEXT = 254


@dataclass
class StatusReporter:
    """Sets the commit status ``context`` on ``sha``; a refusal is a warning, never a crash."""

    client: Callable[[], Any]
    console: Console
    owner: str
    repo: str
    sha: str
    context: str
    target_url: str | None

    def set(self, state: str, description: str) -> None:
        description = self.console.redact(" ".join(description.split()))[:MAX_STATUS_DESCRIPTION]
        try:
            self.client().create_commit_status(self.owner, self.repo, self.sha, state, self.context,
                                               description, target_url=self.target_url)
        except GithubError as exc:
            self.console.warning(MSG_STATUS_FAILED.format(context=self.context, error=exc.message))
            return
        self.console.log(f"commit status '{self.context}' on {self.sha[:12]}: {state}")


def status_sha(env: Mapping[str, str]) -> str | None:
    """The commit a status belongs on: a pull request's head (GITHUB_SHA is the temporary merge
    commit there), a merge group's head, else GITHUB_SHA. None when a PR payload is unreadable."""
    try:
        event = read_event(env)
    except ActionInputError:
        return None if env.get("GITHUB_EVENT_NAME") in PR_EVENTS else env.get("GITHUB_SHA") or None
    return event.head_sha or event.sha


def status_reporter(env: Mapping[str, str], console: Console,
                    client: Callable[[], Any]) -> StatusReporter | None:
    """The reporter, or None when there is no status to set (no context, token, repo or commit)."""
    context = get_input(env, "status-context")
    owner, _, repo = env.get("GITHUB_REPOSITORY", "").partition("/")
    if not context or len(context) > MAX_CONTEXT or not get_input(env, "github-token") or not owner or not repo:
        return None
    sha = status_sha(env)
    if not sha:
        return None
    server, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_RUN_ID")
    target = f"{server}/{owner}/{repo}/actions/runs/{run}" if server and run else None
    return StatusReporter(client, console, owner, repo, sha, context, target)
