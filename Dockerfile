# rag-eval-gate: the GitHub Docker container action.
# GitHub runs it as the image's default user (root), with the workspace mounted at
# /github/workspace as the working directory, so there is deliberately no USER here.
# BASE_IMAGE: the official slim image, pinned by version. Any Debian-like image with python3 and
# python3-venv works too (CI builds it on a debootstrap-made bookworm base).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="rag-eval-gate" \
      org.opencontainers.image.description="Gate pull requests of RAG applications on a golden-set evaluation" \
      org.opencontainers.image.licenses="MIT"

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# A venv, so the same steps work where the system pip is "externally managed" (PEP 668).
RUN python3 -m venv /opt/venv

# Dependencies first (cached while only the package changes), exactly as locked.
COPY requirements.lock /app/requirements.lock
RUN pip install --no-cache-dir --no-deps --requirement /app/requirements.lock \
    && pip check

COPY . /app
RUN pip install --no-cache-dir --no-deps /app \
    && rm -rf /app/build /app/*.egg-info \
    && rageval --version

ENTRYPOINT ["python3", "/app/entrypoint.py"]
