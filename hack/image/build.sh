#!/usr/bin/env bash
# Builds the passhat image from the repo's Dockerfile without a Docker daemon and imports it
# into the test cluster's containerd as localhost/passhat/passhat:test.
#
# No image can be pulled on these machines, so the base image is made here too: debootstrap
# writes a minimal Debian bookworm rootfs with python3.11 + venv (cached under
# ${PASSHAT_CACHE_DIR}/image-base-<version>/), buildah imports it as
# localhost/passhat/base:bookworm, and `buildah bud --pull=never` builds the Dockerfile on
# it. The build is skipped when containerd already holds an image built from the same
# sources (a hash of Dockerfile, pyproject.toml, README.md, passhat/ and this folder,
# stored as an image label).
#
# Usage: hack/image/build.sh [--force]     (root; env: PASSHAT_CACHE_DIR, IMAGE,
#        CONTAINERD_ADDRESS, PASSHAT_IMAGE_NO_IMPORT=1 to build without importing)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# NB: the cluster scripts own the containerd socket path and the cache folder.
# shellcheck source=../cluster/lib.sh
source "$REPO_ROOT/hack/cluster/lib.sh"

BASE_VERSION=bookworm-1 # bump to rebuild the cached base rootfs
BASE_IMAGE=localhost/passhat/base:bookworm
IMAGE="${IMAGE:-localhost/passhat/passhat:test}"
CONTAINERD_ADDRESS="${CONTAINERD_ADDRESS:-$CONTAINERD_SOCK}"
BASE_DIR="${PASSHAT_CACHE_DIR}/image-base-${BASE_VERSION}"
HASH_LABEL=dev.passhat.source-hash
export CONTAINERS_CONF="$REPO_ROOT/hack/image/containers.conf"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

ilog() { echo "[image $(date +%T)] $*" >&2; }
idie() { echo "[image $(date +%T)] ERROR: $*" >&2; exit 1; }
timed() { # timed NAME CMD...: run CMD, log how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  ilog "$name took $((SECONDS - start))s"
}

ensure_tools() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v ctr >/dev/null || missing+=(containerd)
  ((${#missing[@]} == 0)) && return
  ilog "installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  # NB: one apt-get at a time with hack/cluster/up.sh's (hack/cluster/lib.sh apt_locked)
  apt_locked() { mkdir -p /run/lock && flock /run/lock/passhat-apt.lock apt-get "$@"; }
  apt_locked install -y --no-install-recommends "${missing[@]}" fuse-overlayfs >&2 ||
    { apt_locked update >&2 && apt_locked install -y --no-install-recommends "${missing[@]}" fuse-overlayfs >&2; }
}

# A hash of every input of the image; equal hashes mean an equal image.
source_hash() {
  (
    cd "$REPO_ROOT"
    local inputs=(Dockerfile .dockerignore pyproject.toml passhat hack/image)
    [[ -f README.md ]] && inputs+=(README.md)
    find "${inputs[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort |
      xargs sha256sum
  ) | sha256sum | cut -c1-16
}

ctr_k8s() { ctr --address "$CONTAINERD_ADDRESS" -n k8s.io "$@"; }

imported_hash() { # the source hash label of $IMAGE in containerd, empty if absent
  ctr_k8s images ls "name==$IMAGE" 2>/dev/null | awk -v key="$HASH_LABEL=" 'NR > 1 {
    n = split($NF, labels, ","); for (i = 1; i <= n; i++) if (index(labels[i], key) == 1) print substr(labels[i], length(key) + 1) }'
}

# The cached rootfs tarball: debootstrap minbase + python3 + venv, docs and apt lists gone.
make_base_rootfs() {
  [[ -f "$BASE_DIR/rootfs.tar" ]] && return
  local tmp="$BASE_DIR.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  ilog "debootstrap bookworm (minbase + python3, python3-venv) into $tmp"
  # NB: the mirror is the one apt is configured with, so the proxy/mirror setup applies.
  local mirror
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Release: bookworm' 2>/dev/null | head -1)
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$tmp/rootfs" \
    "${mirror:-http://deb.debian.org/debian}" >"$tmp/debootstrap.log" 2>&1 ||
    { tail -n 30 "$tmp/debootstrap.log" >&2; idie "debootstrap failed (log: $tmp/debootstrap.log)"; }
  (
    cd "$tmp/rootfs"
    rm -rf var/cache/apt/* var/lib/apt/lists/* var/log/* usr/share/doc/* usr/share/man/* \
      usr/share/info/* usr/share/locale/* tmp/* dev/*
    chroot . python3 -c 'import sys, venv, ensurepip; assert sys.version_info[:2] == (3, 11)'
  )
  tar --numeric-owner -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
  rm -rf "$tmp/rootfs"
  mv "$tmp" "$BASE_DIR"
  ilog "base rootfs cached: $BASE_DIR/rootfs.tar ($(du -h "$BASE_DIR/rootfs.tar" | cut -f1))"
}

make_base_image() {
  if buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 &&
    [[ "$(buildah inspect --type image --format '{{index .ImageAnnotations "dev.passhat.base"}}' "$BASE_IMAGE")" == "$BASE_VERSION" ]]; then
    return
  fi
  make_base_rootfs
  ilog "importing the rootfs as $BASE_IMAGE"
  local ctr
  ctr=$(buildah from --pull=never scratch)
  buildah add --quiet "$ctr" "$BASE_DIR/rootfs.tar" / >/dev/null
  buildah config --annotation "dev.passhat.base=$BASE_VERSION" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd /bin/bash --os linux --arch amd64 "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
}

build_image() { # HASH
  local args=(--layers --pull=never --network host --isolation chroot
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --label "$HASH_LABEL=$1" -t "$IMAGE")
  # Behind a TLS-intercepting proxy pip needs the machine's CA bundle (pip's own lacks it).
  local ca="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
  if [[ -f "$ca" ]]; then
    args+=(--volume "$ca:/run/passhat-ca.crt:ro" --build-arg PIP_CERT=/run/passhat-ca.crt)
  fi
  buildah bud "${args[@]}" "$REPO_ROOT" >&2
}

import_image() { # HASH
  local archive
  archive=$(mktemp /tmp/passhat-image.XXXXXX.tar)
  rm -f "$archive"
  buildah push --quiet "$IMAGE" "docker-archive:$archive:$IMAGE" >/dev/null
  ctr_k8s images import --platform linux/amd64 "$archive" >&2
  rm -f "$archive"
  ctr_k8s images label "$IMAGE" "$HASH_LABEL=$1" >/dev/null
  [[ "$(imported_hash)" == "$1" ]] || idie "containerd does not list $IMAGE after the import"
}

main() {
  local hash start=$SECONDS
  [[ $EUID -eq 0 ]] || idie "run as root (buildah, debootstrap and ctr need it)"
  ensure_tools
  hash=$(source_hash)
  if [[ "${PASSHAT_IMAGE_NO_IMPORT:-0}" != 1 ]]; then
    [[ -S "$CONTAINERD_ADDRESS" ]] || idie "no containerd at $CONTAINERD_ADDRESS: run hack/cluster/up.sh first"
    if ((FORCE == 0)) && [[ "$(imported_hash)" == "$hash" ]]; then
      ilog "$IMAGE is up to date in containerd (sources $hash)"
      return
    fi
  fi
  timed "base image" make_base_image
  timed "buildah bud" build_image "$hash"
  if [[ "${PASSHAT_IMAGE_NO_IMPORT:-0}" != 1 ]]; then
    timed "import into containerd" import_image "$hash"
  fi
  ilog "$IMAGE built from sources $hash in $((SECONDS - start))s"
}

main "$@"
