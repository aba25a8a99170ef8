#!/usr/bin/env bash
# Restarts kube-apiserver mid-run (for the operator's fault tests): SIGTERM, wait until it
# is gone, start it again with the same flags, wait until /readyz answers. Holds up.sh's
# lock throughout, so a concurrent up.sh never sees a half-stopped API server.
# DOWN_SECONDS=N keeps it down N seconds before the restart.
set -euo pipefail
PASSHAT_UP_NO_MAIN=1 source "$(dirname "${BASH_SOURCE[0]}")/up.sh"
exec 9>"$CLUSTER_DIR/up.lock"
flock 9
stop_component kube-apiserver 10 # NB: it can hang ~30s draining watches; then SIGKILL
sleep "${DOWN_SECONDS:-0}"
start_apiserver
log "kube-apiserver restarted"
