#!/usr/bin/env bash
# The whole test suite: lint, types, the real test cluster, the image, every test tier.
# `.ci/run` runs exactly this; run it yourself on a fresh machine as root.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s [%s]\n' "$*" "$(date +%H:%M:%S)"; }

log "python dependencies"
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev]'

log "ruff"
python3 -m ruff check passhat tests bench hack
python3 -m ruff format --check passhat tests bench hack

log "mypy --strict"
python3 -m mypy

# What needs no cluster is prepared in the background while up.sh builds Kubernetes (a
# cold run's 16-23 minutes of Go builds; these are mostly downloads and unpacking): Debian's
# chromium, the inspect-ai venv, the passhat image (built, imported into containerd below).
mkdir -p .cluster/logs
log "in the background: chromium, the inspect-ai venv, the passhat image (log: .cluster/logs/prepare.log)"
INSPECT_VENV="${PASSHAT_CACHE_DIR:-/var/cache/passhat}/inspect-venv-0.3.285"
prepare() {
  set -euo pipefail
  echo "[prepare $(date +%T)] chromium for tests/browser (Debian's package; the test fails, never skips, without it)"
  if ! command -v chromium >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    # NB: with its recommended packages: fonts-liberation draws the report's text. The lock:
    # up.sh installs its packages at the same time (hack/cluster/lib.sh apt_install).
    mkdir -p /run/lock && flock /run/lock/passhat-apt.lock sh -c 'apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }'
  fi
  chromium --version
  # inspect-ai is not a passhat dependency: the tests that run the real Inspect
  # (tests/local/test_local_inspect.py, tests/cluster/test_operator_inspect.py) find it
  # through PASSHAT_TEST_INSPECT, in a venv of its own kept with the build cache.
  echo "[prepare $(date +%T)] inspect-ai for the Inspect tests"
  if [[ ! -x "$INSPECT_VENV/bin/inspect" ]]; then
    python3 -m venv "$INSPECT_VENV"
    "$INSPECT_VENV/bin/pip" install --quiet --disable-pip-version-check inspect-ai==0.3.285
  fi
  echo "[prepare $(date +%T)] the passhat image, not imported yet (hack/image/build.sh)"
  PASSHAT_IMAGE_NO_IMPORT=1 bash hack/image/build.sh
  echo "[prepare $(date +%T)] done"
}
prepare >.cluster/logs/prepare.log 2>&1 &
prepared=$!

log "test cluster (hack/cluster/up.sh), Kueue later"
PASSHAT_KUEUE=later bash hack/cluster/up.sh
# NB: Kueue is built at -p 1 beside the image import and the unit tiers (one pytest process:
# a core idle); the cluster tier's `alone` phase comes last and its up.sh waits for the
# build and starts it.
log "Kueue build, in the background (log: .cluster/logs/build-kueue.log)"
PASSHAT_BUILD_JOBS=1 bash hack/cluster/build.sh kueue >.cluster/logs/build-kueue.log 2>&1 &

log "waiting for the background preparation"
wait "$prepared" || { cat .cluster/logs/prepare.log; echo "hack/test.sh: the background preparation failed" >&2; exit 1; }
cat .cluster/logs/prepare.log
export PASSHAT_TEST_INSPECT="$INSPECT_VENV/bin/inspect"

log "passhat image into containerd (hack/image/build.sh: its layers are cached now)"
bash hack/image/build.sh

# Arguments that name a test file or directory: one pytest run of just those, as asked.
for arg in "$@"; do
  if [[ -e ${arg%%::*} ]]; then
    log "pytest $*"
    exec python3 -m pytest --durations=25 "$@"
  fi
done

# The whole suite in two phases (docs/development.md, "How CI runs the tiers"):
# 1. side by side: the tiers without a cluster (one core, CPU-bound) and the cluster tests
#    that share the cluster (mostly waiting on pods: two pytest-xdist workers, a module
#    per worker), while Kueue still builds;
# 2. the cluster tests marked `alone` (tests/cluster/conftest.py ALONE), one after another.
# Every phase runs whatever the others did; the script fails if any of them failed.
PYTEST_LOGS=.cluster/logs/pytest
mkdir -p "$PYTEST_LOGS"
log "pytest, phase 1: unit, local, browser | cluster tests that share the cluster (logs: $PYTEST_LOGS/)"
python3 -m pytest --durations=25 tests/unit tests/local tests/browser "$@" >"$PYTEST_LOGS/fast.log" 2>&1 &
fast=$!
PASSHAT_KUEUE=later python3 -m pytest --durations=25 -n 2 --dist loadfile -m "cluster and not alone" tests/cluster "$@" \
  >"$PYTEST_LOGS/shared.log" 2>&1 &
shared=$!
status=0
wait "$fast" || status=1
log "pytest, phase 1: unit, local, browser"
cat "$PYTEST_LOGS/fast.log"
wait "$shared" || status=1
log "pytest, phase 1: cluster tests that share the cluster"
cat "$PYTEST_LOGS/shared.log"
log "pytest, phase 2: cluster tests that need the cluster alone"
python3 -m pytest --durations=25 -m alone tests/cluster "$@" || status=1
log "pytest done: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit "$status"
