# Sourced by every hack/cluster script: pinned versions and the fixed places.
# Bumping a version here makes up.sh build that component again (the cache is keyed by it).
KUBE_VERSION=v1.34.4          # k8s.io/kubernetes; staging modules at v0.34.4
KUBE_STAGING_VERSION=v0.34.4
ETCD_VERSION=v3.6.4           # go.etcd.io/etcd/server/v3
KWOK_VERSION=v0.8.0           # sigs.k8s.io/kwok
HELM_VERSION=v3.22.0          # helm.sh/helm/v3 (latest v3 on the proxy)
# github.com/seaweedfs/seaweedfs (Apache-2.0): the S3 store of the record archive (its
# `weed version` says 4.53). A pseudo-version: the module has no semver tags.
SEAWEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
KUEUE_VERSION=v0.17.0         # sigs.k8s.io/kueue (Apache-2.0): the job queue of shared clusters (#23)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# NB: resolved physically, so a second checkout whose .cluster is a symlink to this one
# (git worktrees) names the same paths in the components' flags and does not restart them.
CLUSTER_DIR="$(cd "${REPO_ROOT}/.cluster" 2>/dev/null && pwd -P || echo "${REPO_ROOT}/.cluster")"
PASSHAT_CACHE_DIR="${PASSHAT_CACHE_DIR:-/var/cache/passhat}"
export GOMODCACHE="${PASSHAT_CACHE_DIR}/gomod"
export GOCACHE="${PASSHAT_CACHE_DIR}/gocache"
export GOFLAGS="-buildvcs=false"
export GOTOOLCHAIN=local

# Where build.sh puts each component's binaries (keyed by version).
KUBE_BIN="${PASSHAT_CACHE_DIR}/bin-kube-${KUBE_VERSION}"
ETCD_BIN="${PASSHAT_CACHE_DIR}/bin-etcd-${ETCD_VERSION}"
KWOK_BIN="${PASSHAT_CACHE_DIR}/bin-kwok-${KWOK_VERSION}"
# NB: "-kv": built with helm's Kubernetes-version ldflags (without them it assumed
# Kubernetes 1.20); the suffix keeps a cached binary of the older recipe from being used.
HELM_BIN="${PASSHAT_CACHE_DIR}/bin-helm-${HELM_VERSION}-kv"
SEAWEED_BIN="${PASSHAT_CACHE_DIR}/bin-seaweed-${SEAWEED_VERSION}"
KUEUE_BIN="${PASSHAT_CACHE_DIR}/bin-kueue-${KUEUE_VERSION}"

command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:${PATH}"
