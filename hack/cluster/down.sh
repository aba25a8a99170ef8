#!/usr/bin/env bash
# Stops the test cluster and removes its state: etcd data, containers and their mounts,
# kubelet dirs, certificates, configs, and the logs (KEEP_LOGS=1 keeps .cluster/logs).
# The build cache (${PASSHAT_CACHE_DIR:-/var/cache/passhat}) and .cluster/bin are kept.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) == 0 ]] || die "down.sh needs root"
mkdir -p "$CLUSTER_DIR"
exec 9>"$CLUSTER_DIR/up.lock"
flock 9

# NB: Kueue's webhook configurations first: they fail closed, and the API server is still up.
if [[ -f "$KUBECONFIG_ADMIN" ]]; then
  kc delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found --timeout 20s >/dev/null 2>&1
  kc delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found --timeout 20s >/dev/null 2>&1
fi
stop_component kueue 10
rm -rf "$KUEUE_METRICS_CERTS"
stop_component weed 10 # the S3 server (SeaweedFS); its data is under $STATE
stop_component kwok 10
stop_component kubelet 20
# Kill every pod sandbox/container the kubelet left behind, then containerd itself.
if [[ -S "$CONTAINERD_SOCK" ]]; then
  for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  sleep 1
  for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
  done
fi
stop_component containerd 20
for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_component "$c" 20; done

# Unmount whatever the kubelet and containerd mounted under our state, deepest first.
if [[ -d "$STATE" || -d "$RUNTIME" ]]; then
  awk -v s="$STATE" -v r="$RUNTIME" '$2 ~ "^"s || $2 ~ "^"r {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
fi
# Pod network namespaces the CRI plugin made (bind mounts under /run/netns).
for ns in /run/netns/cni-*; do
  [[ -e $ns ]] || continue
  umount "$ns" 2>/dev/null || true
  rm -f "$ns"
done
ip link delete passhat0 2>/dev/null || true
iptables -t nat -S 2>/dev/null | grep -- "-d $SERVICE_IP/32" | sed 's/^-A/-D/' |
  while read -r rule; do eval "iptables -t nat $rule" 2>/dev/null || true; done
rm -rf "$STATE" "$RUNTIME" "$RUN" "$PKI" "$ETC" "$KUBECONFIG_ADMIN" "$CLUSTER_DIR/s3.env"
rm -rf /var/log/pods/* /var/log/containers/* 2>/dev/null # the kubelet's fixed log dirs
[[ "${KEEP_LOGS:-0}" == 1 ]] || rm -rf "$LOGS"
log "cluster stopped and its state removed"
