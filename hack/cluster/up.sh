#!/usr/bin/env bash
# Brings up the single-machine test cluster: etcd, kube-apiserver, controller-manager,
# scheduler, one real node (kubelet + containerd) and kwok fake nodes. Builds what is
# missing into ${PASSHAT_CACHE_DIR:-/var/cache/passhat}; reuses a healthy running cluster
# in seconds and restarts dead components. Needs root. See docs/cluster.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) == 0 ]] || die "up.sh needs root (it runs containerd and a kubelet)"
mkdir -p "$LOGS" "$RUN" "$ETC" "$BIN"
T0=$SECONDS
NODE_IP=$(node_ip)

# ------------------------------------------------------------------ prerequisites

ensure_packages() {
  local need=() pkgs=(containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
    prometheus:prometheus promtool:prometheus /bin/busybox:busybox-static openssl:openssl
    iptables:iptables conntrack:conntrack curl:curl)
  local p
  for p in "${pkgs[@]}"; do
    local what=${p%%:*} pkg=${p##*:}
    if [[ $what == /* ]]; then [[ -e $what ]] || need+=("$pkg"); else command -v "$what" >/dev/null || need+=("$pkg"); fi
  done
  ((${#need[@]})) || return 0
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  log "installing Debian packages: ${need[*]}"
  local start=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt_locked install -y --no-install-recommends "${need[@]}" >>"$LOGS/apt.log" 2>&1 ||
    { apt_locked update >>"$LOGS/apt.log" 2>&1 && apt_locked install -y --no-install-recommends "${need[@]}" >>"$LOGS/apt.log" 2>&1; } ||
    { tail -20 "$LOGS/apt.log" >&2; die "apt-get install ${need[*]} failed (log: $LOGS/apt.log)"; }
  log "packages installed in $((SECONDS - start))s"
}

build_all() {
  "$HERE/build.sh" all 2>&1 | tee -a "$LOGS/build.log" >&2 || die "build failed (log: $LOGS/build.log)"
  if [[ ! -x "$PAUSE_BIN/pause" ]]; then
    mkdir -p "$PAUSE_BIN"
    (cd "$HERE/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$PAUSE_BIN/pause" .) ||
      die "building the pause binary failed"
  fi
  local b
  for b in "$KUBE_BIN"/* "$ETCD_BIN/etcd" "$KWOK_BIN/kwok" "$HELM_BIN/helm" "$SEAWEED_BIN/weed"; do ln -sfn "$b" "$BIN/$(basename "$b")"; done
  kueue_later || ln -sfn "$KUEUE_BIN/kueue" "$BIN/kueue"
  ln -sfn /usr/bin/promtool "$BIN/promtool"
}

# ------------------------------------------------------------------ control plane

start_etcd() {
  pid_alive etcd && return
  mkdir -p "$STATE/etcd"
  start_component etcd "$BIN/etcd" --name passhat --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster passhat=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --quota-backend-bytes 8589934592 --snapshot-count 10000 --log-level warn
  wait_until "etcd" 60 "$LOGS/etcd.log" curl -sf http://127.0.0.1:2381/health
}

# The API server's command line, in APISERVER_ARGS.
apiserver_args() {
  APISERVER_ARGS=("$BIN/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --secure-port "$API_PORT" --advertise-address "$NODE_IP" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --audit-policy-file "$ETC/audit-policy.yaml" --audit-log-path "$LOGS/audit.log" \
    --audit-log-maxsize 500 --audit-log-maxbackup 2 \
    --max-requests-inflight 800 --max-mutating-requests-inflight 400 \
    --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --profiling="$APISERVER_PROFILING" --v 1)
}

# Was the running API server started with other flags (by an older up.sh)?
apiserver_stale() {
  apiserver_args
  [[ "$(tr '\0' ' ' <"/proc/$(cat "$RUN/kube-apiserver.pid")/cmdline" 2>/dev/null)" != "${APISERVER_ARGS[*]} " ]]
}

start_apiserver() {
  if pid_alive kube-apiserver && apiserver_stale; then
    log "kube-apiserver runs with old flags: restarting it"
    stop_component kube-apiserver 10
  fi
  # NB: a copy in the cluster's own directory: the flag then names no checkout's path.
  cmp -s "$HERE/audit-policy.yaml" "$ETC/audit-policy.yaml" || cp "$HERE/audit-policy.yaml" "$ETC/audit-policy.yaml"
  pid_alive kube-apiserver && { wait_until "kube-apiserver /readyz" 180 "$LOGS/kube-apiserver.log" api_healthy; return; }
  apiserver_args
  start_component kube-apiserver "${APISERVER_ARGS[@]}"
  wait_until "kube-apiserver /readyz" 180 "$LOGS/kube-apiserver.log" api_healthy
}

start_controller_manager() {
  pid_alive kube-controller-manager && return
  write_kubeconfig "$ETC/controller-manager.kubeconfig" controller-manager
  start_component kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$ETC/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$ETC/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$ETC/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --kube-api-qps 200 --kube-api-burst 400 --concurrent-gc-syncs 20 \
    --profiling=false --v 1
}

start_scheduler() {
  pid_alive kube-scheduler && return
  write_kubeconfig "$ETC/scheduler.kubeconfig" scheduler
  cat >"$ETC/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $ETC/scheduler.kubeconfig
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
YAML
  start_component kube-scheduler "$BIN/kube-scheduler" --config "$ETC/scheduler.yaml" \
    --authentication-kubeconfig "$ETC/scheduler.kubeconfig" \
    --authorization-kubeconfig "$ETC/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --profiling=false --v 1
}

# ------------------------------------------------------------------ real node

write_containerd_config() {
  mkdir -p "$ETC/containerd/certs.d" "$STATE/cni/net.d" "$STATE/cni/ipam"
  local reg
  # NB: containerd 1.6 has no _default fallback: one hosts.toml per registry name, each
  # with a [host] table pointing at a closed loopback port, so any pull fails at once.
  for reg in docker.io registry-1.docker.io registry.k8s.io k8s.gcr.io gcr.io ghcr.io quay.io \
    public.ecr.aws mcr.microsoft.com nvcr.io localhost; do
    mkdir -p "$ETC/containerd/certs.d/$reg"
    cat >"$ETC/containerd/certs.d/$reg/hosts.toml" <<TOML
server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
TOML
  done
  cat >"$ETC/containerd/config.toml" <<TOML
version = 2
root = "$STATE/containerd"
state = "$RUNTIME/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/containerd/certs.d"
TOML
  cat >"$STATE/cni/net.d/10-passhat.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "passhat",
  "plugins": [
    {"type": "bridge", "bridge": "passhat0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$STATE/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }

start_containerd() {
  if ! pid_alive containerd; then
    write_containerd_config
    start_component containerd containerd --config "$ETC/containerd/config.toml"
  fi
  wait_until "containerd socket" 60 "$LOGS/containerd.log" ctr_ version
}

import_images() {
  local images
  images=$(ctr_ images ls -q 2>/dev/null || true)
  if ! grep -qx "$PAUSE_IMAGE" <<<"$images"; then
    python3 "$HERE/oci_image.py" --name "$PAUSE_IMAGE" --out "$STATE/pause.tar" \
      --file "$PAUSE_BIN/pause:/pause" --entrypoint /pause
    ctr_ images import --platform linux/amd64 "$STATE/pause.tar" >/dev/null || die "importing $PAUSE_IMAGE failed"
    log "imported $PAUSE_IMAGE"
  fi
  if ! grep -qx "$BUSYBOX_IMAGE" <<<"$images"; then
    python3 "$HERE/oci_image.py" --name "$BUSYBOX_IMAGE" --out "$STATE/busybox.tar" --busybox /bin/busybox
    ctr_ images import --platform linux/amd64 "$STATE/busybox.tar" >/dev/null || die "importing $BUSYBOX_IMAGE failed"
    log "imported $BUSYBOX_IMAGE"
  fi
}

# Without kube-proxy, pods reach the API server's service IP through one DNAT rule.
service_ip_rule() {
  local rule=(-d "$SERVICE_IP/32" -p tcp --dport 443 -j DNAT --to-destination "$NODE_IP:$API_PORT")
  local chain
  for chain in PREROUTING OUTPUT; do
    iptables -t nat -C "$chain" "${rule[@]}" 2>/dev/null || iptables -t nat -A "$chain" "${rule[@]}" 2>/dev/null ||
      log "WARNING: could not add the $SERVICE_IP DNAT rule ($chain): pods cannot use the kubernetes service"
  done
}

start_kubelet() {
  pid_alive kubelet && return
  mkdir -p "$STATE/kubelet"
  write_kubeconfig "$ETC/kubelet.kubeconfig" kubelet
  local resolv=/etc/resolv.conf
  [[ -f $resolv ]] || resolv=""
  cat >"$ETC/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$PKI/kubelet-serving.crt"
tlsPrivateKeyFile: "$PKI/kubelet-serving.key"
containerRuntimeEndpoint: "unix://$CONTAINERD_SOCK"
cgroupDriver: cgroupfs
cgroupsPerQOS: true
failSwapOn: false
oomScoreAdj: 0
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
resolvConf: "$resolv"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
evictionPressureTransitionPeriod: 10s
serializeImagePulls: false
maxPods: 110
podPidsLimit: 4096
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
shutdownGracePeriod: 0s
YAML
  start_component kubelet "$BIN/kubelet" --config "$ETC/kubelet.yaml" \
    --kubeconfig "$ETC/kubelet.kubeconfig" --root-dir "$STATE/kubelet" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --node-labels type=real \
    --v 1
}

# ------------------------------------------------------------------ kwok fake nodes

# kwok's --config file: its options, then the Stages. Its kubelet-like server (pod logs of
# fake pods, from ClusterLogs/Logs objects) listens on loopback only, with a serving cert
# of the cluster CA; every fake node advertises that address and port (node-initialize).
# NB: a config file gets no defaults, so enableDebuggingHandlers (the logs route) is set.
kwok_config() {
  cat <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: false
  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake
  cidr: $KWOK_CIDR
  nodeIP: $KWOK_NODE_IP
  nodePort: $KWOK_PORT
  serverAddress: $KWOK_NODE_IP:$KWOK_PORT
  tlsCertFile: $PKI/kwok-serving.crt
  tlsPrivateKeyFile: $PKI/kwok-serving.key
  enableCRDs: [ClusterLogs, Logs]
  enableDebuggingHandlers: true
  enableProfilingHandler: false
  enableContentionProfiling: false
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 2
  podsOnNodeSyncParallelism: 2
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
---
YAML
  cat "$HERE/kwok/stages.yaml"
}

# The ClusterLogs and Logs CRDs (kwok.x-k8s.io/v1alpha1), from kwok's own module tree.
install_kwok_crds() {
  local src="$GOMODCACHE/sigs.k8s.io/kwok@$KWOK_VERSION" kind
  [[ -d "$src/kustomize/crd/bases" ]] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION" >>"$LOGS/build.log" 2>&1 ||
    die "kwok's module source ($src) is missing and go mod download failed (log: $LOGS/build.log)"
  for kind in clusterlogs logs; do
    kc apply --server-side --force-conflicts -f "$src/kustomize/crd/bases/kwok.x-k8s.io_$kind.yaml" >/dev/null ||
      die "installing kwok's $kind CRD failed"
  done
  kc wait --for condition=Established --timeout 60s crd/clusterlogs.kwok.x-k8s.io crd/logs.kwok.x-k8s.io >/dev/null ||
    die "kwok's ClusterLogs/Logs CRDs are not established"
}

# Does fake node NAME advertise kwok's server (InternalIP:kubelet port)?
kwok_node_advertised() {
  [[ $(kc get node "$1" -o 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}:{.status.daemonEndpoints.kubeletEndpoint.Port}' 2>/dev/null) == "$KWOK_NODE_IP:$KWOK_PORT" ]]
}

# Is kwok running with this config, and does every fake node point at its server?
kwok_current() {
  cmp -s <(kwok_config) "$ETC/kwok.yaml" || return 1
  local i
  for ((i = 0; i < KWOK_NODES; i++)); do kwok_node_advertised "kwok-node-$i" || return 1; done
}

start_kwok() {
  if pid_alive kwok && ! cmp -s <(kwok_config) "$ETC/kwok.yaml"; then
    log "kwok runs with an old configuration: restarting it"
    stop_component kwok 10
  fi
  if ! pid_alive kwok; then
    write_kubeconfig "$ETC/kwok.kubeconfig" kwok
    install_kwok_crds
    kwok_config >"$ETC/kwok.yaml"
    start_component kwok "$BIN/kwok" --kubeconfig "$ETC/kwok.kubeconfig" --config "$ETC/kwok.yaml"
  fi
  wait_until "kwok's server on $KWOK_NODE_IP:$KWOK_PORT" 60 "$LOGS/kwok.log" \
    curl -sf --max-time 5 --cacert "$PKI/ca.crt" "https://$KWOK_NODE_IP:$KWOK_PORT/healthz"
  local i n
  for ((i = 0; i < KWOK_NODES; i++)); do
    n="kwok-node-$i"
    kc get node "$n" >/dev/null 2>&1 || kwok_node "$n" | kc apply --validate=false -f - >/dev/null
    # NB: node-initialize sets the address only on a node not yet Ready; one made by an
    # older up.sh (other address, no port) is patched, its pods untouched.
    kwok_node_advertised "$n" ||
      kc patch node "$n" --subresource=status --type=merge -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$KWOK_NODE_IP\"},{\"type\":\"Hostname\",\"address\":\"$n\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":$KWOK_PORT}}}}" >/dev/null ||
      die "could not point node $n at kwok's server"
    wait_until "node $n to advertise $KWOK_NODE_IP:$KWOK_PORT" 60 "$LOGS/kwok.log" kwok_node_advertised "$n"
  done
}

kwok_node() { # NAME: the manifest of one fake node
  cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
spec:
  taints:
  - {key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "11000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "11000"}
YAML
}

# ------------------------------------------------------------------ S3 server (record archive)

# SeaweedFS in one process (master, volume server, filer, S3 gateway), data under $STATE.
# S3 listens on every address: pods reach it at the node IP, host processes at 127.0.0.1
# too. Its other ports (master, volume, filer: no S3 credentials there) are test-only.
S3_PORT=8333
S3_BUCKET=passhat-records
S3_ENV="$CLUSTER_DIR/s3.env"

s3_var() { [[ ! -f "$S3_ENV" ]] || sed -n "s/^export $1=//p" "$S3_ENV" | head -1; } # NAME: its value in s3.env
s3_answers() { # any HTTP answer at all (403 to an unsigned request) means the gateway is up
  [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$S3_PORT/") != 000 ]]
}
s3_signed() { # METHOD PATH: a request signed with the generated credentials; prints the status
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X "$1" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$(s3_var AWS_ACCESS_KEY_ID):$(s3_var AWS_SECRET_ACCESS_KEY)" "http://127.0.0.1:$S3_PORT$2"
}
s3_healthy() { [[ -f "$S3_ENV" ]] && pid_alive weed && [[ $(s3_signed GET "/$S3_BUCKET?max-keys=1") == 200 ]]; }

# s3.env (the endpoint, bucket and credentials, for tests and humans) and the gateway's
# identity file; keys are made once (random) and kept while .cluster/ lives. Both 0600.
write_s3_config() {
  local access secret
  access=$(s3_var AWS_ACCESS_KEY_ID)
  secret=$(s3_var AWS_SECRET_ACCESS_KEY)
  [[ -n $access && -n $secret ]] || { access=$(openssl rand -hex 10); secret=$(openssl rand -hex 20); }
  (
    umask 077
    cat >"$S3_ENV.tmp" <<ENV
# Made by hack/cluster/up.sh: the test cluster's S3 server (SeaweedFS). \`source\` this file.
export PASSHAT_S3_ENDPOINT=http://$NODE_IP:$S3_PORT
export PASSHAT_S3_BUCKET=$S3_BUCKET
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_DEFAULT_REGION=us-east-1
ENV
    mv "$S3_ENV.tmp" "$S3_ENV"
    printf '{"identities": [{"name": "passhat", "credentials": [{"accessKey": "%s", "secretKey": "%s"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}\n' "$access" "$secret" >"$ETC/s3.json"
  )
}

start_s3() {
  s3_healthy && return
  write_s3_config
  stop_component weed 10 # NB: alive but not answering with these keys: start afresh
  mkdir -p "$STATE/seaweedfs"
  start_component weed "$BIN/weed" mini -dir="$STATE/seaweedfs" -ip="$NODE_IP" -ip.bind=0.0.0.0 \
    -s3.config="$ETC/s3.json" -s3.port="$S3_PORT" -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.port=9333 -volume.port=9340 -filer.port=8888 \
    -webdav=false -admin.ui=false -master.telemetry=false
  wait_until "S3 server (SeaweedFS) on :$S3_PORT" 90 "$LOGS/weed.log" s3_answers
  local code
  code=$(s3_signed PUT "/$S3_BUCKET")
  [[ $code == 200 || $code == 409 ]] || { tail -n 40 "$LOGS/weed.log" >&2; die "creating bucket $S3_BUCKET failed (HTTP $code)"; }
  wait_until "bucket $S3_BUCKET" 30 "$LOGS/weed.log" s3_healthy
  log "S3 server up: http://$NODE_IP:$S3_PORT bucket $S3_BUCKET (source $S3_ENV)"
}

# ------------------------------------------------------------------ Kueue (job queueing)

# Kueue's manager as a host process (like kwok), its CRDs and webhook configurations from
# its own module tree (which `build.sh kueue` downloaded). Only the plain-pod integration
# is on, only for namespaces labelled $KUEUE_NAMESPACE_LABEL=true and pods with a queue
# name (the webhooks' selectors and managedJobsNamespaceSelector), so a stopped Kueue
# blocks no pod but those of the tests that asked for it. Its certificates are files of
# the cluster PKI (internal cert management off); the API server calls it by URL.
KUEUE_SRC="$GOMODCACHE/sigs.k8s.io/kueue@$KUEUE_VERSION"
# PASSHAT_KUEUE=later: bring the cluster up without building or starting Kueue (hack/test.sh
# builds it in the background; the cluster tests' own up.sh then starts it).
kueue_later() { [[ "${PASSHAT_KUEUE:-}" == later ]]; }
KUEUE_URL="https://127.0.0.1:$KUEUE_WEBHOOK_PORT"

kueue_config() {
  cat <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: $KUEUE_NAMESPACE
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
  certDir: $PKI/kueue
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels:
    $KUEUE_NAMESPACE_LABEL: "true"
integrations:
  frameworks: [pod]
featureGates:
  VisibilityOnDemand: false
YAML
}

# Its CRDs (conversion webhooks by URL) and webhook configurations (cut down, fenced).
install_kueue_manifests() {
  [[ -d "$KUEUE_SRC/config/components/crd" ]] || go mod download "sigs.k8s.io/kueue@$KUEUE_VERSION" >>"$LOGS/build.log" 2>&1 ||
    die "Kueue's module source ($KUEUE_SRC) is missing and go mod download failed (log: $LOGS/build.log)"
  local rewrite=(python3 "$HERE/kueue_manifests.py" --base "$KUEUE_URL" --ca "$PKI/ca.crt" --namespace-label "$KUEUE_NAMESPACE_LABEL")
  # NB: server-side: the workloads CRD is too large for the last-applied annotation.
  kc kustomize "$KUEUE_SRC/config/components/crd" | "${rewrite[@]}" crds |
    kc apply --server-side --force-conflicts -f - >/dev/null || die "installing Kueue's CRDs failed"
  "${rewrite[@]}" webhooks <"$KUEUE_SRC/config/components/webhook/manifests.yaml" |
    kc apply --server-side --force-conflicts -f - >/dev/null || die "installing Kueue's webhook configurations failed"
  kc create namespace "$KUEUE_NAMESPACE" --dry-run=client -o yaml | kc apply -f - >/dev/null ||
    die "creating namespace $KUEUE_NAMESPACE failed"
  kc wait --for condition=Established --timeout 60s crd/workloads.kueue.x-k8s.io crd/clusterqueues.kueue.x-k8s.io >/dev/null ||
    die "Kueue's CRDs are not established"
}

kueue_ready() {
  curl -sf --max-time 3 "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz" >/dev/null &&
    curl -s -o /dev/null --max-time 3 --cacert "$PKI/ca.crt" "$KUEUE_URL/healthz"
}
kueue_current() { kueue_later || { cmp -s <(kueue_config) "$ETC/kueue.yaml" && pid_alive kueue && kueue_ready; }; }

start_kueue() {
  kueue_later && { log "Kueue left for later (PASSHAT_KUEUE=later)"; return; }
  if pid_alive kueue && ! cmp -s <(kueue_config) "$ETC/kueue.yaml"; then
    log "kueue runs with an old configuration: restarting it"
    stop_component kueue 10
  fi
  if ! pid_alive kueue; then
    write_kubeconfig "$ETC/kueue.kubeconfig" kueue
    mkdir -p "$KUEUE_METRICS_CERTS"
    cp "$PKI/kueue/tls.crt" "$PKI/kueue/tls.key" "$KUEUE_METRICS_CERTS/"
    kueue_config >"$ETC/kueue.yaml"
    install_kueue_manifests
    start_component kueue "$BIN/kueue" --config "$ETC/kueue.yaml" --kubeconfig "$ETC/kueue.kubeconfig" \
      --zap-log-level info
  fi
  wait_until "kueue (health :$KUEUE_HEALTH_PORT, webhooks :$KUEUE_WEBHOOK_PORT)" 120 "$LOGS/kueue.log" kueue_ready
}

# ------------------------------------------------------------------ checks

node_ready() { [[ $(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }
all_nodes_ready() {
  node_ready "$NODE_NAME" || return 1
  local i
  for ((i = 0; i < KWOK_NODES; i++)); do node_ready "kwok-node-$i" || return 1; done
}
all_alive() {
  local c
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kwok weed; do pid_alive "$c" || return 1; done
  kueue_later || pid_alive kueue
}

main() {
  exec 9>"$CLUSTER_DIR/up.lock"
  flock 9 # one up.sh at a time (several test sessions may call it at once)
  exec 2> >(tee -a "$LOGS/up.log" >&2)
  if [[ -f "$KUBECONFIG_ADMIN" ]] && all_alive && ! apiserver_stale && api_healthy && all_nodes_ready && kwok_current && s3_healthy && kueue_current; then
    log "cluster already up and healthy (reused in $((SECONDS - T0))s)"
    return 0
  fi
  log "bringing the cluster up (node ip $NODE_IP, state $STATE)"
  ensure_packages
  build_all
  make_certs "$NODE_IP"
  write_kubeconfig "$KUBECONFIG_ADMIN" admin
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  start_containerd
  import_images
  service_ip_rule
  start_kubelet
  start_kwok
  start_s3
  start_kueue
  wait_until "node $NODE_NAME Ready" 180 "$LOGS/kubelet.log" node_ready "$NODE_NAME"
  wait_until "kwok nodes Ready" 120 "$LOGS/kwok.log" all_nodes_ready
  wait_until "default service account" 120 "$LOGS/kube-controller-manager.log" kc get serviceaccount default -n default
  all_alive || die "a component died during start-up; see $LOGS/"
  log "cluster up in $((SECONDS - T0))s: export KUBECONFIG=$KUBECONFIG_ADMIN PATH=$BIN:\$PATH"
}
[[ -n "${PASSHAT_UP_NO_MAIN:-}" ]] || main "$@"
