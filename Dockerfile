# rag-eval-gate: the GitHub Docker container action.
# GitHub runs it as the image's default user (root), with the workspace mounted at
# /github/workspace as the working directory, so there is deliberately no USER here; every file
# the action writes gets mode 0644 (the umask's), so later steps running as uid 1001 can read it.
# A `command` app is started as the unprivileged user rageval-app (uid 10001, RAGEVAL_APP_USER):
# it cannot read the action's token or environment, write the job log, the workspace, the runner's
# file commands or the runner's docker.sock (see rageval/github/sandbox.py).
# Tagged releases do not build this file: the release workflow publishes the image to ghcr.io and
# points action.yml at it (.github/workflows/release.yml); @main and forks build it.
#
# BASE_IMAGE: the official slim image, pinned by version. Any Debian-like image with python3 and
# python3-venv works too (CI builds it on a debootstrap-made bookworm base as well).
#
# Four stages: `build` makes the venv from the lock file (checked with `pip check`, then pip and
# setuptools removed); `git` installs Debian's git, of which only the one binary is kept (`git
# rev-parse`, `show` and `log` are built into it: the RunResult's git_sha, attribution of corpus
# and prompt changes, the golden set's history); `base` is BASE_IMAGE without what a Python
# program never reads (docs, man pages, translations, the system pip), plus the app's user; the
# final image is `base` flattened plus the venv, git and the entrypoint: no compiler, no package
# cache, no pip.
ARG BASE_IMAGE=python:3.11.13-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# A venv, so the same steps work where the system pip is "externally managed" (PEP 668).
RUN python3 -m venv /opt/venv
# Dependencies first (cached while only the package changes), exactly as locked.
COPY requirements.lock /src/requirements.lock
RUN /opt/venv/bin/pip install --no-deps --requirement /src/requirements.lock
COPY pyproject.toml README.md LICENSE /src/
COPY rageval /src/rageval
RUN /opt/venv/bin/pip install --no-deps /src \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools \
    && find /opt/venv/lib -depth -type d -name tests -path "*/site-packages/*" -exec rm -rf {} + \
    && /opt/venv/bin/rageval --version

FROM ${BASE_IMAGE} AS git
# Debian's git of the base's release, whatever its patch level: pinning it would break the build
# as soon as the archive moves on.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && GIT_EXEC_PATH=/nonexistent git --version

FROM ${BASE_IMAGE} AS base
# The workspace belongs to the runner's uid 1001 and the action runs as root: without
# safe.directory git refuses to read it ("dubious ownership").
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin rageval-app \
    && printf '[safe]\n\tdirectory = *\n' >/etc/gitconfig
RUN rm -rf /usr/share/doc /usr/share/man /usr/share/info /usr/share/locale /usr/share/python-wheels \
      /usr/lib/python3/dist-packages /usr/lib/python3*/ensurepip /usr/local/lib/python3*/ensurepip \
      /usr/local/lib/python3*/site-packages/pip /usr/local/lib/python3*/site-packages/pip-* \
      /usr/local/lib/python3*/site-packages/setuptools /usr/local/lib/python3*/site-packages/setuptools-* \
      /usr/local/lib/python3*/site-packages/wheel /usr/local/lib/python3*/site-packages/wheel-* \
      /usr/local/bin/pip /usr/local/bin/pip3* /usr/bin/pip /usr/bin/pip3* \
      /var/cache/debconf/* /var/lib/apt/lists/* /root/.cache

FROM scratch
# Flattening is the point: files removed in `base` would otherwise still ship in its lower layers.
# hadolint ignore=DL3067
COPY --from=base / /
COPY --from=build /opt/venv /opt/venv
COPY --from=git /usr/bin/git /usr/bin/git
COPY entrypoint.py /app/entrypoint.py

LABEL org.opencontainers.image.title="rag-eval-gate" \
      org.opencontainers.image.description="Gate pull requests of RAG applications on a golden-set evaluation" \
      org.opencontainers.image.licenses="MIT"

ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/venv \
    RAGEVAL_APP_USER=rageval-app

ENTRYPOINT ["python3", "/app/entrypoint.py"]
