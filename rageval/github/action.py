"""The GitHub Action: turn the runner's environment into one gate, baseline or verify run.

``entrypoint.py`` calls ``main(os.environ)``. This module and ``entrypoint.py`` are the only
places that read ``INPUT_*`` / ``GITHUB_*`` variables, print workflow commands (``::error::``,
``::group::``, ``::add-mask::``) or choose the exit code. Everything is passed in explicitly
(``env``, the output streams, the clock), so the tests call ``main(env_dict)`` in-process.

Modes (input ``mode``; ``auto`` picks one from the event):

* ``gate`` (``pull_request`` / ``pull_request_target``): run the PR subset, fetch the baseline
  (``baseline-path``, else the newest ``baseline-artifact`` of the base branch), gate with
  re-runs, post the sticky PR comment ("running…" first, then the report), write the outputs.
* ``baseline`` (``push`` to the repository's default branch): run the whole golden set
  ``repeats`` times, write the RunResult to ``results-path`` for ``actions/upload-artifact``.
* ``verify`` (anything else, e.g. ``push`` to ``release/1.2``): the whole golden set, floors,
  zero-tolerance and the comparison with the default branch's baseline.

Exit codes: 0 passed (or baseline written), 1 blocked, 2 bad input or configuration,
3 internal error (a bug).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rageval.errors import GithubError, RagevalError

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "INPUT_DEFAULTS",
    "MODES",
    "ActionInputError",
    "Event",
    "Inputs",
    "comment_key",
    "get_input",
    "main",
    "parse_inputs",
    "read_event",
    "resolve_mode",
    "write_output",
]

EXIT_OK, EXIT_BLOCKED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
MODES = ("auto", "gate", "baseline", "verify")
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
}

_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")
_ARTIFACT_NAME_RE = re.compile(r'^[^"\\:<>|*?\r\n/]+$')  # what actions/upload-artifact accepts

MSG_BAD_MODE = "Input 'mode' is {value!r}; use one of: auto, gate, baseline, verify{hint}."
MSG_BAD_REPEATS = "Input 'repeats' is {value!r}; it must be a whole number from 1 to 100 (runs used to measure noise)."
MSG_BAD_BOOL = ("Input '{name}' is {value!r}; it must be true or false (as in YAML: "
                "true | True | TRUE | false | False | FALSE).")
MSG_BAD_ARTIFACT = ("Input 'baseline-artifact' is {value!r}; an artifact name cannot be empty or contain "
                    "\" : < > | * ? \\ / or a line break.")
MSG_BAD_STATUS = "Input 'status-context' is {length} characters long; keep it under 255."
MSG_NO_CONFIG = ("Config file {path} not found (input 'config' is {value!r}, resolved against the workspace "
                 "{workspace}).")
TIP_NO_CONFIG = ("Check out the repository first (`- uses: actions/checkout@v4`) and set `config:` to the path "
                 "of your rageval.yml relative to the repository root.")
MSG_BAD_EVENT = "The event payload {path} (GITHUB_EVENT_PATH) is not readable JSON: {problem}."
MSG_NO_TOKEN = "Input 'github-token' is empty, but {why} needs the GitHub API."
TIP_NO_TOKEN = "Leave `github-token` at its default (`${{ github.token }}`), or pass `baseline-path` to use a local file."
MSG_NO_REPOSITORY = "GITHUB_REPOSITORY is {value!r}; expected owner/repo (this runs inside GitHub Actions)."
MSG_NO_BASELINE = ("No baseline artifact '{name}' from branch '{branch}' of {repo} (none uploaded yet, all expired, "
                   "or only from forks). gate.missing_baseline is '{policy}'.")
MSG_COMMENT_DENIED = ("Could not post the PR comment (HTTP {status}): the token cannot write to this pull request "
                      "(a pull request from a fork gets a read-only token, or the job lacks "
                      "`permissions: pull-requests: write`). The report is in the job summary; the verdict is "
                      "unchanged.")
MSG_COMMENT_FAILED = "Could not post the PR comment: {error} The report is in the job summary; the verdict is unchanged."
MSG_STATUS_FAILED = ("Could not set the commit status '{context}': {error} Give the job "
                     "`permissions: statuses: write`; the verdict is unchanged.")
RUNNING_BODY = ("### ⏳ {title}: evaluation running…\n\n"
                "Running {n} golden case{s}{subset} with `{config}`{baseline}. This comment is replaced with the "
                "report when the run ends{link}.\n")
ERROR_BODY = ("### ⚠️ {title}: the evaluation did not finish\n\n```\n{message}\n```\n\n"
              "Exit code {code}; see the job log{link}.\n")


class ActionInputError(RagevalError):
    """An action input or the runner environment is invalid (exit code 2)."""


# ---------------------------------------------------------------------- inputs and event


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
    from rageval.errors import did_you_mean

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
    )


@dataclass(frozen=True)
class Event:
    """What the action needs from the workflow event."""

    name: str                     # GITHUB_EVENT_NAME
    ref: str | None               # refs/heads/main, refs/pull/7/merge …
    pr_number: int | None
    base_ref: str | None          # the PR's base branch
    head_sha: str | None          # the PR head commit (GITHUB_SHA is the merge commit on PRs)
    sha: str | None               # GITHUB_SHA
    default_branch: str | None    # repository.default_branch

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
    number = _get(payload, "pull_request", "number")
    if number is None and "pull_request" in payload:
        number = payload.get("number")
    return Event(
        name=env.get("GITHUB_EVENT_NAME", ""),
        ref=env.get("GITHUB_REF") or (payload.get("ref") if isinstance(payload, dict) else None),
        pr_number=number if isinstance(number, int) and not isinstance(number, bool) else None,
        base_ref=_get(payload, "pull_request", "base", "ref") or env.get("GITHUB_BASE_REF") or None,
        head_sha=_get(payload, "pull_request", "head", "sha"),
        sha=env.get("GITHUB_SHA") or None,
        default_branch=_get(payload, "repository", "default_branch"),
    )


def resolve_mode(mode: str, event: Event) -> str:
    """``auto``: pull_request(_target) → gate; push to the default branch → baseline; else verify."""
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


# ---------------------------------------------------------------------- runner file commands


class Console:
    """Workflow commands and log lines on ``out``; every line passes through ``redact``."""

    def __init__(self, out: TextIO, secrets: list[str]) -> None:
        self.out = out
        self.secrets = secrets

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _command(self, name: str, message: str) -> None:
        data = self.redact(message).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        self.out.write(f"::{name}::{data}\n")
        self.out.flush()

    def mask(self, value: str) -> None:
        # the runner swallows this line and hides the value in every later log line
        for line in value.splitlines() or [value]:
            if line.strip():
                self.out.write(f"::add-mask::{line}\n")
        self.out.flush()

    def error(self, message: str) -> None:
        self._command("error title=rag-eval-gate", message)

    def warning(self, message: str) -> None:
        self._command("warning title=rag-eval-gate", message)

    def notice(self, message: str) -> None:
        self._command("notice title=rag-eval-gate", message)

    def log(self, message: str) -> None:
        # a log line must never start a workflow command by accident
        for line in self.redact(message).splitlines() or [""]:
            self.out.write(("  " + line if line.startswith("::") else line) + "\n")
        self.out.flush()

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self.out.write(f"::group::{self.redact(title)}\n")
        self.out.flush()
        try:
            yield
        finally:
            self.out.write("::endgroup::\n")
            self.out.flush()


def write_output(path: str | os.PathLike[str], name: str, value: str) -> None:
    """Append ``name`` to a $GITHUB_OUTPUT file, multiline-safe (``name<<DELIM``)."""
    while True:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter not in value and delimiter not in name:
            break
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def _append_text(path: str | os.PathLike[str], text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


class _Progress:
    """A log line at every 25% of the cases."""

    def __init__(self, console: Console, label: str) -> None:
        self.console, self.label, self.shown = console, label, -1

    def __call__(self, done: int, total: int) -> None:
        quarter = 4 * done // total if total else 4
        if quarter > self.shown:
            self.shown = quarter
            self.console.log(f"{self.label}: {done}/{total} cases")


# ---------------------------------------------------------------------- the run


@dataclass
class _Context:
    env: Mapping[str, str]
    inputs: Inputs
    event: Event
    mode: str
    console: Console
    workspace: Path
    now: datetime | None
    client_factory: Callable[..., Any] | None
    _client: Any = None
    comment_enabled: bool = False
    comment_key: str = ""

    @property
    def repository(self) -> tuple[str, str]:
        value = self.env.get("GITHUB_REPOSITORY", "")
        owner, _, repo = value.partition("/")
        if not owner or not repo or "/" in repo:
            raise ActionInputError(MSG_NO_REPOSITORY.format(value=value))
        return owner, repo

    def client(self, why: str) -> Any:
        if self._client is None:
            if not self.inputs.token:
                raise ActionInputError(MSG_NO_TOKEN.format(why=why), tip=TIP_NO_TOKEN)
            from rageval.github.client import GitHubClient

            factory = self.client_factory or GitHubClient
            api_url = self.env.get("GITHUB_API_URL") or "https://api.github.com"
            self._client = factory(self.inputs.token, api_url=api_url)
        return self._client

    def path(self, value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else self.workspace / p

    def run_url(self) -> str | None:
        server, repo, run = (self.env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
        return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None


def _app_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the evaluated app and the model client see: no action inputs (the token)."""
    return {k: v for k, v in env.items() if not k.startswith("INPUT_")}


def _load(ctx: _Context) -> Any:
    from rageval.config import load_config

    path = ctx.path(ctx.inputs.config)
    if not path.is_file():
        raise ActionInputError(MSG_NO_CONFIG.format(path=path, value=ctx.inputs.config, workspace=ctx.workspace),
                               tip=TIP_NO_CONFIG)
    cfg = load_config(path)
    key_value = ctx.env.get(cfg.llm.api_key_env)
    if key_value:
        ctx.console.secrets.append(key_value)
        ctx.console.mask(key_value)
    return cfg


def _subset(ctx: _Context, cfg: Any) -> str | None:
    """The subset to run: the input; else ``pr`` in gate mode when cases are tagged so; else all."""
    chosen = ctx.inputs.subset
    if chosen == ALL_CASES:
        return None
    if chosen is not None:
        return chosen
    if ctx.mode != "gate":
        return None
    from rageval.golden.set import load_golden

    golden = load_golden(cfg.golden)
    if any(DEFAULT_GATE_SUBSET in c.tags for c in golden.cases):
        return DEFAULT_GATE_SUBSET
    ctx.console.notice(f"No golden case is tagged '{DEFAULT_GATE_SUBSET}', so the gate runs all "
                       f"{len(golden.cases)} cases. Tag the cases to run on pull requests with "
                       f"`tags: [{DEFAULT_GATE_SUBSET}]`, or set `subset:`.")
    return None


def _baseline(ctx: _Context, cfg: Any) -> dict[str, Any] | None:
    from rageval.pipeline.runner import check_result, load_result

    if ctx.inputs.baseline_path:
        path = ctx.path(ctx.inputs.baseline_path)
        ctx.console.log(f"baseline: {ctx.inputs.baseline_path}")
        return load_result(path)
    from rageval.github.client import fetch_baseline

    owner, repo = ctx.repository
    branch = (ctx.inputs.baseline_branch
              or (ctx.event.base_ref if ctx.mode == "gate" else None)
              or ctx.event.default_branch or "main")
    name = ctx.inputs.baseline_artifact
    with ctx.console.group(f"Fetching baseline artifact '{name}' from branch '{branch}'"):
        found = fetch_baseline(ctx.client("fetching the baseline artifact"), owner, repo, name, branch, now=ctx.now)
        if found is None:
            ctx.console.notice(MSG_NO_BASELINE.format(name=name, branch=branch, repo=f"{owner}/{repo}",
                                                      policy=cfg.gate.missing_baseline))
            return None
        result, art = found
        where = f"baseline artifact '{name}' (id {art.get('id')}, {art.get('created_at')})"
        ctx.console.log(f"baseline: {where}, commit {(art.get('workflow_run') or {}).get('head_sha')}")
        return check_result(result, where)


def _comment(ctx: _Context, body: str) -> None:
    """Create or update the sticky comment; a refusal becomes a warning and stops commenting."""
    if not ctx.comment_enabled or ctx.event.pr_number is None:
        return
    from rageval.github.client import MAX_COMMENT_CHARS, comment_marker, upsert_comment

    room = MAX_COMMENT_CHARS - len(comment_marker(ctx.comment_key)) - 1
    if len(body) > room:
        body = body[: room - 40].rstrip() + "\n\n…(cut to fit GitHub's comment limit)\n"
    owner, repo = ctx.repository
    try:
        upsert_comment(ctx.client("the PR comment"), owner, repo, ctx.event.pr_number, ctx.comment_key, body)
    except GithubError as exc:
        ctx.comment_enabled = False
        status = getattr(exc, "status", None)
        if status in (403, 404):
            ctx.console.warning(MSG_COMMENT_DENIED.format(status=status))
        else:
            ctx.console.warning(MSG_COMMENT_FAILED.format(error=exc.message))


def _status(ctx: _Context, state: str, description: str) -> None:
    context = ctx.inputs.status_context
    sha = ctx.event.head_sha or ctx.event.sha
    if not context or not sha:
        return
    owner, repo = ctx.repository
    try:
        ctx.client("the commit status").create_commit_status(owner, repo, sha, state, context, description,
                                                             target_url=ctx.run_url())
        ctx.console.log(f"commit status '{context}' on {sha[:12]}: {state}")
    except GithubError as exc:
        ctx.console.warning(MSG_STATUS_FAILED.format(context=context, error=exc.message))


def _report_path(results_path: str) -> str:
    p = Path(results_path)
    return str(p.with_suffix(".md") if p.suffix else p.with_name(p.name + ".md"))


def _finish(ctx: _Context, *, verdict: str, markdown: str, result: dict[str, Any],
            pass_to_fail: list[str]) -> None:
    """Write results, the report file, the step summary and the outputs."""
    from rageval.pipeline.runner import write_json, write_text

    results_rel = ctx.inputs.results_path
    report_rel = _report_path(results_rel)
    write_json(ctx.path(results_rel), result)
    write_text(ctx.path(report_rel), markdown)
    summary = ctx.env.get("GITHUB_STEP_SUMMARY")
    if summary:
        _append_text(summary, ctx.console.redact(markdown))
    outputs = ctx.env.get("GITHUB_OUTPUT")
    if outputs:
        for name, value in (("verdict", verdict), ("results", results_rel), ("report", report_rel),
                            ("pass-to-fail", ",".join(pass_to_fail))):
            write_output(outputs, name, ctx.console.redact(value))
    ctx.console.log(f"wrote {results_rel} and {report_rel}")


def _run_gate(ctx: _Context) -> int:
    """gate and verify: run the subset, compare with the baseline, report, exit 0 or 1."""
    from rageval.gate import decide as gate
    from rageval.gate import report
    from rageval.pipeline.runner import prepare

    cfg = _load(ctx)
    subset = _subset(ctx, cfg)
    ev = prepare(cfg, subset=subset, env=_app_env(ctx.env))
    n = len(ev.golden.cases)
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    link = f" ([job log]({ctx.run_url()}))" if ctx.run_url() else ""
    baseline_note = (f" against `{ctx.inputs.baseline_path}`" if ctx.inputs.baseline_path
                     else f" against the `{ctx.inputs.baseline_artifact}` artifact")
    _comment(ctx, RUNNING_BODY.format(title=cfg.report.title, n=n, s="" if n == 1 else "s",
                                      subset=f" (subset `{subset}`)" if subset else "",
                                      config=ctx.inputs.config, baseline=baseline_note, link=link))
    try:
        baseline = _baseline(ctx, cfg)
        with ctx.console.group(f"rageval {ctx.mode}: {n} cases{f' (subset {subset})' if subset else ''}"):
            candidate = ev.run(progress=_Progress(ctx.console, f"rageval {ctx.mode}"))

            def rerun(case_ids: list[str] | None) -> dict[str, Any]:
                ctx.console.log(f"re-running {'all cases' if case_ids is None else ', '.join(case_ids)}"
                                " with caches bypassed")
                return ev.run(fresh=True, case_ids=case_ids, previous=candidate)

            verdict, baseline, note = gate.decide(cfg, baseline, candidate,
                                                  subset_ids=[c.id for c in ev.golden.cases], rerun=rerun)
            if note:
                ctx.console.notice(note)
        markdown = report.render_markdown(verdict, baseline, candidate, cfg.report)
        line = report.render_summary_line(verdict, title=cfg.report.title)
    except Exception as exc:
        if isinstance(exc, RagevalError):
            message, code = exc.message, exc.exit_code
        else:
            message, code = f"internal error in rageval: {type(exc).__name__} (a bug)", EXIT_INTERNAL
        _comment(ctx, ERROR_BODY.format(title=cfg.report.title, message=ctx.console.redact(message),
                                        code=code, link=link))
        raise
    ctx.console.log(line)
    for reason in verdict.reasons:
        ctx.console.log(f"  {'BLOCK' if reason.blocking else 'note '} {reason.message}")
    _finish(ctx, verdict=verdict.verdict, markdown=markdown, result=candidate,
            pass_to_fail=list(verdict.pass_to_fail))
    _comment(ctx, markdown)
    _status(ctx, "failure" if verdict.blocked else "success", line)
    if verdict.blocked:
        ctx.console.error(line)
        return EXIT_BLOCKED
    return EXIT_OK


def _run_baseline(ctx: _Context) -> int:
    """baseline: run every case ``repeats`` times and write the RunResult for upload."""
    from rageval.cli import format_noise, format_summary
    from rageval.pipeline.runner import prepare, run_repeats

    cfg = _load(ctx)
    subset = None if ctx.inputs.subset in (None, ALL_CASES) else ctx.inputs.subset
    ev = prepare(cfg, subset=subset, env=_app_env(ctx.env))
    with ctx.console.group(f"rageval baseline: {len(ev.golden.cases)} cases × {ctx.inputs.repeats} repeats"):
        result = run_repeats(ev, ctx.inputs.repeats, progress=_Progress(ctx.console, "rageval baseline"))
    table = format_summary(result)
    noise_line = format_noise(result)
    ctx.console.log(table)
    ctx.console.log(noise_line)
    golden = result["golden"]
    markdown = (f"### {cfg.report.title}: baseline\n\n"
                f"Golden set `{golden['name']}` v{golden['version']}, config `{ctx.inputs.config}`. "
                f"Upload `{ctx.inputs.results_path}` with `actions/upload-artifact` as "
                f"`{ctx.inputs.baseline_artifact}` so pull requests compare against it.\n\n"
                f"```\n{table}\n```\n\n{noise_line}\n")
    _finish(ctx, verdict="none", markdown=markdown, result=result, pass_to_fail=[])
    return EXIT_OK


def main(env: Mapping[str, str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         now: datetime | None = None, client_factory: Callable[..., Any] | None = None) -> int:
    """Run the action with ``env`` as the environment; returns the exit code.

    ``client_factory(token, api_url=…)`` builds the GitHub client (default
    `rageval.github.client.GitHubClient`); ``now`` is the clock for artifact expiry (default: now).
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    token = get_input(env, "github-token") or None
    console = Console(out, [token] if token else [])
    if token:
        console.mask(token)
    if env is os.environ:
        env = dict(env)  # a snapshot for this run; os.environ itself loses the token below
        # the evaluated app (a `command` app runs the user's code) must not inherit the token
        for key in [k for k in os.environ if k.upper().replace("-", "_") == "INPUT_GITHUB_TOKEN"]:
            del os.environ[key]
    started = time.monotonic()
    try:
        inputs = parse_inputs(env)
        event = read_event(env)
        mode = resolve_mode(inputs.mode, event)
        workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
        ctx = _Context(env, inputs, event, mode, console, workspace, now, client_factory)
        why = f"mode {mode}" + (f" (auto: {event.name or 'no'} event" if inputs.mode == "auto" else "")
        if inputs.mode == "auto":
            why += f" on {event.branch})" if event.branch else ")"
        console.log(f"rag-eval-gate: {why}, config {inputs.config}")
        code = _run_baseline(ctx) if mode == "baseline" else _run_gate(ctx)
        console.log(f"done in {time.monotonic() - started:.1f} s, exit code {code}")
        return code
    except RagevalError as exc:
        message = exc.message + (f"\nTIP {exc.tip}" if exc.tip else "")
        console.error(message)
        return exc.exit_code
    except KeyboardInterrupt:
        console.error("interrupted")
        return 130
    except Exception:  # noqa: BLE001 - a bug: show it (redacted), never as "blocked" (1)
        err.write(console.redact(traceback.format_exc()))
        err.flush()
        console.error("Internal error in rageval (a bug); the traceback is in the log above. Please report it.")
        return EXIT_INTERNAL
