"""The golden file as committed in git: at one ref (the base of a pull request, by default) and
over its recent commits, as :class:`~rageval.golden.lifecycle.Reference` records the lifecycle
checks hold the working copy to. git is run with a timeout; when it is missing, hangs or the file
is not in a work tree, the functions say why instead of raising. Nothing here reads the
environment: the caller passes the pull request's base branch in.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from rageval.errors import DatasetError
from rageval.golden.lifecycle import Reference, reference_from_golden
from rageval.golden.set import GoldenSet, parse_golden

GIT_TIMEOUT_S = 10
GIT_HISTORY_COMMITS = 50        # how far back `validate` and `golden add` look for ids used before
#: a commit as a RunResult records it: a full sha, nothing git could read as an option or a range
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


def default_git_ref(base_branch: str | None) -> str:
    """``origin/<base branch>`` for a pull request's base branch (the caller reads it from where its
    CI keeps it), else ``HEAD``."""
    return f"origin/{base_branch}" if base_branch else "HEAD"


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[bytes] | None:
    """Run git with a timeout; None when git is missing or hangs."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _in_repo(path: Path) -> tuple[Path, str] | str:
    """(work tree root, path relative to it) for ``path``, or why not."""
    path = path.resolve()
    top = _git(["rev-parse", "--show-toplevel"], path.parent)
    if top is None:
        return "git is not available"
    if top.returncode != 0:
        return f"{path.parent} is not in a git work tree"
    root = Path(top.stdout.decode().strip()).resolve()
    if not path.is_relative_to(root):
        return f"{path} is outside the git work tree {root}"
    return root, path.relative_to(root).as_posix()


def file_at(path: Path, sha: str) -> bytes | str:
    """``path``'s content as committed at ``sha`` (a full 40-hex commit id, as a RunResult records
    it): the bytes, or why they cannot be had (not a commit id, git missing, not a work tree, a
    shallow checkout without ``sha``, the file absent there). ``sha`` comes from a results file, so
    anything but 40 hex digits is refused before git sees it (``--output=…`` would be an option)."""
    if not isinstance(sha, str) or not COMMIT_SHA.fullmatch(sha):
        return f"the recorded commit {str(sha)[:60]!r} is not a 40-hex commit id"
    where = _in_repo(path)
    if isinstance(where, str):
        return where
    root, rel = where
    shown = _git(["show", f"{sha}:{rel}", "--"], root)
    if shown is None or shown.returncode != 0:
        return f"{rel} is not available at {sha[:12]} in this checkout"
    return shown.stdout


def _committed(root: Path, rel: str, rev: str) -> GoldenSet | str:
    """The golden set as committed at ``rev``, or why not."""
    shown = _git(["show", f"{rev}:{rel}"], root)
    if shown is None or shown.returncode != 0:
        return f"{rel} does not exist at {rev}"
    try:
        return parse_golden(shown.stdout, Path(f"{rel}@{rev}"))
    except DatasetError as exc:
        return f"the version at {rev} does not load ({exc})"


def reference_from_git(path: Path, ref: str) -> tuple[Reference | None, str]:
    """The golden file as committed at ``ref``: (reference, "") or (None, why not)."""
    where = _in_repo(path)
    if isinstance(where, str):
        return None, where
    golden = _committed(*where, ref)
    if isinstance(golden, str):
        return None, golden
    return reference_from_golden(golden, f"git {ref}"), ""


def git_history(path: Path, max_commits: int = GIT_HISTORY_COMMITS) -> tuple[list[Reference], str]:
    """The golden file as committed in its last ``max_commits`` commits, newest first:
    (references, "") or ([], why not). Versions that do not load are skipped."""
    where = _in_repo(path)
    if isinstance(where, str):
        return [], where
    root, rel = where
    log = _git(["log", f"-n{max_commits}", "--format=%h", "--", rel], root)
    if log is None or log.returncode != 0:
        return [], "`git log` failed"
    refs = []
    for commit in log.stdout.decode().split():
        golden = _committed(root, rel, commit)
        if not isinstance(golden, str):
            refs.append(reference_from_golden(golden, f"git {commit}"))
    return refs, ""
