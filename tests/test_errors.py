"""rageval.errors: what each exception carries."""

from __future__ import annotations

from datetime import datetime, timezone

from rageval.errors import GithubError, RagevalError
from rageval.github.client import github_error


def test_a_github_error_always_has_its_request_fields():
    """Declared on the class, not attached afterwards: one raised without a request (the action's
    bad default branch) reads None instead of raising AttributeError."""
    bare = GithubError("the default branch is not a branch name")
    assert (bare.status, bare.method, bare.path, bare.retry_at) == (None, None, None, None)
    assert isinstance(bare, RagevalError) and bare.exit_code == 2 and str(bare) == bare.message


def test_github_error_fills_them_in():
    reset = datetime(2026, 1, 1, tzinfo=timezone.utc)
    err = github_error("rate limited", method="GET", path="/repos/o/r", status=403, tip="wait", retry_at=reset)
    assert (err.status, err.method, err.path, err.retry_at, err.tip) == (403, "GET", "/repos/o/r", reset, "wait")
