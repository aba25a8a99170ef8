# Sourced by every hack/cluster script: pinned versions and the fixed places.
# Bumping a version here makes up.sh build that component again (the cache is keyed by it).
KUBE_VERSION=v1.34.4          # k8s.io/kubernetes; staging modules at v0.34.4
KUBE_STAGING_VERSION=v0.34.4
ETCD_VERSION=v3.6.4           # go.etcd.io/etcd/server/v3
KWOK_VERSION=v0.8.0           # sigs.k8s.io/kwok
HELM_VERSION=v3.22.0          # helm.sh/helm/v3 (latest v3 on the proxy)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER_DIR="${REPO_ROOT}/.cluster"
PASSHAT_CACHE_DIR="${PASSHAT_CACHE_DIR:-/var/cache/passhat}"
export GOMODCACHE="${PASSHAT_CACHE_DIR}/gomod"
export GOCACHE="${PASSHAT_CACHE_DIR}/gocache"
export GOFLAGS="-buildvcs=false"
export GOTOOLCHAIN=local
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:${PATH}"
