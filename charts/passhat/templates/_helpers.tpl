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
