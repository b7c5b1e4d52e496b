"""The action's inputs and the workflow event: read, validated, turned into a mode.

The runner exports ``with:`` inputs as ``INPUT_<NAME>`` (upper-cased, hyphens kept) and describes
the event in ``GITHUB_EVENT_NAME`` / ``GITHUB_EVENT_PATH`` / ``GITHUB_REF`` / ``GITHUB_SHA``. Only
this package reads them, from the ``env`` mapping it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.errors import ActionInputError, RagevalError, did_you_mean
from rageval.results import Shard

MODES = ("auto", "gate", "baseline", "verify", "merge")
PR_EVENTS = ("pull_request", "pull_request_target")
ALL_CASES = "all"
DEFAULT_GATE_SUBSET = "pr"

#: input name -> default when the input is absent or empty (action.yml declares the same).
INPUT_DEFAULTS: dict[str, str] = {
    "config": "rageval.yml",
    "mode": "auto",
    "github-token": "",
    "baseline-artifact": "rageval-baseline",
    "baseline-branch": "",
    "baseline-path": "",
    "subset": "",
    "repeats": "3",
    "comment": "true",
    "results-path": "rageval-results.json",
    "status-context": "",
    "skip": "false",
    "shard": "",
    "shards": "rageval-shards/**/*.json",
}

_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")
_ARTIFACT_NAME_RE = re.compile(r'^[^"\\:<>|*?\r\n/]+$')  # what actions/upload-artifact accepts

MSG_BAD_MODE = "Input 'mode' is {value!r}; use one of: auto, gate, baseline, verify, merge{hint}."
MSG_SHARD_MERGE = "Inputs 'shard' and 'mode: merge' go to different jobs: the matrix jobs run a shard, one more job merges."
MSG_BAD_REPEATS = "Input 'repeats' is {value!r}; it must be a whole number from 1 to 100 (runs used to measure noise)."
MSG_BAD_BOOL = ("Input '{name}' is {value!r}; it must be true or false (as in YAML: "
                "true | True | TRUE | false | False | FALSE).")
MSG_BAD_ARTIFACT = ("Input 'baseline-artifact' is {value!r}; an artifact name cannot be empty or contain "
                    "\" : < > | * ? \\ / or a line break.")
MSG_BAD_EVENT = "The event payload {path} (GITHUB_EVENT_PATH) is not readable JSON: {problem}."
MSG_BAD_STATUS = "Input 'status-context' is {length} characters long; keep it under 255."
def get_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """The value of action input ``name`` (kebab-case), stripped; ``default`` when absent or empty.

    The runner exports ``with: {github-token: …}`` as ``INPUT_GITHUB-TOKEN`` (upper-cased, spaces
    become underscores, hyphens kept); ``INPUT_GITHUB_TOKEN`` is accepted too (``docker run -e``
    and some shells cannot set a name with a hyphen).
    """
    key = "INPUT_" + name.replace(" ", "_").upper()
    value = env.get(key)
    if value is None or not value.strip():
        value = env.get(key.replace("-", "_"))
    if value is None or not value.strip():
        return default
    return value.strip()


@dataclass(frozen=True)
class Inputs:
    config: str
    mode: str
    token: str | None
    baseline_artifact: str
    baseline_branch: str | None
    baseline_path: str | None
    subset: str | None            # None: the mode's default (pr for gate, all cases otherwise)
    repeats: int
    comment: bool
    results_path: str
    status_context: str | None
    skip: bool = False            # true: nothing RAG-relevant changed; pass without evaluating
    shard: Shard | None = None    # run only this part of the cases (a matrix job)
    shards: str = INPUT_DEFAULTS["shards"]   # merge mode: a glob of the parts' RunResults

    def __repr__(self) -> str:  # never show the token
        shown = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "token"}
        return f"Inputs(token={'<set>' if self.token else None}, {shown})"


def _bool_input(env: Mapping[str, str], name: str) -> bool:
    value = get_input(env, name, INPUT_DEFAULTS[name])
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ActionInputError(MSG_BAD_BOOL.format(name=name, value=value))


def parse_inputs(env: Mapping[str, str]) -> Inputs:
    """Read and validate every input; raises ActionInputError naming the input and the fix."""
    def text(name: str) -> str:
        return get_input(env, name, INPUT_DEFAULTS[name])

    mode = text("mode")
    if mode not in MODES:
        raise ActionInputError(MSG_BAD_MODE.format(value=mode, hint=did_you_mean(mode, MODES)))
    raw_repeats = text("repeats")
    if not re.fullmatch(r"[0-9]{1,3}", raw_repeats) or not 1 <= int(raw_repeats) <= 100:
        raise ActionInputError(MSG_BAD_REPEATS.format(value=raw_repeats))
    artifact = text("baseline-artifact")
    if not _ARTIFACT_NAME_RE.match(artifact):
        raise ActionInputError(MSG_BAD_ARTIFACT.format(value=artifact))
    status = text("status-context") or None
    if status is not None and len(status) >= 255:
        raise ActionInputError(MSG_BAD_STATUS.format(length=len(status)))
    shard = None
    if text("shard"):
        try:
            shard = Shard.parse(text("shard"), what="Input 'shard'")
        except RagevalError as exc:
            raise ActionInputError(exc.message) from None
        if mode == "merge":
            raise ActionInputError(MSG_SHARD_MERGE)
    return Inputs(
        config=text("config"),
        mode=mode,
        token=text("github-token") or None,
        baseline_artifact=artifact,
        baseline_branch=text("baseline-branch") or None,
        baseline_path=text("baseline-path") or None,
        subset=text("subset") or None,
        repeats=int(raw_repeats),
        comment=_bool_input(env, "comment"),
        results_path=text("results-path"),
        status_context=status,
        skip=_bool_input(env, "skip"),
        shard=shard,
        shards=text("shards"),
    )


@dataclass(frozen=True)
class Event:
    """What the action needs from the workflow event."""

    name: str                     # GITHUB_EVENT_NAME
    ref: str | None               # refs/heads/main, refs/pull/7/merge …
    pr_number: int | None
    base_ref: str | None          # the PR's base branch, or the merge group's (merge_group.base_ref)
    head_sha: str | None          # the PR head commit (GITHUB_SHA is the merge commit on PRs), or
                                  # the merge group's head_sha
    sha: str | None               # GITHUB_SHA
    default_branch: str | None    # repository.default_branch
    fork: bool = False            # a pull request whose head is another repository (no secrets there)

    @property
    def branch(self) -> str | None:
        if self.ref and self.ref.startswith("refs/heads/"):
            return self.ref[len("refs/heads/"):]
        return None


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def read_event(env: Mapping[str, str]) -> Event:
    """Read GITHUB_EVENT_NAME / GITHUB_EVENT_PATH / GITHUB_REF / GITHUB_SHA."""
    payload: Any = {}
    path = env.get("GITHUB_EVENT_PATH")
    if path:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            payload = {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ActionInputError(MSG_BAD_EVENT.format(path=path, problem=exc)) from None
    if not isinstance(payload, dict):
        raise ActionInputError(MSG_BAD_EVENT.format(path=path, problem="not a JSON object"))
    number = _get(payload, "pull_request", "number")
    if number is None and "pull_request" in payload:
        number = payload.get("number")
    return Event(
        name=env.get("GITHUB_EVENT_NAME", ""),
        ref=env.get("GITHUB_REF") or _text(payload.get("ref")),
        pr_number=number if isinstance(number, int) and not isinstance(number, bool) else None,
        base_ref=(_text(_get(payload, "pull_request", "base", "ref")) or _branch(_get(payload, "merge_group", "base_ref"))
                  or env.get("GITHUB_BASE_REF") or None),
        head_sha=_text(_get(payload, "pull_request", "head", "sha")) or _text(_get(payload, "merge_group", "head_sha")),
        sha=env.get("GITHUB_SHA") or None,
        default_branch=_text(_get(payload, "repository", "default_branch")),
        fork=_from_fork(payload),
    )


def _from_fork(payload: dict) -> bool:
    """A pull request from a fork: ``head.repo.fork``, or a head repository other than the base's."""
    head, base = _get(payload, "pull_request", "head", "repo"), _get(payload, "pull_request", "base", "repo")
    if not isinstance(head, dict):
        return False
    if head.get("fork") is True:
        return True
    names = head.get("full_name"), base.get("full_name") if isinstance(base, dict) else None
    return all(isinstance(n, str) for n in names) and names[0] != names[1]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _branch(ref: Any) -> str | None:
    """``refs/heads/main`` → ``main`` (a merge group's ``base_ref`` is a full ref)."""
    ref = _text(ref)
    return ref[len("refs/heads/"):] or None if ref and ref.startswith("refs/heads/") else ref


def resolve_mode(mode: str, event: Event) -> str:
    """``auto``: pull_request(_target) → gate; push to the default branch → baseline; anything
    else (merge_group, release branches, schedule, workflow_dispatch) → verify."""
    if mode != "auto":
        return mode
    if event.name in PR_EVENTS:
        return "gate"
    if event.name == "push" and event.branch is not None and event.branch == event.default_branch:
        return "baseline"
    return "verify"


def comment_key(config: str) -> str:
    """The sticky-comment key for a config path: one comment per config, marker-safe."""
    key = re.sub(r"[^A-Za-z0-9_.:/-]", "_", config.replace("\\", "/"))
    while "--" in key:
        key = key.replace("--", "-")
    return key or "rageval"
