#!/usr/bin/env bash
# Builds every Go component of the test cluster from its Go module into the cache
# (${PASSHAT_CACHE_DIR}/bin-<component>-<version>/). A component whose binaries exist is
# skipped, so only the first run on a machine pays. Usage: build.sh [kube|etcd|kwok|helm|seaweed|kueue|all]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

log() { echo "[build $(date +%T)] $*" >&2; }
timed() { # timed NAME CMD...: run CMD, log how long it took
  local name=$1 start=$SECONDS; shift
  "$@"
  log "$name took $((SECONDS - start))s"
}
quietly() { # CMD...: run CMD, show its output only when it fails
  local out
  out=$("$@" 2>&1) || { echo "$out" | tail -n 20 >&2; return 1; }
}

KUBE_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# A wrapper module that requires MODULE@VERSION and pins each staging module it requires
# at v0.0.0 (the tagged go.mod fixes them with replaces, which Go ignores in a dependency).
write_wrapper() { # DIR MODULE VERSION STAGING_VERSION
  local dir=$1 module=$2 version=$3 staging=$4 gomod
  mkdir -p "$dir"
  gomod=$(cd "$dir" && go mod download -json "${module}@${version}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module passhat.local/wrapper"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')"
    echo
    echo "require ${module} ${version}"
    echo
    grep -E '^\s+k8s\.io/[^ ]+ v0\.0\.0$' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
  } >"$dir/go.mod"
  log "wrapper $dir/go.mod: $(grep -c '^replace' "$dir/go.mod") replaces"
}

build_kube() {
  [[ -x "$KUBE_BIN/kubelet" && -x "$KUBE_BIN/kubectl" ]] && { log "kube $KUBE_VERSION cached"; return; }
  local dir="${PASSHAT_CACHE_DIR}/wrap-kube-${KUBE_VERSION}"
  write_wrapper "$dir" k8s.io/kubernetes "$KUBE_VERSION" "$KUBE_STAGING_VERSION"
  local minor; minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$KUBE_BIN.tmp"
  local pkgs=()
  for t in "${KUBE_TOOLS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
  (cd "$dir" && timed "kube build (${KUBE_TOOLS[*]})" \
    env CGO_ENABLED=0 go build -mod=mod -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath -ldflags "$ld" -o "$KUBE_BIN.tmp/" "${pkgs[@]}")
  rm -rf "$KUBE_BIN"; mv "$KUBE_BIN.tmp" "$KUBE_BIN"
}

build_etcd() {
  [[ -x "$ETCD_BIN/etcd" ]] && { log "etcd $ETCD_VERSION cached"; return; }
  local dir="${PASSHAT_CACHE_DIR}/wrap-etcd-${ETCD_VERSION}"
  mkdir -p "$dir" "$ETCD_BIN.tmp"
  (cd "$dir" && [[ -f go.mod ]] || (cd "$dir" && go mod init passhat.local/etcdwrap >/dev/null 2>&1))
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null 2>&1 && \
    timed "etcd build" env CGO_ENABLED=0 go build -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath -ldflags "-s -w" \
      -o "$ETCD_BIN.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$ETCD_BIN"; mv "$ETCD_BIN.tmp" "$ETCD_BIN"
}

build_kwok() {
  [[ -x "$KWOK_BIN/kwok" ]] && { log "kwok $KWOK_VERSION cached"; return; }
  mkdir -p "$KWOK_BIN.tmp"
  timed "kwok build" env CGO_ENABLED=0 GOBIN="$KWOK_BIN.tmp" go install -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  rm -rf "$KWOK_BIN"; mv "$KWOK_BIN.tmp" "$KWOK_BIN"
}

build_helm() {
  [[ -x "$HELM_BIN/helm" ]] && { log "helm $HELM_VERSION cached"; return; }
  # The ldflags of helm's Makefile: its version, and the Kubernetes version `helm template`
  # and `helm lint` assume without a cluster: client-go v0.X.Y -> Kubernetes 1.X.
  local gomod client_go minor ld
  gomod=$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  client_go=$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod")
  minor=$(echo "$client_go" | cut -d. -f2)
  [[ "$minor" =~ ^[0-9]+$ ]] || { log "helm: no k8s.io/client-go version in $gomod"; exit 1; }
  ld="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=${minor}"
  done
  mkdir -p "$HELM_BIN.tmp"
  timed "helm build (assumes Kubernetes 1.${minor})" env CGO_ENABLED=0 GOBIN="$HELM_BIN.tmp" \
    go install -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  rm -rf "$HELM_BIN"; mv "$HELM_BIN.tmp" "$HELM_BIN"
}

build_seaweed() {
  [[ -x "$SEAWEED_BIN/weed" ]] && { log "seaweedfs $SEAWEED_VERSION cached"; return; }
  local dir="${PASSHAT_CACHE_DIR}/wrap-seaweed-${SEAWEED_VERSION}"
  mkdir -p "$dir" "$SEAWEED_BIN.tmp"
  (cd "$dir" && { [[ -f go.mod ]] || go mod init passhat.local/seaweedwrap >/dev/null 2>&1; } &&
    go get "github.com/seaweedfs/seaweedfs/weed@${SEAWEED_VERSION}" >/dev/null 2>&1 &&
    timed "seaweedfs build" env CGO_ENABLED=0 go build -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath -ldflags "-s -w" \
      -o "$SEAWEED_BIN.tmp/weed" github.com/seaweedfs/seaweedfs/weed)
  rm -rf "$SEAWEED_BIN"; mv "$SEAWEED_BIN.tmp" "$SEAWEED_BIN"
}

# Kueue: only its manager (cmd/kueue), from a wrapper module (the module has no replaces).
# Its manifests (CRDs, webhook configurations) are read by up.sh from the module tree in
# GOMODCACHE, which `go get` fills.
build_kueue() {
  [[ -x "$KUEUE_BIN/kueue" ]] && { log "kueue $KUEUE_VERSION cached"; return; }
  local dir="${PASSHAT_CACHE_DIR}/wrap-kueue-${KUEUE_VERSION}"
  local ld="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION}"
  ld+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=module -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01"
  mkdir -p "$dir" "$KUEUE_BIN.tmp"
  (cd "$dir" && { [[ -f go.mod ]] || go mod init passhat.local/kueuewrap >/dev/null 2>&1; } &&
    timed "kueue modules (go get)" quietly go get "sigs.k8s.io/kueue/cmd/kueue@${KUEUE_VERSION}" &&
    timed "kueue build" env CGO_ENABLED=0 go build -p "${PASSHAT_BUILD_JOBS:-2}" -trimpath -ldflags "$ld" \
      -o "$KUEUE_BIN.tmp/kueue" sigs.k8s.io/kueue/cmd/kueue)
  rm -rf "$KUEUE_BIN"; mv "$KUEUE_BIN.tmp" "$KUEUE_BIN"
}

main() {
  command -v go >/dev/null || { echo "build.sh: no Go toolchain on PATH (need Go >= 1.24, e.g. /usr/local/go)" >&2; exit 1; }
  mkdir -p "$PASSHAT_CACHE_DIR"
  exec 8>"$PASSHAT_CACHE_DIR/build.lock"
  flock 8 # one build at a time: concurrent builds of one component would clobber each other
  case "${1:-all}" in
    kube) build_kube ;; etcd) build_etcd ;; kwok) build_kwok ;; helm) build_helm ;; seaweed) build_seaweed ;;
    kueue) build_kueue ;;
    all)
      # NB: the small builds run beside the big one: they fill the cores while its
      # compile queue drains and while it links (linking is mostly single-threaded).
      build_kube &
      local kube=$!
      (PASSHAT_BUILD_JOBS=1 build_etcd && PASSHAT_BUILD_JOBS=1 build_kwok && PASSHAT_BUILD_JOBS=1 build_helm)
      wait "$kube"
      # NB: SeaweedFS and Kueue last, side by side at -p 1: one on each core, and each
      # one's single-threaded link overlaps the other's compile. (SeaweedFS alone beside
      # the chain above at -p 1 left a core idle for most of its ~10 minutes.)
      # PASSHAT_KUEUE=later leaves Kueue out: hack/test.sh builds it beside the image
      # build and the unit tests, which leave a core idle.
      if [[ "${PASSHAT_KUEUE:-}" == later ]]; then
        build_seaweed
      else
        PASSHAT_BUILD_JOBS=1 build_kueue &
        local kueue=$!
        PASSHAT_BUILD_JOBS=1 build_seaweed
        wait "$kueue"
      fi
      ;;
    *) echo "usage: build.sh [kube|etcd|kwok|helm|seaweed|kueue|all]" >&2; exit 2 ;;
  esac
}
[[ "${BASH_SOURCE[0]}" == "$0" ]] && main "$@"
