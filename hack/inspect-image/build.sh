#!/usr/bin/env bash
# Builds an Inspect trial image (hack/inspect-image/Dockerfile: inspect-ai from PyPI, this
# checkout's passhat, tests/fixtures/inspect/tasks.py) without a Docker daemon and imports
# it into the test cluster's containerd as localhost/passhat/inspect:test.
#
# Its own image name: it never touches localhost/passhat/passhat:test. The base is the
# debootstrap image hack/image/build.sh makes (localhost/passhat/base:bookworm, in buildah's
# storage); pip reaches PyPI during the build (--network host, the machine's CA bundle).
# Skipped when containerd already holds an image built from the same sources.
#
# Usage: hack/inspect-image/build.sh [--force]   (root; env: IMAGE, CONTAINERD_ADDRESS)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../cluster/lib.sh
source "$REPO_ROOT/hack/cluster/lib.sh"

BASE_IMAGE=localhost/passhat/base:bookworm
IMAGE="${IMAGE:-localhost/passhat/inspect:test}"
CONTAINERD_ADDRESS="${CONTAINERD_ADDRESS:-$CONTAINERD_SOCK}"
HASH_LABEL=dev.passhat.source-hash
TASKS="$REPO_ROOT/tests/fixtures/inspect/tasks.py"
export CONTAINERS_CONF="$REPO_ROOT/hack/image/containers.conf"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

ilog() { echo "[inspect-image $(date +%T)] $*" >&2; }
idie() { echo "[inspect-image $(date +%T)] ERROR: $*" >&2; exit 1; }

[[ "$IMAGE" != localhost/passhat/passhat:* ]] || idie "IMAGE=$IMAGE: this script builds its own image, not passhat's"

source_hash() {
  (
    cd "$REPO_ROOT"
    find pyproject.toml README.md passhat hack/inspect-image "$TASKS" -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum
  ) | sha256sum | cut -c1-16
}

ctr_k8s() { ctr --address "$CONTAINERD_ADDRESS" -n k8s.io "$@"; }

imported_hash() {
  ctr_k8s images ls "name==$IMAGE" 2>/dev/null | awk -v key="$HASH_LABEL=" 'NR > 1 {
    n = split($NF, labels, ","); for (i = 1; i <= n; i++) if (index(labels[i], key) == 1) print substr(labels[i], length(key) + 1) }'
}

main() {
  local hash context archive start=$SECONDS
  [[ $EUID -eq 0 ]] || idie "run as root (buildah and ctr need it)"
  [[ -S "$CONTAINERD_ADDRESS" ]] || idie "no containerd at $CONTAINERD_ADDRESS: run hack/cluster/up.sh first"
  buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 ||
    idie "no $BASE_IMAGE in buildah's storage: hack/image/build.sh makes it"
  hash=$(source_hash)
  if ((FORCE == 0)) && [[ "$(imported_hash)" == "$hash" ]]; then
    ilog "$IMAGE is up to date in containerd (sources $hash)"
    return
  fi
  context=$(mktemp -d /tmp/passhat-inspect-context.XXXXXX)
  # shellcheck disable=SC2064 # NB: expanded now: context is local to main
  trap "rm -rf '$context'" EXIT
  cp -r "$REPO_ROOT/pyproject.toml" "$REPO_ROOT/README.md" "$REPO_ROOT/passhat" \
    "$REPO_ROOT/hack/inspect-image/Dockerfile" "$TASKS" "$context/"
  find "$context" -name __pycache__ -prune -exec rm -rf {} +
  local args=(--layers --pull=never --network host --isolation chroot
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --label "$HASH_LABEL=$hash" -t "$IMAGE")
  local ca="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
  if [[ -f "$ca" ]]; then
    args+=(--volume "$ca:/run/passhat-ca.crt:ro" --build-arg PIP_CERT=/run/passhat-ca.crt)
  fi
  ilog "buildah bud $IMAGE (pip installs inspect-ai from PyPI)"
  buildah bud "${args[@]}" "$context" >&2
  archive=$(mktemp /tmp/passhat-inspect-image.XXXXXX.tar)
  rm -f "$archive"
  buildah push --quiet "$IMAGE" "docker-archive:$archive:$IMAGE" >/dev/null
  ctr_k8s images import --platform linux/amd64 "$archive" >&2
  rm -f "$archive"
  ctr_k8s images label "$IMAGE" "$HASH_LABEL=$hash" >/dev/null
  [[ "$(imported_hash)" == "$hash" ]] || idie "containerd does not list $IMAGE after the import"
  ilog "$IMAGE built from sources $hash in $((SECONDS - start))s"
}

main "$@"
