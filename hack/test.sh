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

log "test cluster (hack/cluster/up.sh)"
bash hack/cluster/up.sh

log "passhat image (hack/image/build.sh)"
bash hack/image/build.sh

log "pytest"
python3 -m pytest --durations=25 "$@"
