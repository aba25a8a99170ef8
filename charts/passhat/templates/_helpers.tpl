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
(namespaced mode). Least privilege: no Secrets, no pods/exec, no evictions.
*/}}
{{- define "passhat.rules" -}}
# The resource it serves: watch it, add kopf's finalizer/annotations, write its status.
- apiGroups: [passhat.dev]
  resources: [consistencyevals]
  verbs: [get, list, watch, patch, update]
- apiGroups: [passhat.dev]
  resources: [consistencyevals/status]
  verbs: [get, patch, update]
# One pod per trial attempt: create, read, release its finalizer (patch), delete.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
# Task lists kept in ConfigMaps (spec.tasksFrom); read-only.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
# Events about retries, config errors and completion.
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
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
