"""The action's run context: the runner's environment as the action reads it (inputs, event, mode,
console, workspace), the GitHub client on demand, and the steps every mode shares — loading the
config, choosing the subset, fetching main's baseline, the sticky comment. ``rageval.github.action``
runs the modes on it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from rageval.config import load_config
from rageval.errors import ActionInputError, BaselineError, GithubError
from rageval.gate.report import Links
from rageval.github.baseline import fetch_baseline
from rageval.github.comment import ACTIONS_BOT, MAX_COMMENT_CHARS, comment_marker, upsert_comment
from rageval.github.inputs import ALL_CASES, DEFAULT_GATE_SUBSET, Event, Inputs
from rageval.github.sandbox import app_env
from rageval.github.status import StatusReporter
from rageval.github.workflow import Console
from rageval.golden.set import GoldenSet
from rageval.pipeline.runner import needs_model
from rageval.results import RunResult, load_result
from rageval.settings import Config

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
MSG_CACHE_IGNORED = ("The response cache {path} is inside the checkout, where a pull request can commit entries, so it "
                     "is ignored: the cache used is {outside}, outside the workspace (restore it with actions/cache "
                     "keyed on the base branch; see docs/action.md).")
MSG_BAD_DEFAULT_BRANCH = "GitHub API GET /repos/{repo} returned no default_branch; set the input `baseline-branch`."
MSG_COMMENT_DENIED = ("Could not post the PR comment (HTTP {status}): the token cannot write to this pull request "
                      "(a pull request from a fork gets a read-only token, or the job lacks "
                      "`permissions: pull-requests: write`). The report is in the job summary; the verdict is "
                      "unchanged.")
MSG_COMMENT_FAILED = "Could not post the PR comment: {error} The report is in the job summary; the verdict is unchanged."
RUNNING_BODY = ("### ⏳ {title}: evaluation running…\n\n"
                "Running {n} golden case{s}{subset} with `{config}`{baseline}. This comment is replaced with the "
                "report when the run ends{link}.\n")
SKIPPED_BODY = ("### ✅ rag-eval-gate: no RAG-relevant change\n\n"
                "Nothing this gate evaluates changed in this pull request (the workflow passed `skip: true`), "
                "so no evaluation ran and the check passes{link}.\n")
MSG_SKIPPED = "Input 'skip' is true: no RAG-relevant change, so nothing was evaluated and the check passes."
FORK_NOTE = ("> ℹ️ This pull request comes from a fork: GitHub gives its runs no secrets and a read-only token, "
             "so this report is in the job summary only. Stages that call a model need a maintainer's run "
             "(see {docs}).\n\n")
MSG_FORK_NO_KEY = ("This pull request comes from a fork, and GitHub gives a fork's runs no secrets: {config} calls a "
                   "model ({stages}) with the key in ${key}, which is empty here.")
TIP_FORK_NO_KEY = ("On fork pull requests, gate with a config without model stages (builtin or replay app, local "
                   "embedder, no judge), e.g. `config: ${{{{ github.event.pull_request.head.repo.fork && "
                   "'rageval-offline.yml' || 'rageval.yml' }}}}`, and let a maintainer run the full gate; see "
                   "{docs}, 'Pull requests from forks'.")
MSG_NO_HISTORY = ("Main's trend starts again with this baseline: the previous baseline of branch '{branch}' could "
                  "not be read ({error}). The baseline job needs `permissions: actions: read` to read it.")
FULL_REPORT = ("\n📊 **[Full report]({url})**: every case, its retrieved chunks and checks, and main's trend (an HTML "
               "file in this run's artifacts).\n")
ERROR_BODY = ("### 🛑 {title}: the evaluation did not finish\n\n```\n{message}\n```\n\n"
              "Exit code {code}; see the job log{link}.\n")


@dataclass
class ActionContext:
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
    comment_login: str = ACTIONS_BOT        # the author of our comments: the login our own POST returned
    app_home: str | None = None             # the home folder of the app's own user (Docker mode)

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

    def report_url(self) -> str | None:
        """Where the HTML report is found: the run's artifacts (upload-artifact runs after us,
        so the artifact's own id is not known yet)."""
        url = self.run_url()
        return f"{url}#artifacts" if url else None

    def links(self) -> Links:
        """The comment's links: the job log, the results artifact (the run's artifacts), commit pages."""
        server, repo = self.env.get("GITHUB_SERVER_URL"), self.env.get("GITHUB_REPOSITORY")
        url = self.run_url()
        return Links(url, f"{url}#artifacts" if url else None, f"{server}/{repo}/commit/" if server and repo else None)

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

    def app_env(self) -> dict[str, str]:
        """What the evaluated app and the model client see (`rageval.github.sandbox.app_env`)."""
        return app_env(self.env, home=self.app_home)




def load_action_config(ctx: ActionContext) -> Config:
    path = ctx.path(ctx.inputs.config)
    if not path.is_file():
        raise ActionInputError(MSG_NO_CONFIG.format(path=path, value=ctx.inputs.config, workspace=ctx.workspace),
                               tip=TIP_NO_CONFIG)
    cfg = load_config(path)
    key_value = ctx.env.get(cfg.llm.api_key_env)
    if key_value:
        ctx.console.add_secret(key_value)
    elif ctx.event.fork and needs_model(cfg):
        stages = [name for name, on in (("generation", cfg.generation.provider == "openai"),
                                        ("embedding", cfg.embedding.provider == "openai"),
                                        ("judge", cfg.judge.model is not None)) if on]
        raise ActionInputError(MSG_FORK_NO_KEY.format(config=ctx.inputs.config, stages=", ".join(stages),
                                                      key=cfg.llm.api_key_env),
                               tip=TIP_FORK_NO_KEY.format(docs=ctx.docs_url()))
    return _cache_outside_checkout(ctx, cfg)


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _cache_outside_checkout(ctx: ActionContext, cfg: Config) -> Config:
    """``cfg`` with its response cache outside the checkout: a pull request can commit a cache
    folder (a judge "pass" for every case, 0 model calls), so one inside the workspace is ignored,
    with a notice when it exists. The cache lives in ``$XDG_CACHE_HOME`` (else ``$HOME/.cache``)
    ``/rageval`` — in the Docker action ``${{ runner.temp }}/_github_home/.cache/rageval`` on the
    runner — restored with actions/cache keyed on the base branch (docs/action.md)."""
    configured = cfg.llm.cache_dir
    if configured is not None and not _inside(configured, ctx.workspace):
        ctx.console.log(f"response cache: {configured}")
        return cfg
    base = ctx.env.get("XDG_CACHE_HOME") or (str(Path(ctx.env["HOME"]) / ".cache") if ctx.env.get("HOME") else "")
    outside = Path(base) / "rageval" if base else None
    if outside is None or _inside(outside, ctx.workspace):
        outside = Path(tempfile.gettempdir()) / "rageval-cache"
    if configured is not None and configured.exists():
        ctx.console.notice(MSG_CACHE_IGNORED.format(path=configured, outside=outside))
    ctx.console.log(f"response cache: {outside}")
    return replace(cfg, llm=replace(cfg.llm, cache_dir=outside))


def choose_subset(ctx: ActionContext, golden: GoldenSet) -> str | None:
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


def baseline_for(ctx: ActionContext, cfg: Config) -> RunResult | None:
    if ctx.inputs.baseline_path:
        ctx.console.log(f"baseline: {ctx.inputs.baseline_path}")
        return load_result(ctx.path(ctx.inputs.baseline_path), BaselineError)
    owner, repo = ctx.repository
    branch = ctx.inputs.baseline_branch or ctx.event.base_ref or ctx.event.default_branch or default_branch(ctx)
    name = ctx.inputs.baseline_artifact
    with ctx.console.group(f"Fetching baseline artifact '{name}' from branch '{branch}'"):
        found = fetch_baseline(ctx.client("fetching the baseline artifact"), owner, repo, name, branch, now=ctx.now,
                               on_notice=ctx.console.notice)
        if found is None:
            ctx.console.notice(MSG_NO_BASELINE.format(name=name, branch=branch, repo=f"{owner}/{repo}",
                                                      policy=cfg.gate.missing_baseline, docs=ctx.docs_url()))
            return None
        result, art = found
        ctx.console.log(f"baseline: artifact '{name}' (id {art.get('id')}, {art.get('created_at')}), "
                        f"commit {(art.get('workflow_run') or {}).get('head_sha')}")
        return result


def previous_baseline(ctx: ActionContext, cfg: Config) -> RunResult | None:
    """The branch's newest baseline artifact (``baseline-path`` if given): the new baseline carries
    its history and itself (main's trend, ``report.history`` long). Not finding it starts the
    history; not reading it is a warning, never a failure — a bad artifact must not stop every
    baseline after it — and the history starts again."""
    if cfg.report.history == 0:
        return None
    branch = ctx.inputs.baseline_branch or ctx.event.branch or ctx.event.default_branch or "main"
    try:
        if ctx.inputs.baseline_path:
            return load_result(ctx.path(ctx.inputs.baseline_path), BaselineError)
        owner, repo = ctx.repository
        found = fetch_baseline(ctx.client("reading the previous baseline"), owner, repo, ctx.inputs.baseline_artifact,
                               branch, now=ctx.now, on_notice=ctx.console.notice)
    except (ActionInputError, BaselineError, GithubError) as exc:
        ctx.console.warning(MSG_NO_HISTORY.format(branch=branch, error=exc.message))
        return None
    if found is None:
        ctx.console.log(f"no earlier baseline artifact '{ctx.inputs.baseline_artifact}' on '{branch}': "
                        "main's trend starts with this one")
        return None
    ctx.console.log(f"previous baseline: artifact id {found[1].get('id')} ({len(found[0].history)} earlier entries)")
    return found[0]


def default_branch(ctx: ActionContext) -> str:
    """The repository's default branch from the API, for events whose payload lacks it (schedule)."""
    owner, repo = ctx.repository
    data = ctx.client("finding the repository's default branch").get_repo(owner, repo)
    branch = data.get("default_branch") if isinstance(data, dict) else None
    if not isinstance(branch, str) or not branch:
        raise GithubError(MSG_BAD_DEFAULT_BRANCH.format(repo=f"{owner}/{repo}"))
    ctx.console.log(f"default branch of {owner}/{repo} (from the API): {branch}")
    return branch


def post_comment(ctx: ActionContext, body: str, *, create: bool = True) -> None:
    """Create or update the sticky comment (``create=False``: update only); a refusal becomes a
    warning and stops commenting."""
    if not ctx.comment_enabled or ctx.event.pr_number is None:
        return
    body = ctx.console.redact(body)
    room = MAX_COMMENT_CHARS - len(comment_marker(ctx.comment_key)) - 1
    if len(body) > room:
        body = body[: room - 40].rstrip() + "\n\n…(cut to fit GitHub's comment limit)\n"
    owner, repo = ctx.repository
    try:
        posted = upsert_comment(ctx.client("the PR comment"), owner, repo, ctx.event.pr_number, ctx.comment_key,
                                body, logins=(ctx.comment_login,), create=create)
        login = (posted.get("user") or {}).get("login") if isinstance(posted, dict) else None
        if isinstance(login, str) and login:
            ctx.comment_login = login
    except GithubError as exc:
        ctx.comment_enabled = False
        status = getattr(exc, "status", None)
        if status in (403, 404):
            ctx.console.warning(MSG_COMMENT_DENIED.format(status=status))
        else:
            ctx.console.warning(MSG_COMMENT_FAILED.format(error=exc.message))
