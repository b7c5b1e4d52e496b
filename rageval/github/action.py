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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rageval import flow
from rageval.errors import (
    EXIT_BLOCKED,
    EXIT_INTERNAL,
    EXIT_OK,
    ActionInputError,
    RagevalError,
)
from rageval.files import Streamed, write_json, write_text
from rageval.gate import terminal
from rageval.gate.page import render_html
from rageval.github.client import GitHubClient
from rageval.github.context import (
    ERROR_BODY,
    FORK_NOTE,
    FULL_REPORT,
    MSG_NO_SHARDS,
    MSG_SKIPPED,
    RUNNING_BODY,
    SKIPPED_BODY,
    ActionContext,
    baseline_for,
    choose_subset,
    load_action_config,
    post_comment,
    previous_baseline,
)
from rageval.github.inputs import (
    ALL_CASES,
    comment_key,
    get_input,
    parse_inputs,
    read_event,
    resolve_mode,
)
from rageval.github.sandbox import (
    drop_secrets_and_reexec,
    isolation,
    keep_to_ourselves,
    recover_secrets,
)
from rageval.github.status import StatusReporter, status_reporter
from rageval.github.workflow import Console, Progress, append_text, write_output
from rageval.golden.set import load_golden
from rageval.parse import map_strings
from rageval.pipeline.runner import Evaluation, prepare
from rageval.results import RunResult, load_result
from rageval.settings import Config, ReportConfig
from rageval.shards import merge as merge_shards


def _report_path(results_path: str, suffix: str = ".md") -> str:
    p = Path(results_path)
    return str(p.with_suffix(suffix) if p.suffix else p.with_name(p.name + suffix))


def redacted_tree(result: RunResult, redact: Callable[[str], str]) -> dict[str, Any]:
    """The RunResult's JSON (``to_json_tree``) with every string redacted; its case records are
    made, redacted and written one at a time, as ``rageval run --out`` writes them."""
    def cases(records: Streamed) -> Streamed:
        return Streamed(len(records), lambda: (map_strings(record, redact) for record in records))
    return {redact(key): cases(value) if isinstance(value, Streamed) else map_strings(value, redact)
            for key, value in result.to_json_tree().items()}


def _finish(ctx: ActionContext, *, verdict: str, markdown: str, result: RunResult, pass_to_fail: list[str],
            html: str) -> None:
    """Write results, the report files (markdown, HTML), the step summary and the outputs."""
    results_rel = ctx.inputs.results_path
    report_rel, html_rel = _report_path(results_rel), _report_path(results_rel, ".html")
    markdown = ctx.console.redact(markdown)   # a secret a model echoed stays out of every file
    data = redacted_tree(result, ctx.console.redact)
    # never through a link (the checkout is the pull request's: rageval.files)
    write_json(ctx.path(results_rel), data, compact=result.compact_json, links=False)
    write_text(ctx.path(report_rel), markdown, links=False)
    write_text(ctx.path(html_rel), ctx.console.redact(html), links=False)     # rendered from redacted text too
    summary = ctx.env.get("GITHUB_STEP_SUMMARY")
    if summary:
        append_text(summary, markdown)
    outputs = ctx.env.get("GITHUB_OUTPUT")
    if outputs:
        for name, value in (("verdict", verdict), ("results", results_rel), ("report", report_rel),
                            ("html", html_rel), ("pass-to-fail", ",".join(pass_to_fail))):
            write_output(outputs, name, ctx.console.redact(value))
    ctx.console.log(f"wrote {results_rel}, {report_rel} and {html_rel}")


def _running_body(ctx: ActionContext, cfg: Config, n: int, subset: str | None) -> str:
    baseline_note = (f" against `{ctx.inputs.baseline_path}`" if ctx.inputs.baseline_path
                     else f" against the `{ctx.inputs.baseline_artifact}` artifact")
    return RUNNING_BODY.format(title=cfg.report.title, n=n, s="" if n == 1 else "s",
                               subset=f" (subset `{subset}`)" if subset else "",
                               config=ctx.inputs.config, baseline=baseline_note, link=ctx.link())


DEFAULT_TITLE = ReportConfig().title


def known_failures_default(mode: str, event: str | None) -> str:
    """``gate.known_failures`` when the config leaves it out: a ratchet (report) for pull requests and
    merge queues, the absolute rule (block) for release-branch verification."""
    return "block" if mode == "verify" and event != "merge_group" else "report"


def _decide(ctx: ActionContext, cfg: Config, ev: Evaluation, subset: str | None) -> flow.GateOutcome:
    n = len(ev.golden.cases)
    baseline = baseline_for(ctx, cfg)
    with ctx.console.group(f"rageval {ctx.mode}: {n} cases{f' (subset {subset})' if subset else ''}"):
        outcome = flow.gate(cfg, baseline, evaluation=ev, progress=Progress(ctx.console, f"rageval {ctx.mode}"),
                            known_failures=known_failures_default(ctx.mode, ctx.event.name),
                            full_report=ctx.report_url(), links=ctx.links(), redact=ctx.console.redact,
                            on_rerun=lambda ids: ctx.console.log(
                                f"re-running {'all cases' if ids is None else ', '.join(ids)} with caches bypassed"))
    for note in outcome.notes:
        ctx.console.notice(note)
    return outcome


def _gate_outcome(ctx: ActionContext, loaded: list[Config]) -> flow.GateOutcome:
    """Load, run and decide; ``loaded`` gets the config once it is read."""
    cfg = load_action_config(ctx)
    loaded.append(cfg)
    golden = load_golden(cfg.golden)
    subset = choose_subset(ctx, golden)
    ev = prepare(cfg, subset=subset, env=ctx.app_env(), golden=golden)
    post_comment(ctx, _running_body(ctx, cfg, len(ev.golden.cases), subset))
    try:
        return _decide(ctx, cfg, ev, subset)
    finally:
        _close_app(ev)


def _run_gate(ctx: ActionContext) -> int:
    """gate and verify: run the subset, compare with the baseline, report, exit 0 or 1. Whatever
    stops it — a config error included — replaces the sticky comment, so the PR never keeps
    showing an earlier "passed" (the commit status ends in error too: rageval.github.action.main)."""
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    loaded: list[Config] = []
    try:
        outcome = _gate_outcome(ctx, loaded)
    except Exception as exc:
        if isinstance(exc, RagevalError):
            message, code = exc.message + (f"\n\nTIP {exc.tip}" if exc.tip else ""), exc.exit_code
        else:
            message, code = f"internal error in rageval: {type(exc).__name__} (a bug)", EXIT_INTERNAL
        title = loaded[0].report.title if loaded else DEFAULT_TITLE
        post_comment(ctx, ERROR_BODY.format(title=title, message=ctx.console.redact(message),
                                            code=code, link=ctx.link()))
        raise
    return _report(ctx, outcome, loaded[0])


def _report(ctx: ActionContext, outcome: flow.GateOutcome, cfg: Config) -> int:
    """The verdict in the log, the files (results, markdown, HTML), the comment and the status; the exit code."""
    verdict = outcome.verdict
    ctx.console.log(outcome.line)
    for reason in verdict.reasons:
        ctx.console.log(f"  {'BLOCK' if reason.blocking else 'note '} {reason.message}")
    markdown = (FORK_NOTE.format(docs=ctx.docs_url()) if ctx.event.fork else "") + outcome.markdown
    html = render_html(outcome.candidate, baseline=outcome.baseline, verdict=verdict, cfg=cfg.report,
                       redact=ctx.console.redact)
    _finish(ctx, verdict=verdict.verdict, markdown=markdown, result=outcome.candidate,
            pass_to_fail=list(verdict.pass_to_fail), html=html)
    post_comment(ctx, markdown)
    ctx.set_status("failure" if verdict.blocked else "success", outcome.line)
    if verdict.blocked:
        ctx.console.error(outcome.line)
        return EXIT_BLOCKED
    return EXIT_OK


def _run_shard(ctx: ActionContext) -> int:
    """input shard (a matrix job): run that part of the subset and write its RunResult; no gate."""
    cfg, shard = load_action_config(ctx), ctx.inputs.shard
    golden = load_golden(cfg.golden)
    subset = choose_subset(ctx, golden)
    ev = prepare(cfg, subset=subset, env=ctx.app_env(), golden=golden, shard=shard)
    with ctx.console.group(f"rageval shard {shard} of {len(ev.golden.cases)} cases"):
        try:
            result = ev.run(progress=Progress(ctx.console, f"rageval shard {shard}"))
        finally:
            _close_app(ev)
    table = terminal.render_run_table(result)
    ctx.console.log(table)
    markdown = (f"### {cfg.report.title}: shard {shard}\n\n{len(result.cases)} of {len(ev.golden.cases)} cases. "
                f"Upload `{ctx.inputs.results_path}` with `actions/upload-artifact`; one more job joins the parts "
                f"(`mode: merge`) and gates the whole.\n\n```\n{table}\n```\n")
    _finish(ctx, verdict="none", markdown=markdown, result=result, pass_to_fail=[],
            html=render_html(result, cfg=cfg.report, redact=ctx.console.redact))
    return EXIT_OK


def _run_merge(ctx: ActionContext) -> int:
    """merge: join the parts of a sharded run (input shards), then gate the whole as verify does."""
    cfg = load_action_config(ctx)
    files = sorted(Path(p) for p in glob.glob(str(ctx.path(ctx.inputs.shards)), recursive=True) if Path(p).is_file())
    if not files:
        raise ActionInputError(MSG_NO_SHARDS.format(pattern=ctx.inputs.shards, workspace=ctx.workspace))
    with ctx.console.group(f"rageval merge: {len(files)} parts"):
        merged = merge_shards([(load_result(f), str(f)) for f in files])
        ctx.console.log(terminal.render_run_table(merged))
    golden = load_golden(cfg.golden)
    subset = choose_subset(ctx, golden)
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    outcome = flow.gate(cfg, baseline_for(ctx, cfg), candidate=merged, expected=golden.subset(subset).cases,
                        known_failures=known_failures_default("verify", ctx.event.name), full_report=ctx.report_url(),
                        links=ctx.links(), redact=ctx.console.redact)
    return _report(ctx, outcome, cfg)


def _run_skipped(ctx: ActionContext) -> int:
    """Input ``skip: true`` (the workflow found no RAG-relevant change): nothing is evaluated; the
    check passes (status success, verdict ``skipped``), and a sticky comment left by an earlier run
    of this pull request says so (none is created)."""
    ctx.console.notice(MSG_SKIPPED)
    body = SKIPPED_BODY.format(link=ctx.link())
    summary, outputs = ctx.env.get("GITHUB_STEP_SUMMARY"), ctx.env.get("GITHUB_OUTPUT")
    if summary:
        append_text(summary, body)
    if outputs:
        for name, value in (("verdict", "skipped"), ("results", ""), ("report", ""), ("pass-to-fail", "")):
            write_output(outputs, name, value)
    ctx.comment_key = comment_key(ctx.inputs.config)
    ctx.comment_enabled = ctx.inputs.comment and ctx.event.pr_number is not None
    post_comment(ctx, body, create=False)
    ctx.set_status("success", "rag-eval-gate: no RAG-relevant change")
    return EXIT_OK


def _close_app(ev: Evaluation) -> None:
    """Stop the app's processes (a command app), so all they wrote is in the log before the verdict."""
    close = getattr(ev.app, "close", None)
    if callable(close):
        close()


def _run_baseline(ctx: ActionContext) -> int:
    """baseline: run every case ``repeats`` times and write the RunResult for upload."""
    cfg = load_action_config(ctx)
    subset = None if ctx.inputs.subset in (None, ALL_CASES) else ctx.inputs.subset
    ev = prepare(cfg, subset=subset, env=ctx.app_env(), shard=ctx.inputs.shard)
    previous = previous_baseline(ctx, cfg)
    with ctx.console.group(f"rageval baseline: {len(ev.golden.cases)} cases × {ctx.inputs.repeats} repeats"):
        try:
            result = flow.run_repeats(ev, ctx.inputs.repeats, progress=Progress(ctx.console, "rageval baseline"),
                                      previous=previous)
        finally:
            _close_app(ev)
    table, noise_line = terminal.render_run_table(result), terminal.render_noise(result)
    ctx.console.log(table)
    ctx.console.log(noise_line)
    markdown = (f"### {cfg.report.title}: baseline\n\n"
                f"Golden set `{result.golden.name}` v{result.golden.version}, config `{ctx.inputs.config}`. "
                f"Upload `{ctx.inputs.results_path}` with `actions/upload-artifact` as "
                f"`{ctx.inputs.baseline_artifact}` so pull requests compare against it.\n\n"
                f"```\n{table}\n```\n\n{noise_line}\n")
    if ctx.report_url():
        markdown += FULL_REPORT.format(url=ctx.report_url())
    _finish(ctx, verdict="none", markdown=markdown, result=result, pass_to_fail=[],
            html=render_html(result, cfg=cfg.report, redact=ctx.console.redact))
    ctx.set_status("success", f"{cfg.report.title}: baseline written ({len(result.cases)} cases)")
    return EXIT_OK


def _start(env: Mapping[str, str], console: Console, now: datetime | None,
           get_client: Callable[[], Any], status: StatusReporter | None) -> ActionContext:
    inputs = parse_inputs(env)
    event = read_event(env)
    mode = resolve_mode(inputs.mode, event)
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    why = f"mode {mode}" + (f" (auto: {event.name or 'no'} event" if inputs.mode == "auto" else "")
    if inputs.mode == "auto":
        why += f" on {event.branch})" if event.branch else ")"
    console.log(f"rag-eval-gate: {why}, config {inputs.config}")
    return ActionContext(env, inputs, event, mode, console, workspace, now, get_client, status)


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
        if ctx.inputs.skip:
            return _run_skipped(ctx)
        with isolation(env, console) as ctx.app_home:
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


def entry(environ: Mapping[str, str], argv: Sequence[str], executable: str) -> int:
    """What entrypoint.py runs: re-start without the token in the process environment (see
    `rageval.github.sandbox`), read it back from the pipe, then `main`."""
    try:
        drop_secrets_and_reexec(environ, argv, executable)   # returns only when there is nothing to drop
        env = recover_secrets(environ)
        keep_to_ourselves()
    except ActionInputError as exc:
        Console(sys.stdout, []).error(exc.message)
        return exc.exit_code
    except (OSError, RuntimeError) as exc:
        Console(sys.stdout, []).error(f"rag-eval-gate could not start: {exc} (a bug; please report it)")
        return EXIT_INTERNAL
    return main(env)


def _status_error(status: StatusReporter | None, code: int, message: str) -> None:
    if status is not None:
        first = message.strip().splitlines()[0] if message.strip() else ""
        status.set("error", f"rag-eval-gate: exit {code}: {first}")
