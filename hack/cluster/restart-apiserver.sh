#!/usr/bin/env bash
# Restarts kube-apiserver mid-run (for the operator's fault tests): SIGTERM, wait until it
# is gone, start it again with the same flags via up.sh, wait until /readyz answers.
# DOWN_SECONDS=N keeps it down N seconds before the restart.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stop_component kube-apiserver 30
sleep "${DOWN_SECONDS:-0}"
exec "$HERE/up.sh"
