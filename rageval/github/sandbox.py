"""Keep the token away from the evaluated app: no process the app can read holds it.

The runner hands the action its token in the environment (``INPUT_GITHUB-TOKEN``), and Linux shows
a process's *initial* environment to every process of the same user in ``/proc/<pid>/environ``
(and its command line to everyone in ``/proc/<pid>/cmdline``). A ``command`` app is a child of the
action, so it could read the token there. Two measures:

* **Re-exec** (`drop_secrets_and_reexec`, Docker and native mode): the entry point starts, writes
  the token into a pipe, and replaces itself (``execve``, same pid) with a copy of itself whose
  environment holds neither the token nor the runner's own credentials (`SECRET_VARS`); the pipe's
  read end is the only thing passed on, by number (`SECRET_FD_VAR`). The new image reads the token
  from the pipe into memory (`recover_secrets`) and closes it. Nothing secret is in any argv.
  It then makes itself non-dumpable (`keep_to_ourselves`, Linux ``PR_SET_DUMPABLE``): its
  ``/proc/<pid>`` files (environ, memory, open files — its stdout, the job log) belong to root from
  then on, so even a process of the same user (native mode) cannot open them.
* **Another user** (`app_user`, Docker mode): the image names an unprivileged user
  (``RAGEVAL_APP_USER``, see the Dockerfile); the action, running as root, starts command apps as
  that user with no supplementary groups (so not the runner's ``docker.sock`` either) and a home
  folder of its own. A process of another user cannot read the action's ``/proc/<pid>/environ``,
  its memory or its open files (its stdout, the job log), and cannot write the workspace or the
  runner's file-command files (``GITHUB_OUTPUT`` …), which belong to the runner's uid 1001.

In native mode the app runs as the job's own user, as every step of the job does: it shares the
job's trust (it can read the other processes of the job — the step's shell holds the token in its
environment, and its stdout is the job log), which docs/action.md says.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from rageval.errors import ActionInputError
from rageval.github.workflow import Console
from rageval.pipeline.apps.command import Isolation, isolated

#: where the re-executed entry point finds the pipe holding the secrets (a descriptor number)
SECRET_FD_VAR = "RAGEVAL_SECRET_FD"
#: the image's unprivileged user for command apps (a name, or uid:gid)
APP_USER_VAR = "RAGEVAL_APP_USER"
#: the token inputs: handed on through the pipe
TOKEN_VARS = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")
#: the runner's own credentials: the action needs none of them, so they are dropped
RUNNER_CREDENTIALS = ("GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
                      "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_RESULTS_URL", "ACTIONS_CACHE_URL")
SECRET_VARS = (*TOKEN_VARS, *RUNNER_CREDENTIALS)
MAX_SECRET_BYTES = 32 * 1024   # far more than any token; a pipe holds 64 KiB before a write would block

MSG_SECRET_PIPE = ("The action could not read its token back after re-starting itself without it "
                   "({problem}). This is a bug in rag-eval-gate; please report it.")
MSG_TOKEN_TOO_LONG = "Input 'github-token' is {n} bytes long; a GitHub token is far shorter (at most {limit})."
MSG_BAD_APP_USER = ("{var} is {value!r}, which names no user of this image; set it to a user name or uid:gid "
                    "(the Dockerfile creates rageval-app).")


def drop_secrets_and_reexec(environ: Mapping[str, str], argv: Sequence[str], executable: str) -> None:
    """Re-start this program (``execve``: same pid, new image) without `SECRET_VARS` in its
    environment, the token inputs passed through a pipe. Returns only when there is nothing to
    drop (or on a platform without ``execve`` semantics, Windows); otherwise never returns."""
    if os.name != "posix" or SECRET_FD_VAR in environ or not any(k in environ for k in SECRET_VARS):
        return
    payload = json.dumps({k: environ[k] for k in TOKEN_VARS if k in environ}).encode("utf-8")
    if len(payload) > MAX_SECRET_BYTES:
        raise ActionInputError(MSG_TOKEN_TOO_LONG.format(n=len(payload), limit=MAX_SECRET_BYTES))
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, payload)     # fits in the pipe's buffer: the write does not block
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    clean = {k: v for k, v in environ.items() if k not in SECRET_VARS}
    clean[SECRET_FD_VAR] = str(read_end)
    os.execve(executable, list(argv), clean)


def recover_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for the action: ``environ`` plus the token inputs read back from the pipe
    (a dict in memory; ``os.environ`` keeps no token), without `SECRET_FD_VAR`."""
    env = dict(environ)
    fd_text = env.pop(SECRET_FD_VAR, None)
    if fd_text is None:
        return env
    try:
        fd = int(fd_text)
        with os.fdopen(fd, "rb") as pipe:
            data = pipe.read(MAX_SECRET_BYTES + 1)
        secrets = json.loads(data.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise RuntimeError(MSG_SECRET_PIPE.format(problem=type(exc).__name__)) from None
    if not isinstance(secrets, dict):
        raise RuntimeError(MSG_SECRET_PIPE.format(problem="not an object"))
    env.update({k: v for k, v in secrets.items() if k in TOKEN_VARS and isinstance(v, str)})
    return env


PR_SET_DUMPABLE = 4   # <linux/prctl.h>


def keep_to_ourselves() -> bool:
    """Linux: make this process non-dumpable, so that no process of the same user can read its
    ``/proc/<pid>`` environ, memory or open files; returns whether that was done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class AppUser:
    """The unprivileged user command apps run as, and the home folder made for them."""

    uid: int
    gid: int
    home: str


def app_user(env: Mapping[str, str]) -> AppUser | None:
    """The user named by `APP_USER_VAR` (a name or uid:gid) when the action runs as root, with a
    fresh home folder it owns (mode 0700); None when none is named or the action is not root."""
    value = (env.get(APP_USER_VAR) or "").strip()
    if not value or os.name != "posix" or os.geteuid() != 0:
        return None
    uid_text, sep, gid_text = value.partition(":")
    try:
        if sep:
            uid, gid = int(uid_text), int(gid_text)
        else:
            entry = pwd.getpwnam(value)
            uid, gid = entry.pw_uid, entry.pw_gid
    except (KeyError, ValueError):
        raise ActionInputError(MSG_BAD_APP_USER.format(var=APP_USER_VAR, value=value)) from None
    if uid == 0:
        raise ActionInputError(MSG_BAD_APP_USER.format(var=APP_USER_VAR, value=value) + " It must not be root.")
    home = tempfile.mkdtemp(prefix="rageval-app-home-")
    os.chown(home, uid, gid)
    os.chmod(home, 0o700)
    return AppUser(uid, gid, home)


#: what the evaluated app and the model client never see: the action's inputs (the token among
#: them), the job's token, the runner's own service credentials (artifacts, cache, OIDC), the
#: runner's file commands (outputs, environment, path, state, summary) and our own plumbing.
HIDDEN_FROM_APP = (*RUNNER_CREDENTIALS, "GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE",
                   "GITHUB_STEP_SUMMARY", SECRET_FD_VAR, APP_USER_VAR)


def app_env(env: Mapping[str, str], *, home: str | None = None) -> dict[str, str]:
    """The environment the evaluated app and the model client see (see HIDDEN_FROM_APP), with
    ``HOME`` set to ``home`` when the app runs as its own user."""
    out = {k: v for k, v in env.items() if not k.startswith("INPUT_") and k not in HIDDEN_FROM_APP}
    if home:
        out["HOME"] = home
    return out


def app_stderr(console: Console) -> Callable[[str], None]:
    """Where a command app's stderr goes: the job log, through `Console.log` (so a line that could
    be a workflow command is printed inside a stop-commands block, never run), each line marked."""
    def show(text: str) -> None:
        console.log("\n".join(f"app stderr | {line}" for line in text.splitlines()))
    return show


@contextmanager
def isolation(env: Mapping[str, str], console: Console) -> Iterator[str | None]:
    """Command apps started in the block run with their stderr in the job log (`app_stderr`), and,
    in the Docker image (root, with `APP_USER_VAR` set), as its unprivileged user; yields that
    user's home folder (None when the app runs as the action's own user), removed afterwards."""
    user = app_user(env)
    if user is None and env.get(APP_USER_VAR) and os.name == "posix" and os.geteuid() != 0:
        console.notice(f"The action does not run as root, so command apps run as its own user, not as "
                       f"{env[APP_USER_VAR]!r}.")
    policy = Isolation(user=user.uid if user else None, group=user.gid if user else None, stderr=app_stderr(console))
    try:
        with isolated(policy):
            yield user.home if user else None
    finally:
        if user is not None:
            shutil.rmtree(user.home, ignore_errors=True)
