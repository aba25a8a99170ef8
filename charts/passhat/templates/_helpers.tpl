{{/* The chart name, or nameOverride. */}}
{{- define "passhat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's resources: fullnameOverride, else the release name, plus the
chart name unless the release name already contains it. Truncated to 63 characters (DNS label).
*/}}
{{- define "passhat.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart label value: name-version. */}}
{{- define "passhat.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "passhat.labels" -}}
helm.sh/chart: {{ include "passhat.chart" . }}
{{ include "passhat.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: passhat
{{- end }}

{{/* Labels that select the operator pod (immutable once installed). */}}
{{- define "passhat.selectorLabels" -}}
app.kubernetes.io/name: {{ include "passhat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "passhat.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "passhat.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image reference. */}}
{{- define "passhat.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The scrape job of the operator, as `up{job=...}` sees it. */}}
{{- define "passhat.metricsJob" -}}
{{- default (include "passhat.fullname" .) .Values.prometheusRule.operatorDown.job }}
{{- end }}

{{/*
The operator's permissions, shared by the ClusterRole (cluster-wide mode) and each Role
(namespaced mode): exactly the calls it makes (passhat/operator/kube.py API_CALLS, held to
this by tests/unit/test_chart_rbac.py). No Secrets, no pods/exec, no evictions, no lists or
watches of ConfigMaps.
*/}}
{{- define "passhat.rules" -}}
# The resource it serves: kopf watches it and patches its finalizer and annotations; each
# pass reads it (get) and writes its status (patch).
- apiGroups: [passhat.dev]
  resources: [consistencyevals]
  verbs: [get, list, watch, patch]
- apiGroups: [passhat.dev]
  resources: [consistencyevals/status]
  verbs: [patch]
# One pod per trial attempt: create, list/watch/get, release its finalizer (patch), delete.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
# Transcripts archived into the record store.
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
# Task lists kept in ConfigMaps (spec.tasksFrom): each one read by name.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
# Events about retries, config errors and completion.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{ include "passhat.leaseRules" . }}
{{- end }}

{{/*
Leases: the replicas' leader election (the release's Lease) and the claim on each served
namespace (Lease passhat-operator). Only these two names may be read or written; create
cannot be limited to names (RBAC), and a new Lease takes nothing from anyone.
*/}}
{{- define "passhat.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [passhat-operator, {{ include "passhat.fullname" . }}]
  verbs: [get, update]
{{- end }}

{{/* The RoleBinding of the operator in each served namespace (namespaced mode). */}}
{{- define "passhat.servedBinding" -}}
{{- printf "%s-served" (include "passhat.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Whether the served namespaces' RoleBindings carry passhat.dev/operator-rights: namespaced
mode, with a leader (it removes the finalizer from a namespace being deleted) and the drain
hook (it removes them all before uninstall).
*/}}
{{- define "passhat.rightsFinalizer" -}}
{{- $ops := include "passhat.ops" . | fromYaml }}
{{- if and .Values.watchNamespaces $ops.leaderElection $ops.drainOnUninstall }}true{{ end }}
{{- end }}

{{/* Namespaced mode: read and release the finalizer of its own RoleBindings (by name). */}}
{{- define "passhat.bindingRules" -}}
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  resourceNames: [{{ include "passhat.servedBinding" . }}]
  verbs: [get, patch]
{{- end }}

{{/* The Lease the replicas elect a leader on (namespace/name). */}}
{{- define "passhat.lease" -}}
{{ .Release.Namespace }}/{{ include "passhat.fullname" . }}
{{- end }}

{{/* `passhat operator` arguments shared by the Deployment and the drain hook's Job. */}}
{{- define "passhat.commonArgs" -}}
- --pod-key-file=/etc/passhat/pod-key/key
{{- range .Values.watchNamespaces }}
- --namespace={{ . }}
{{- end }}
{{- if include "passhat.rightsFinalizer" . }}
- --rights-binding={{ include "passhat.servedBinding" . }}
{{- end }}
{{- $ops := include "passhat.ops" . | fromYaml }}
{{- if $ops.leaderElection }}
- --lease={{ include "passhat.lease" . }}
- --lease-duration={{ $ops.leaseDurationSeconds }}
- --renew-deadline={{ $ops.renewDeadlineSeconds }}
- --retry-period={{ $ops.retryPeriodSeconds }}
{{- end }}
{{- with .Values.records }}
{{- if eq .store "s3" }}
- --records-store=s3://{{ .s3.bucket }}/{{ .s3.prefix }}
{{- with .s3.endpoint }}
- --records-s3-endpoint={{ . }}
{{- end }}
- --records-s3-region={{ .s3.region }}
{{- else if eq .store "pvc" }}
- --records-store=file:///var/lib/passhat/records
{{- end }}
- --set=archive_log_limit_bytes={{ int64 .logLimitBytes }}
{{- end }}
{{- end }}

{{/* Environment shared by the Deployment and the drain hook's Job. */}}
{{- define "passhat.commonEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if eq .Values.records.store "s3" }}
# The record store's credentials: only the operator sees them, never a trial pod.
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.records.s3.credentialsSecret }}
      key: AWS_ACCESS_KEY_ID
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.records.s3.credentialsSecret }}
      key: AWS_SECRET_ACCESS_KEY
{{- end }}
{{- with .Values.operator.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The Secret holding the key of the operator's creation mark on its pods. */}}
{{- define "passhat.podKeySecret" -}}
{{- if .Values.operator.podKey.existingSecret -}}
{{- .Values.operator.podKey.existingSecret -}}
{{- else -}}
{{- printf "%s-pod-key" (include "passhat.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
The claim of the embedded record store: an existing one, or the one the chart creates.
*/}}
{{- define "passhat.recordsClaim" -}}
{{- if .Values.records.pvc.existingClaim -}}
{{- .Values.records.pvc.existingClaim -}}
{{- else -}}
{{- printf "%s-records" (include "passhat.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
Refuse to install a release that would serve a namespace another passhat release serves:
its claim (Lease passhat-operator in that namespace, passhat/operator/leader.py) is held by
another release and was renewed within its lease duration. Needs cluster access (helm
install / upgrade); where the chart is rendered without it (helm template, GitOps) the
operator refuses at run time instead, in its log.
*/}}
{{- define "passhat.checkClaims" -}}
{{- if (include "passhat.ops" . | fromYaml).leaderElection }}
{{- $self := include "passhat.lease" . }}
{{- range $ns := .Values.watchNamespaces }}
{{- $lease := lookup "coordination.k8s.io/v1" "Lease" $ns "passhat-operator" }}
{{- $spec := (get ($lease | default dict) "spec") | default dict }}
{{- $holder := get $spec "holderIdentity" | default "" }}
{{- if and $holder (ne $holder $self) (get $spec "renewTime") }}
{{- $renewed := toDate "2006-01-02T15:04:05.999999Z07:00" (get $spec "renewTime") | unixEpoch | int64 }}
{{- $ago := sub (now | unixEpoch | int64) $renewed }}
{{- if lt $ago (int64 (get $spec "leaseDurationSeconds" | default 0)) }}
{{- fail (printf "namespace %s is already served by passhat release %s (Lease %s/passhat-operator renewed %ds ago): two operators must not drive the same evals; uninstall that release first, or give this one other watchNamespaces" $ns $holder $ns $ago) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The day-2 values (0.4.0) with the chart's defaults where a key is missing: `helm upgrade
--reuse-values` from 0.3.x keeps only the old release's values, without the new keys
(use `--reset-then-reuse-values` to get the new defaults the Helm way). Rendered as YAML;
templates read it with `include "passhat.ops" . | fromYaml`.
*/}}
{{- define "passhat.ops" -}}
{{- $le := .Values.leaderElection | default dict -}}
{{- $pdb := .Values.podDisruptionBudget | default dict -}}
leaderElection: {{ dig "enabled" true $le }}
leaseDurationSeconds: {{ dig "leaseDurationSeconds" 10 $le }}
renewDeadlineSeconds: {{ dig "renewDeadlineSeconds" 7 $le }}
retryPeriodSeconds: {{ dig "retryPeriodSeconds" 2 $le }}
replicaCount: {{ .Values.replicaCount | default 2 }}
podDisruptionBudget: {{ dig "enabled" true $pdb }}
minAvailable: {{ dig "minAvailable" 1 $pdb }}
drainOnUninstall: {{ hasKey .Values "drainOnUninstall" | ternary .Values.drainOnUninstall true }}
drainTimeoutSeconds: {{ .Values.drainTimeoutSeconds | default 300 }}
{{- end }}
