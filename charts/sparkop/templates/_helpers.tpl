{{/* Names and labels. */}}
{{- define "sparkop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sparkop.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "sparkop.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "sparkop.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "sparkop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparkop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sparkop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sparkop.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sparkop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sparkop.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sparkop.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) }}
{{- end }}

{{/* "true" when the replicas elect a leader: as set, or when there is more than one. */}}
{{- define "sparkop.leaderElect" -}}
{{- $enabled := .Values.leaderElection.enabled }}
{{- if kindIs "bool" $enabled }}
{{- $enabled }}
{{- else if or (eq (toString $enabled) "") (eq (toString $enabled) "auto") }}
{{- gt (int .Values.replicaCount) 1 }}
{{- else }}
{{- fail (printf "leaderElection.enabled must be true, false or \"\" (on when replicaCount > 1), not %v" $enabled) }}
{{- end }}
{{- end }}

{{- define "sparkop.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* Where Spark drivers get their ServiceAccount and Role. */}}
{{- define "sparkop.sparkNamespaces" -}}
{{- if .Values.watchNamespaces }}
{{- toJson .Values.watchNamespaces }}
{{- else }}
{{- toJson .Values.spark.jobNamespaces }}
{{- end }}
{{- end }}

{{/*
What the operator does in a watched namespace: SparkApplications and SparkDrivers (and their
status), the driver pods, ConfigMaps and Services it renders, the Events it records, and the
Spark UI Ingresses, the batch schedulers' PodGroups (created, and read back after a 409 to check
they are ours), and Kueue's Workloads (created; their status says admitted, evicted, finished). The same rules in a ClusterRole (whole cluster) or in a Role per namespace.
*/}}
{{- define "sparkop.rules" -}}
- apiGroups: ["sparkop.io"]
  resources: ["sparkapplications", "sparkdrivers", "scheduledsparkapplications", "sparkconnects"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: ["sparkop.io"]
  resources: ["sparkapplications/status", "sparkdrivers/status", "scheduledsparkapplications/status", "sparkconnects/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: [""]
  resources: ["pods", "configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "delete", "patch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses", "networkpolicies"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: ["scheduling.volcano.sh", "scheduling.x-k8s.io"]
  resources: ["podgroups"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads/status"]
  verbs: ["get", "patch"]
{{- end }}
