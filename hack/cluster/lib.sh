# Shared functions of up.sh / down.sh / restart-apiserver.sh. Sourced, never run.
# Layout: state that tools rely on lives in the repo's .cluster/ (git-ignored):
#   .cluster/kubeconfig  admin kubeconfig        .cluster/bin/   kubectl, helm, kwok, ...
#   .cluster/logs/       one log per component  .cluster/pki/   certificates (openssl)
#   .cluster/etc/        generated configs      .cluster/run/   pid files
# Runtime state that must sit on a normal filesystem (etcd data, containerd, kubelet) is
# under ${PASSHAT_STATE_DIR:-/var/lib/passhat-cluster}; sockets under /run/passhat-cluster.
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

BIN="$CLUSTER_DIR/bin"
LOGS="$CLUSTER_DIR/logs"
PKI="$CLUSTER_DIR/pki"
ETC="$CLUSTER_DIR/etc"
RUN="$CLUSTER_DIR/run"
KUBECONFIG_ADMIN="$CLUSTER_DIR/kubeconfig"
STATE="${PASSHAT_STATE_DIR:-/var/lib/passhat-cluster}"
RUNTIME="/run/passhat-cluster"
CONTAINERD_SOCK="$RUNTIME/containerd/containerd.sock"
NODE_NAME=passhat-node
KWOK_NODES="${PASSHAT_KWOK_NODES:-2}"
API_PORT=6443
# The API server's /debug/pprof: off, unless a benchmark asks (bench/throughput.py --profile
# needs it; PASSHAT_APISERVER_PROFILING=true hack/cluster/up.sh restarts the API server with it).
APISERVER_PROFILING="${PASSHAT_APISERVER_PROFILING:-false}"
API_URL="https://127.0.0.1:${API_PORT}"
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
POD_CIDR=10.88.0.0/16
KWOK_CIDR=10.200.0.1/16
# kwok's kubelet-like server (pod logs of fake pods): every fake node advertises this
# address (InternalIP) and port (daemonEndpoints), so the API server dials it on loopback.
KWOK_NODE_IP=127.0.0.1
KWOK_PORT=10251
# Kueue (a host process, see up.sh): its webhook server, metrics and health probes, on
# loopback only. Its pod webhooks see only namespaces carrying this label (value "true").
KUEUE_WEBHOOK_PORT=9543
KUEUE_METRICS_PORT=9544
KUEUE_HEALTH_PORT=9545
KUEUE_NAMESPACE=kueue-system
KUEUE_NAMESPACE_LABEL=passhat.dev/test-kueue
# NB: with its internal cert management off, Kueue reads its metrics cert from this fixed path.
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs
PAUSE_IMAGE=localhost/passhat/pause:3.10
BUSYBOX_IMAGE=localhost/passhat/busybox:test
PAUSE_BIN="${PASSHAT_CACHE_DIR}/bin-pause-$(sha256sum "$(dirname "${BASH_SOURCE[0]}")/pause/main.go" | cut -c1-12)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "[cluster $(date +%T)] $*" >&2; }
die() { echo "[cluster $(date +%T)] ERROR: $*" >&2; exit 1; }
# apt-get, one at a time: hack/test.sh installs chromium and the image tools in the
# background while up.sh installs its packages (dpkg's own lock would fail the second).
apt_locked() { mkdir -p /run/lock && flock /run/lock/passhat-apt.lock apt-get "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# The host's primary IPv4 (source address of the default route); 127.0.0.1 if none.
node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="src") print $(i+1)}' | head -1)
  echo "${ip:-127.0.0.1}"
}

# wait_until DESCRIPTION TIMEOUT_S LOGFILE CMD...: poll CMD once a second; on timeout show
# the component's log tail and fail.
wait_until() {
  local what=$1 timeout=$2 logfile=$3 deadline=$((SECONDS + $2)); shift 3
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "[cluster] ERROR: timed out after ${timeout}s waiting for $what" >&2
      [[ -n "$logfile" && -f "$logfile" ]] && { echo "--- last lines of $logfile:" >&2; tail -n 40 "$logfile" >&2; }
      exit 1
    fi
    sleep 1
  done
}

pid_alive() { # NAME: is the process recorded in run/NAME.pid alive (and still NAME)?
  local f="$RUN/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1"
}

# start_component NAME CMD...: start CMD detached (own session), log to logs/NAME.log.
start_component() {
  local name=$1; shift
  mkdir -p "$RUN" "$LOGS"
  echo "=== $(date -Is) starting: $*" >>"$LOGS/$name.log"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$RUN/$name.pid"
  log "started $name (pid $!)"
}

stop_component() { # NAME [TIMEOUT_S]: SIGTERM, then SIGKILL after the timeout
  local name=$1 timeout=${2:-20} f="$RUN/$1.pid" pid i
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; }
    log "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

api_healthy() { curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$API_URL/readyz" >/dev/null; }

# ---------------------------------------------------------------- certificates (openssl)

# sign NAME CN ORG SANS [CA]: key + cert signed by the cluster CA (or pki/CA.crt);
# ORG/SANS may be empty.
sign() {
  local name=$1 cn=$2 org=$3 sans=$4 ca=${5:-ca} subj="/CN=$2"
  [[ -n "$org" ]] && subj="/O=$org/CN=$cn"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [[ -n "$sans" ]] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_certs() {
  local ip=$1
  if [[ -f "$PKI/done" && "$(cat "$PKI/done")" == "$ip" ]]; then make_front_proxy_certs; make_kwok_serving_cert; make_kueue_certs; return; fi
  log "making certificates (node ip $ip)"
  rm -rf "$PKI"; mkdir -p "$PKI"; chmod 700 "$PKI"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=passhat-test-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null
  sign apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:${SERVICE_IP},IP:${ip},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin admin system:masters ""
  sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
  sign controller-manager system:kube-controller-manager "" ""
  sign scheduler system:kube-scheduler "" ""
  sign kubelet "system:node:${NODE_NAME}" system:nodes ""
  sign kubelet-serving "$NODE_NAME" "" "IP:127.0.0.1,IP:${ip},DNS:${NODE_NAME},DNS:localhost"
  sign kwok kwok system:masters ""
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  make_front_proxy_certs
  make_kwok_serving_cert
  make_kueue_certs
  echo "$ip" >"$PKI/done"
}

# The aggregation layer's trust (extension API servers such as passhat's records API):
# a CA of its own whose one client cert is the API server's front proxy. An extension
# server believes X-Remote-User only over a connection with a cert of this CA and an
# allowed CN, so no other client cert of the cluster CA can claim to be anybody.
# Made apart from the rest, so a PKI from before it gains it without being replaced.
make_front_proxy_certs() {
  [[ -f "$PKI/front-proxy-client.crt" ]] && return
  log "making the front-proxy CA and client certificate"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/front-proxy-ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/front-proxy-ca.key" -subj "/CN=passhat-front-proxy-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/front-proxy-ca.crt" 2>/dev/null
  sign front-proxy-client front-proxy-client "" "" front-proxy-ca
}

# kwok's serving cert: the API server verifies a kubelet's cert against the cluster CA
# (--kubelet-certificate-authority) for the address it dials, the fake nodes' InternalIP.
# Made apart from the rest, so a PKI from before it gains it without being replaced.
make_kwok_serving_cert() {
  [[ -f "$PKI/kwok-serving.crt" ]] && return
  log "making kwok's serving certificate (IP $KWOK_NODE_IP)"
  sign kwok-serving kwok-serving "" "IP:${KWOK_NODE_IP},DNS:localhost"
}

# Kueue's client cert (system:masters, like kwok's) and the serving cert of its webhook and
# metrics servers (IP SAN 127.0.0.1: the API server calls the webhooks by URL). Made apart
# from the rest, so a PKI from before it gains them without being replaced.
make_kueue_certs() {
  [[ -f "$PKI/kueue/tls.crt" ]] && return
  log "making Kueue's certificates"
  sign kueue kueue system:masters ""
  sign kueue-serving kueue-webhook "" "IP:127.0.0.1,DNS:localhost,DNS:kueue-webhook-service.${KUEUE_NAMESPACE}.svc"
  mkdir -p "$PKI/kueue"
  mv "$PKI/kueue-serving.key" "$PKI/kueue/tls.key"
  mv "$PKI/kueue-serving.crt" "$PKI/kueue/tls.crt"
}

# write_kubeconfig FILE CERTNAME: a self-contained kubeconfig for pki/CERTNAME.crt
write_kubeconfig() {
  local file=$1 name=$2
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: passhat
  cluster:
    server: ${API_URL}
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: ${name}
  user:
    client-certificate-data: $(base64 -w0 "$PKI/${name}.crt")
    client-key-data: $(base64 -w0 "$PKI/${name}.key")
contexts:
- name: passhat
  context: {cluster: passhat, user: ${name}, namespace: default}
current-context: passhat
KC
}
