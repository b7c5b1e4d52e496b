"""The GitHub Action: turn the runner's environment into one gate, baseline or verify run.

``entrypoint.py`` calls ``main(os.environ)``. This package and ``entrypoint.py`` are the only
places that read ``INPUT_*`` / ``GITHUB_*`` variables, print workflow commands (``::error::``,
``::group::``, ``::add-mask::``) or choose the action's exit code. Everything is passed in
explicitly (``env``, the output streams, the clock), so the tests call ``main(env_dict)`` in-process.
The decision itself is ``rageval.flow``'s, the same code path as `rageval gate`; this module adds
only what is GitHub's: inputs, the baseline artifact, the comment, the commit status, the outputs.

Modes (input ``mode``; ``auto`` picks one from the event):

* ``gate`` (``pull_request`` / ``pull_request_target``): run the PR subset, fetch the baseline
  (``baseline-path``, else the newest ``baseline-artifact`` of the base branch), gate with
  re-runs, post the sticky PR comment ("running…" first, then the report), write the outputs.
* ``baseline`` (``push`` to the repository's default branch): run the whole golden set
  ``repeats`` times, write the RunResult to ``results-path`` for ``actions/upload-artifact``.
* ``verify`` (anything else: ``merge_group``, ``push`` to ``release/1.2``, ``schedule``,
  ``workflow_dispatch``): the whole golden set, floors, zero-tolerance and the comparison with
  the baseline of the base branch (the merge group's), else the default branch (from the
  payload, or ``GET /repos/{owner}/{repo}`` when the payload has none).
* input ``shard: i/N`` (a ``strategy.matrix`` job): run only that part of the cases and write its
  RunResult; ``merge``: join the parts (input ``shards``, a glob) with ``rageval.shards`` and
  gate the whole as ``verify`` does.

The Docker image (``entrypoint.py``) and the native mode (``native/action.yml``, the job's own
Python) both call ``main``: one code path decides and reports. The commit status (input
``status-context``) is ``pending`` from the start, ``error`` on exit 2 or 3.

Exit codes: 0 passed (or baseline written), 1 blocked, 2 bad input or configuration,
3 internal error (a bug).
"""

from __future__ import annotations

import glob
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rageval import flow
from rageval.config import load_config
from rageval.errors import (
    EXIT_BLOCKED,
    EXIT_INTERNAL,
    EXIT_OK,
    ActionInputError,
    BaselineError,
    GithubError,
    RagevalError,
)
from rageval.files import to_json, write_text
from rageval.gate import terminal
from rageval.github.baseline import fetch_baseline
from rageval.github.client import GitHubClient
from rageval.github.comment import MAX_COMMENT_CHARS, comment_marker, upsert_comment
from rageval.github.inputs import (
    ALL_CASES,
    DEFAULT_GATE_SUBSET,
    Event,
    Inputs,
    comment_key,
    get_input,
    parse_inputs,
    read_event,
    resolve_mode,
)
from rageval.github.status import StatusReporter, status_reporter
from rageval.github.workflow import Console, Progress, append_text, write_output
from rageval.golden.set import GoldenSet, load_golden
from rageval.pipeline.runner import Evaluation, prepare
from rageval.results import RunResult, load_result
from rageval.settings import Config
from rageval.shards import merge as merge_shards

MSG_NO_CONFIG = ("Config file {path} not found (input 'config' is {value!r}, resolved against the workspace "
                 "{workspace}).")
TIP_NO_CONFIG = ("Check out the repository first (`- uses: actions/checkout@v4`) and set `config:` to the path "
                 "of your rageval.yml relative to the repository root.")
MSG_NO_TOKEN = "Input 'github-token' is empty, but {why} needs the GitHub API."
TIP_NO_TOKEN = "Leave `github-token` at its default (`${{ github.token }}`), or pass `baseline-path` to use a local file."
MSG_NO_REPOSITORY = "GITHUB_REPOSITORY is {value!r}; expected owner/repo (this runs inside GitHub Actions)."
MSG_NO_BASELINE = ("No baseline artifact '{name}' from branch '{branch}' of {repo} (none uploaded yet, all expired, "
                   "or only from forks). gate.missing_baseline is '{policy}'. The baseline job is missing or has "
                   "not run yet: on a push to {branch}, run this action with `mode: baseline`, then "
                   "`actions/upload-artifact` with `name: {name}` and `path: ${{{{ steps.<id>.outputs.results }}}}` "
                   "— the workflow to copy is in {docs}.")
MSG_NO_SHARDS = ("Input 'shards' is {pattern!r}: no file matches it in {workspace}. Download the shard jobs' "
                 "artifacts first (`actions/download-artifact` with `pattern:` and `path:`), then point `shards` at "
                 "their RunResults.")
DOCS_FALLBACK = "docs/action.md of rag-eval-gate"
MSG_BAD_DEFAULT_BRANCH = "GitHub API GET /repos/{repo} returned no default_branch; set the input `baseline-branch`."
MSG_COMMENT_DENIED = ("Could not post the PR comment (HTTP {status}): the token cannot write to this pull request "
                      "(a pull request from a fork gets a read-only token, or the job lacks "
                      "`permissions: pull-requests: write`). The report is in the job summary; the verdict is "
                      "unchanged.")
MSG_COMMENT_FAILED = "Could not post the PR comment: {error} The report is in the job summary; the verdict is unchanged."
RUNNING_BODY = ("### ⏳ {title}: evaluation running…\n\n"
                "Running {n} golden case{s}{subset} with `{config}`{baseline}. This comment is replaced with the "
                "report when the run ends{link}.\n")
ERROR_BODY = ("### ⚠️ {title}: the evaluation did not finish\n\n```\n{message}\n```\n\n"
              "Exit code {code}; see the job log{link}.\n")


@dataclass
class _Context:
    env: Mapping[str, str]
    inputs: Inputs
    event: Event
    mode: str
    console: Console
    workspace: Path
    now: datetime | None
    get_client: Callable[[], Any]
    status: StatusReporter | None = None
    comment_enabled: bool = False
    comment_key: str = ""
    comment_logins: tuple[str, ...] = ()    # our own login, once a comment we posted tells it

    @property
    def repository(self) -> tuple[str, str]:
        value = self.env.get("GITHUB_REPOSITORY", "")
        owner, _, repo = value.partition("/")
        if not owner or not repo or "/" in repo:
            raise ActionInputError(MSG_NO_REPOSITORY.format(value=value))
        return owner, repo

    def client(self, why: str) -> Any:
        if not self.inputs.token:
            raise ActionInputError(MSG_NO_TOKEN.format(why=why), tip=TIP_NO_TOKEN)
        return self.get_client()

    def path(self, value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else self.workspace / p

    def run_url(self) -> str | None:
        server, repo, run = (self.env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
        return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None

    def link(self) -> str:
        url = self.run_url()
        return f" ([job log]({url}))" if url else ""

    def docs_url(self) -> str:
        server, repo = self.env.get("GITHUB_SERVER_URL"), self.env.get("GITHUB_ACTION_REPOSITORY")
        if not server or not repo:
            return DOCS_FALLBACK
        return f"{server}/{repo}/blob/{self.env.get('GITHUB_ACTION_REF') or 'HEAD'}/docs/action.md"

    def set_status(self, state: str, description: str) -> None:
        if self.status is not None:
            self.status.set(state, description)


#: what the evaluated app and the model client never see: the action's inputs (the token among
#: them), the job's token and the runner's own service credentials (artifacts, cache, OIDC).
HIDDEN_FROM_APP = ("GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
                   "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_RESULTS_URL", "ACTIONS_CACHE_URL")


def app_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the evaluated app and the model client see (see HIDDEN_FROM_APP)."""
    return {k: v for k, v in env.items() if not k.startswith("INPUT_") and k not in HIDDEN_FROM_APP}


def redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    """Every string (keys too) of a JSON value passed through ``redact``."""
    if isinstance(value, dict):
        return {redact(str(k)): redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v, redact) for v in value]
    return redact(value) if isinstance(value, str) else value


def _load(ctx: _Context) -> Config:
    path = ctx.path(ctx.inputs.config)
    if not path.is_file():
        raise ActionInputError(MSG_NO_CONFIG.format(path=path, value=ctx.inputs.config, workspace=ctx.workspace),
                               tip=TIP_NO_CONFIG)
    cfg = load_config(path)
    key_value = ctx.env.get(cfg.llm.api_key_env)
    if key_value:
        ctx.console.add_secret(key_value)
    return cfg


def _subset(ctx: _Context, golden: GoldenSet) -> str | None:
    """The subset to run: the input; else ``pr`` in gate mode when cases are tagged so; else all."""
    chosen = ctx.inputs.subset
    if chosen == ALL_CASES:
        return None
    if chosen is not None:
        return chosen
    if ctx.mode != "gate":
        return None
    if any(DEFAULT_GATE_SUBSET in c.tags for c in golden.cases):
        return DEFAULT_GATE_SUBSET
    ctx.console.notice(f"No golden case is tagged '{DEFAULT_GATE_SUBSET}', so the gate runs all "
                       f"{len(golden.cases)} cases. Tag the cases to run on pull requests with "
                       f"`tags: [{DEFAULT_GATE_SUBSET}]`, or set `subset:`.")
    return None


def _baseline(ctx: _Context, cfg: Config) -> RunResult | None:
    if ctx.inputs.baseline_path:
        ctx.console.log(f"baseline: {ctx.inputs.baseline_path}")
        return load_result(ctx.path(ctx.inputs.baseline_path), BaselineError)
    owner, repo = ctx.repository
    branch = ctx.inputs.baseline_branch or ctx.event.base_ref or ctx.event.default_branch or _default_branch(ctx)
    name = ctx.inputs.baseline_artifact
    with ctx.console.group(f"Fetching baseline artifact '{name}' from branch '{branch}'"):
        found = fetch_baseline(ctx.client("fetching the baseline artifact"), owner, repo, name, branch, now=ctx.now)
        if found is None:
            ctx.console.notice(MSG_NO_BASELINE.format(name=name, branch=branch, repo=f"{owner}/{repo}",
                                                      policy=cfg.gate.missing_baseline, docs=ctx.docs_url()))
            return None
        result, art = found
        ctx.console.log(f"baseline: artifact '{name}' (id {art.get('id')}, {art.get('created_at')}), "
                        f"commit {(art.get('workflow_run') or {}).get('head_sha')}")
        return result


def _default_branch(ctx: _Context) -> str:
    """The repository's default branch from the API, for events whose payload lacks it (schedule)."""
    owner, repo = ctx.repository
    data = ctx.client("finding the repository's default branch").get_repo(owner, repo)
    branch = data.get("default_branch") if isinstance(data, dict) else None
    if not isinstance(branch, str) or not branch:
        raise GithubError(MSG_BAD_DEFAULT_BRANCH.format(repo=f"{owner}/{repo}"))
    ctx.console.log(f"default branch of {owner}/{repo} (from the API): {branch}")
    return branch


def _comment(ctx: _Context, body: str) -> None:
    """Create or update the sticky comment; a refusal becomes a warning and stops commenting."""
    if not ctx.comment_enabled or ctx.event.pr_number is None:
        return
    body = ctx.console.redact(body)
    room = MAX_COMMENT_CHARS - len(comment_marker(ctx.comment_key)) - 1
    if len(body) > room:
        body = body[: room - 40].rstrip() + "\n\n…(cut to fit GitHub's comment limit)\n"
    owner, repo = ctx.repository
    try:
        posted = upsert_comment(ctx.client("the PR comment"), owner, repo, ctx.event.pr_number, ctx.comment_key,
                                body, logins=ctx.comment_logins)
        login = (posted.get("user") or {}).get("login") if isinstance(posted, dict) else None
        if isinstance(login, str) and login not in ctx.comment_logins:
            ctx.comment_logins += (login,)
    except GithubError as exc:
        ctx.comment_enabled = False
        status = getattr(exc, "status", None)
        if status in (403, 404):
            ctx.console.warning(MSG_COMMENT_DENIED.format(status=status))
        else:
            ctx.console.warning(MSG_COMMENT_FAILED.format(error=exc.message))


def _report_path(results_path: str) -> str:
    p = Path(results_path)
    return str(p.with_suffix(".md") if p.suffix else p.with_name(p.name + ".md"))


def _finish(ctx: _Context, *, verdict: str, markdown: str, result: RunResult, pass_to_fail: list[str]) -> None:
    """Write results, the report file, the step summary and the outputs."""
    results_rel = ctx.inputs.results_path
    report_rel = _report_path(results_rel)
    markdown = ctx.console.redact(markdown)   # a secret a model echoed stays out of every file
    data = redact_json(result.to_dict(), ctx.console.redact)
    # as write_json writes it; never through a link (the checkout is the pull request's: rageval.files)
    write_text(ctx.path(results_rel), to_json(data, compact=result.compact_json), links=False)
    write_text(ctx.path(report_rel), markdown, links=False)
    summary = ctx.env.get("GITHUB_STEP_SUMMARY")
    if summary:
        append_text(summary, markdown)
    outputs = ctx.env.get("GITHUB_OUTPUT")
    if outputs:
        for name, value in (("verdict", verdict), ("results", results_rel), ("report", report_rel),
                            ("pass-to-fail", ",".join(pass_to_fail))):
            write_output(outputs, name, ctx.console.redact(value))
    ctx.console.log(f"wrote {results_rel} and {report_rel}")


def _running_body(ctx: _Context, cfg: Config, n: int, subset: str | None) -> str:
    baseline_note = (f" against `{ctx.inputs.baseline_path}`" if ctx.inputs.baseline_path
                     else f" against the `{ctx.inputs.baseline_artifact}` artifact")
    return RUNNING_BODY.format(title=cfg.report.title, n=n, s="" if n == 1 else "s",
                               subset=f" (subset `{subset}`)" if subset else "",
                               config=ctx.inputs.config, baseline=baseline_note, link=ctx.link())


def _decide(ctx: _Context, cfg: Config, ev: Evaluation, subset: str | None) -> flow.GateOutcome:
    n = len(ev.golden.cases)
    baseline = _baseline(ctx, cfg)
    with ctx.console.group(f"rageval {ctx.mode}: {n} cases{f' (subset {subset})' if subset else ''}"):
        outcome = flow.gate(cfg, baseline, evaluation=ev, progress=Progress(ctx.console, f"rageval {ctx.mode}"),
                            on_rerun=lambda ids: ctx.console.log(
                                f"re-running {'all cases' if ids is None else ', '.join(ids)} with caches bypassed"))
    for note in outcome.notes:
        ctx.console.notice(note)
    return outcome


def _run_gate(ctx: _Context) -> int:
    """gate and verify: run the subset, compare with the baseline, report, exit 0 or 1."""
    cfg = _load(ctx)
    golden = load_golden(cfg.golden)
    subset = _subset(ctx, golden)
    ev = prepare(cfg, subset=subset, env=app_env(ctx.env), golden=golden)
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    _comment(ctx, _running_body(ctx, cfg, len(ev.golden.cases), subset))
    try:
        outcome = _decide(ctx, cfg, ev, subset)
    except Exception as exc:
        if isinstance(exc, RagevalError):
            message, code = exc.message, exc.exit_code
        else:
            message, code = f"internal error in rageval: {type(exc).__name__} (a bug)", EXIT_INTERNAL
        _comment(ctx, ERROR_BODY.format(title=cfg.report.title, message=ctx.console.redact(message),
                                        code=code, link=ctx.link()))
        raise
    return _report(ctx, outcome)


def _report(ctx: _Context, outcome: flow.GateOutcome) -> int:
    """The verdict in the log, the files, the comment and the status; the exit code."""
    verdict = outcome.verdict
    ctx.console.log(outcome.line)
    for reason in verdict.reasons:
        ctx.console.log(f"  {'BLOCK' if reason.blocking else 'note '} {reason.message}")
    _finish(ctx, verdict=verdict.verdict, markdown=outcome.markdown, result=outcome.candidate,
            pass_to_fail=list(verdict.pass_to_fail))
    _comment(ctx, outcome.markdown)
    ctx.set_status("failure" if verdict.blocked else "success", outcome.line)
    if verdict.blocked:
        ctx.console.error(outcome.line)
        return EXIT_BLOCKED
    return EXIT_OK


def _run_shard(ctx: _Context) -> int:
    """input shard (a matrix job): run that part of the subset and write its RunResult; no gate."""
    cfg, shard = _load(ctx), ctx.inputs.shard
    golden = load_golden(cfg.golden)
    subset = _subset(ctx, golden)
    ev = prepare(cfg, subset=subset, env=app_env(ctx.env), golden=golden, shard=shard)
    with ctx.console.group(f"rageval shard {shard} of {len(ev.golden.cases)} cases"):
        result = ev.run(progress=Progress(ctx.console, f"rageval shard {shard}"))
    table = terminal.render_run_table(result)
    ctx.console.log(table)
    markdown = (f"### {cfg.report.title}: shard {shard}\n\n{len(result.cases)} of {len(ev.golden.cases)} cases. "
                f"Upload `{ctx.inputs.results_path}` with `actions/upload-artifact`; one more job joins the parts "
                f"(`mode: merge`) and gates the whole.\n\n```\n{table}\n```\n")
    _finish(ctx, verdict="none", markdown=markdown, result=result, pass_to_fail=[])
    return EXIT_OK


def _run_merge(ctx: _Context) -> int:
    """merge: join the parts of a sharded run (input shards), then gate the whole as verify does."""
    cfg = _load(ctx)
    files = sorted(Path(p) for p in glob.glob(str(ctx.path(ctx.inputs.shards)), recursive=True) if Path(p).is_file())
    if not files:
        raise ActionInputError(MSG_NO_SHARDS.format(pattern=ctx.inputs.shards, workspace=ctx.workspace))
    with ctx.console.group(f"rageval merge: {len(files)} parts"):
        merged = merge_shards([(load_result(f), str(f)) for f in files])
        ctx.console.log(terminal.render_run_table(merged))
    golden = load_golden(cfg.golden)
    subset = _subset(ctx, golden)
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    outcome = flow.gate(cfg, _baseline(ctx, cfg), candidate=merged, expected=golden.subset(subset).cases)
    return _report(ctx, outcome)


def _run_baseline(ctx: _Context) -> int:
    """baseline: run every case ``repeats`` times and write the RunResult for upload."""
    cfg = _load(ctx)
    subset = None if ctx.inputs.subset in (None, ALL_CASES) else ctx.inputs.subset
    ev = prepare(cfg, subset=subset, env=app_env(ctx.env), shard=ctx.inputs.shard)
    with ctx.console.group(f"rageval baseline: {len(ev.golden.cases)} cases × {ctx.inputs.repeats} repeats"):
        result = flow.run_repeats(ev, ctx.inputs.repeats, progress=Progress(ctx.console, "rageval baseline"))
    table, noise_line = terminal.render_run_table(result), terminal.render_noise(result)
    ctx.console.log(table)
    ctx.console.log(noise_line)
    markdown = (f"### {cfg.report.title}: baseline\n\n"
                f"Golden set `{result.golden.name}` v{result.golden.version}, config `{ctx.inputs.config}`. "
                f"Upload `{ctx.inputs.results_path}` with `actions/upload-artifact` as "
                f"`{ctx.inputs.baseline_artifact}` so pull requests compare against it.\n\n"
                f"```\n{table}\n```\n\n{noise_line}\n")
    _finish(ctx, verdict="none", markdown=markdown, result=result, pass_to_fail=[])
    ctx.set_status("success", f"{cfg.report.title}: baseline written ({len(result.cases)} cases)")
    return EXIT_OK


def _start(env: Mapping[str, str], console: Console, now: datetime | None,
           get_client: Callable[[], Any], status: StatusReporter | None) -> _Context:
    inputs = parse_inputs(env)
    event = read_event(env)
    mode = resolve_mode(inputs.mode, event)
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    why = f"mode {mode}" + (f" (auto: {event.name or 'no'} event" if inputs.mode == "auto" else "")
    if inputs.mode == "auto":
        why += f" on {event.branch})" if event.branch else ")"
    console.log(f"rag-eval-gate: {why}, config {inputs.config}")
    return _Context(env, inputs, event, mode, console, workspace, now, get_client, status)


def _lazy_client(env: Mapping[str, str], token: str | None,
                 client_factory: Callable[..., Any] | None) -> Callable[[], Any]:
    """One GitHub client for the whole run, built on first use."""
    made: list[Any] = []

    def get() -> Any:
        if not made:
            factory = client_factory or GitHubClient
            made.append(factory(token, api_url=env.get("GITHUB_API_URL") or "https://api.github.com"))
        return made[0]
    return get


def main(env: Mapping[str, str], *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         now: datetime | None = None, client_factory: Callable[..., Any] | None = None) -> int:
    """Run the action with ``env`` as the environment; returns the exit code.

    ``client_factory(token, api_url=…)`` builds the GitHub client (default
    `rageval.github.client.GitHubClient`); ``now`` is the clock for artifact expiry (default: now).
    Everything is printed on ``stdout`` (``stderr`` is accepted for compatibility and unused):
    the runner reads the two streams independently, and untrusted text must stay inside one
    stop-commands block (see `rageval.github.workflow`).
    """
    del stderr
    env = dict(env)          # a snapshot for this run; the evaluated app gets app_env(env), never os.environ
    console = Console(stdout or sys.stdout, [])
    token = get_input(env, "github-token") or None
    if token:
        console.add_secret(token)
    client = _lazy_client(env, token, client_factory)
    status = status_reporter(env, console, client)
    if status is not None:
        status.set("pending", "rag-eval-gate: evaluation running…")
    started = time.monotonic()
    try:
        ctx = _start(env, console, now, client, status)
        code = (_run_baseline(ctx) if ctx.mode == "baseline" else _run_merge(ctx) if ctx.mode == "merge"
                else _run_shard(ctx) if ctx.inputs.shard else _run_gate(ctx))
        console.log(f"done in {time.monotonic() - started:.1f} s, exit code {code}")
        return code
    except RagevalError as exc:
        console.error(exc.message + (f"\nTIP {exc.tip}" if exc.tip else ""))
        _status_error(status, exc.exit_code, exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        console.error("interrupted")
        _status_error(status, 130, "interrupted")
        return 130
    except Exception:  # noqa: BLE001 - a bug: show it (redacted), never as "blocked" (1)
        console.log(traceback.format_exc())
        console.error("Internal error in rageval (a bug); the traceback is in the log above. Please report it.")
        _status_error(status, EXIT_INTERNAL, "internal error (a bug); see the job log")
        return EXIT_INTERNAL


def _status_error(status: StatusReporter | None, code: int, message: str) -> None:
    if status is not None:
        first = message.strip().splitlines()[0] if message.strip() else ""
        status.set("error", f"rag-eval-gate: exit {code}: {first}")
