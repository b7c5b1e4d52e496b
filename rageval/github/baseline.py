"""The baseline: main's newest valid RunResult artifact, chosen, downloaded and unpacked safely.

The newest non-expired results artifact produced by a workflow run on the base branch of *this*
repository (`find_baseline_artifact`, `fetch_baseline`), downloaded through the one-minute signed
storage URL without our token, unpacked defensively in memory (`safe_extract_json`), and read
through ``RunResult.from_json`` like any other results file (a key twice, NaN, deep nesting and a
wrong shape are refused the same way as through ``--baseline``).
"""

from __future__ import annotations

import io
import logging
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from rageval.errors import BaselineError, GithubError
from rageval.github.client import GitHubClient, PageLimitReached, parse_time
from rageval.results import RunResult

log = logging.getLogger(__name__)

DEFAULT_MAX_MEMBER_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_TOTAL_BYTES = 50 * 1024 * 1024
MAX_ZIP_MEMBERS = 1000
MAX_BASELINE_CANDIDATES = 10  # artifacts tried (410 Gone → next) before giving up
TIP_REUPLOAD = "Re-run the baseline workflow on the base branch to upload a fresh artifact."
_CHUNK = 64 * 1024
MSG_PAGE_CAP = ("Stopped looking for a baseline after the newest {pages} pages of artifacts named '{name}' (GitHub "
                "lists them newest first): none of them is a usable baseline from branch '{branch}' of this "
                "repository. The gate goes on without a baseline. Delete old artifacts of that name (or give "
                "`retention-days:` to actions/upload-artifact), or upload main's baseline under a name of its own.")


def find_baseline_artifact(artifacts: list[dict], branch: str, now: datetime) -> list[dict]:
    """The artifacts that may supply a baseline, newest first.

    Kept: not ``expired``; ``expires_at`` null or later than ``now``; a ``workflow_run`` whose
    ``head_branch`` is ``branch`` and whose ``head_repository_id`` equals its ``repository_id``
    (a fork's branch called ``main`` never supplies our baseline). Sorted by ``created_at``,
    newest first, missing or unreadable dates last, then by id (highest first) — GitHub does not
    document the list order, so it is not relied on. ``now`` must be timezone-aware.
    """
    if now.tzinfo is None:
        raise ValueError("now must be a timezone-aware datetime (e.g. datetime.now(timezone.utc))")
    kept: list[dict] = []
    for art in artifacts:
        if not isinstance(art, dict) or art.get("expired") is not False:
            continue
        if art.get("expires_at") is not None:
            expires = parse_time(art["expires_at"])
            if expires is None or expires <= now:
                continue
        run = art.get("workflow_run")
        if not isinstance(run, dict) or run.get("head_branch") != branch:
            continue
        repo_id, head_repo_id = run.get("repository_id"), run.get("head_repository_id")
        if repo_id is None or head_repo_id != repo_id:
            continue
        kept.append(art)

    def order(art: dict) -> tuple[int, float, int]:
        created = parse_time(art.get("created_at"))
        art_id = art.get("id") if isinstance(art.get("id"), int) else 0
        if created is None:
            return (1, 0.0, -art_id)
        return (0, -created.timestamp(), -art_id)

    return sorted(kept, key=order)


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "has an absolute path"
    if any(part == ".." for part in re.split(r"[\\/]", name)):
        return "has a '..' path that points outside the archive"
    mode = (info.external_attr >> 16) & 0xFFFF
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no Unix type recorded
        return "is not a regular file"
    if info.flag_bits & 0x1:
        return "is encrypted"
    return None


def safe_extract_json(
    zip_bytes: bytes,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    *,
    source: str = "zip archive",
) -> dict[str, bytes]:
    """Read the ``*.json`` members of a zip in memory, refusing anything suspicious.

    Every member is checked (absolute or ``..`` paths, symlinks, special files, encryption,
    duplicate names) even though only ``.json`` members are read. Sizes are checked twice: the
    declared ``file_size`` and the bytes actually inflated (a zip bomb can lie about the first).
    Nothing is written to disk. ``source`` names the archive in error messages.
    Returns {member name: bytes}; raises BaselineError.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(zip_bytes))
    except (zipfile.BadZipFile, OSError) as exc:
        raise BaselineError(f"{source}: not a readable zip file ({exc}).") from None
    with zf:
        infos = zf.infolist()
        _check_members(infos, source)
        out: dict[str, bytes] = {}
        total = 0
        for info in infos:
            if info.is_dir() or not info.filename.lower().endswith(".json"):
                continue
            if info.file_size > max_member_bytes:
                raise BaselineError(
                    f"{source}: member '{info.filename}' declares {info.file_size} bytes, over the"
                    f" {max_member_bytes}-byte limit per member."
                )
            out[info.filename] = _inflate(zf, info, source, max_member_bytes, (max_total_bytes, total))
            total += len(out[info.filename])
        return out


def _check_members(infos: list[zipfile.ZipInfo], source: str) -> None:
    """Every member, read or not: no absolute or ``..`` path, link, special file, encryption or twin."""
    if len(infos) > MAX_ZIP_MEMBERS:
        raise BaselineError(f"{source}: has {len(infos)} members, more than {MAX_ZIP_MEMBERS}.")
    seen: set[str] = set()
    for info in infos:
        problem = _member_problem(info)
        if problem:
            raise BaselineError(f"{source}: member '{info.filename}' {problem}; refusing to extract it.")
        if info.filename in seen:
            raise BaselineError(f"{source}: member '{info.filename}' appears twice.")
        seen.add(info.filename)


def _inflate(zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, max_member_bytes: int,
             budget: tuple[int, int]) -> bytes:
    """One member's bytes, counted as they inflate: past ``max_member_bytes``, or past the total
    ``budget`` = (limit, already read), it stops with BaselineError, whatever the member declared."""
    max_total, read = budget
    buf = bytearray()
    try:
        with zf.open(info) as fh:
            while chunk := fh.read(_CHUNK):
                buf.extend(chunk)
                if len(buf) > max_member_bytes:
                    raise BaselineError(
                        f"{source}: member '{info.filename}' inflates past the {max_member_bytes}-byte limit "
                        f"per member (it declared {info.file_size} bytes)."
                    )
                if read + len(buf) > max_total:
                    raise BaselineError(f"{source}: the JSON members inflate past the {max_total}-byte total limit.")
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        raise BaselineError(f"{source}: member '{info.filename}' is corrupt ({exc}).") from None
    return bytes(buf)


def fetch_baseline(
    client: GitHubClient,
    owner: str,
    repo: str,
    name: str,
    branch: str,
    now: datetime | None = None,
    *,
    member: str | None = None,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    on_notice: Callable[[str], None] | None = None,
) -> tuple[RunResult, dict] | None:
    """Download and read the newest usable baseline artifact: (its RunResult, the artifact).

    Candidates come from `find_baseline_artifact` (artifacts whose name is exactly ``name``), page
    by page (`_candidates`): the search stops at the first page that holds one that downloads, so
    a repository with thousands of artifacts costs one or two requests. A candidate that answers
    410 Gone is skipped for the next one (at most MAX_BASELINE_CANDIDATES are tried). Returns None
    when no candidate is left; past the client's page cap ``on_notice`` is told so (MSG_PAGE_CAP)
    and None is returned, the same as no baseline. The JSON member
    is the one whose file name is ``member`` if given, else the archive's only ``*.json`` member.
    The member is read by ``RunResult.from_json`` (as ``--baseline`` reads a file), named
    ``Baseline artifact '<name>' (id <id>), member '<file>'`` in messages. Raises BaselineError
    (naming the artifact's name and id) for an unsafe or unreadable archive or RunResult, and
    GithubError for any other API failure.
    """
    now = now or datetime.now(timezone.utc)
    for art in _candidates(client, (owner, repo, name, branch), now, on_notice):
        label = f"Baseline artifact '{name}' (id {art.get('id')})"
        try:
            data = client.download_artifact_zip(owner, repo, art["id"])
        except GithubError as exc:
            if exc.status == 410:
                log.info("%s is gone (410); trying the next one", label)
                continue
            raise
        except BaselineError as exc:
            raise BaselineError(f"{label}: {exc.message}", tip=exc.tip) from None
        members = safe_extract_json(
            data, max_member_bytes=max_member_bytes, max_total_bytes=max_total_bytes, source=label
        )
        chosen = _choose_member(members, member, label)
        try:
            result = RunResult.from_json(members[chosen], f"{label}, member '{chosen}'", error=BaselineError)
        except BaselineError as exc:
            raise BaselineError(exc.message, tip=TIP_REUPLOAD) from None
        return result, art
    return None


def _candidates(client: GitHubClient, where: tuple[str, str, str, str], now: datetime,
                on_notice: Callable[[str], None] | None) -> Iterator[dict]:
    """The usable artifacts of each page in turn, newest first within the page; the next page is
    read only when the caller asks for more (every candidate so far was gone)."""
    owner, repo, name, branch = where
    tried = 0
    try:
        for page in client.artifact_pages(owner, repo, name):
            listed = [a for a in page if isinstance(a, dict) and a.get("name") == name]
            for art in find_baseline_artifact(listed, branch, now):
                if tried == MAX_BASELINE_CANDIDATES:
                    return
                tried += 1
                yield art
    except PageLimitReached as exc:
        if on_notice is not None:
            on_notice(MSG_PAGE_CAP.format(pages=exc.pages, name=name, branch=branch))


def _choose_member(members: dict[str, bytes], member: str | None, label: str) -> str:
    if member is not None:
        named = [m for m in members if m.rsplit("/", 1)[-1] == member]
        if len(named) == 1:
            return named[0]
        if len(named) > 1:
            raise BaselineError(f"{label}: holds several files named '{member}': {sorted(named)}.")
    if len(members) == 1:
        return next(iter(members))
    if not members:
        raise BaselineError(
            f"{label}: holds no .json file.",
            tip="Upload the RunResult JSON written by `rageval baseline` as the artifact.",
        )
    raise BaselineError(
        f"{label}: holds several .json files {sorted(members)}; cannot tell which is the RunResult.",
        tip="Upload only the RunResult JSON, or name it in the action's configuration.",
    )
