{{/* Names and labels. Every name the chart gives an object derives from the release, so that two
releases (in one namespace, or watching the same job namespaces) never collide. */}}
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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* An object's annotations: commonAnnotations, then its own (a dict), as an `annotations:` block at
indent 2, or nothing when there are none. Call with (dict "root" $ "own" $annotations). */}}
{{- define "sparkop.annotations" -}}
{{- $all := merge (deepCopy (default dict .own)) (deepCopy (default dict .root.Values.commonAnnotations)) }}
{{- with $all -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "sparkop.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create }}
{{- default (include "sparkop.fullname" .) .Values.controller.serviceAccount.name }}
{{- else }}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The drivers' ServiceAccount: spark.serviceAccount.name, else <fullname>-spark (never Spark's
documented `spark`, which a cluster may already have, and never shared by two releases). */}}
{{- define "sparkop.sparkServiceAccountName" -}}
{{- default (printf "%s-spark" (include "sparkop.fullname" .)) .Values.spark.serviceAccount.name }}
{{- end }}

{{- define "sparkop.image" -}}
{{- $tag := default .Chart.AppVersion (toString .Values.image.tag) }}
{{- if .Values.image.registry }}
{{- printf "%s/%s:%s" .Values.image.registry .Values.image.repository $tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "sparkop.leaseName" -}}
{{- default (printf "%s-leader" (include "sparkop.fullname" .)) .Values.controller.leaderElection.leaseName }}
{{- end }}

{{- define "sparkop.leaseNamespace" -}}
{{- default .Release.Namespace .Values.controller.leaderElection.namespace }}
{{- end }}

{{/* "true" when the operator watches the whole cluster: spark.jobNamespaces empty, or holding "". */}}
{{- define "sparkop.clusterWide" -}}
{{- or (not .Values.spark.jobNamespaces) (has "" .Values.spark.jobNamespaces) }}
{{- end }}

{{/* The namespaces the operator's rights are granted in by name, as a JSON list (empty: the whole
cluster). spark.jobNamespaceSelector selects namespaces by their labels, which change: the operator then
watches every namespace and is granted the whole cluster's rules (kubeflow's chart likewise). */}}
{{- define "sparkop.grantedNamespaces" -}}
{{- if .Values.spark.jobNamespaceSelector }}
{{- toJson list }}
{{- else }}
{{- include "sparkop.watchNamespaces" . }}
{{- end }}
{{- end }}

{{/* The namespaces listed to watch (--namespace each), as a JSON list (empty: the whole cluster). */}}
{{- define "sparkop.watchNamespaces" -}}
{{- if eq (include "sparkop.clusterWide" .) "true" }}
{{- toJson list }}
{{- else }}
{{- toJson (uniq .Values.spark.jobNamespaces) }}
{{- end }}
{{- end }}

{{/*
What the operator does in a watched namespace: SparkApplications and SparkDrivers (and their
status; with kubeflowAPI.enabled, kubeflow's group's kinds too), the driver pods, ConfigMaps and Services it renders, the Events it records, the Spark UI
Ingresses, the drivers' PodDisruptionBudgets; and, per enabled feature only, the history servers'
Deployments (the history controller runs), Gateway API's HTTPRoutes and GRPCRoutes (gatewayAPI),
Spark 4.2+'s executor NetworkPolicies, the batch schedulers' PodGroups (created, and read back after a 409 to check they
are ours) and Kueue's Workloads (created; their status says admitted, evicted, finished). The operator
treats a kind it may not read as absent (core.informer), so a feature left off costs nothing but its
apps: their submission fails naming the refusal. The same rules in a ClusterRole (whole cluster) or
in a Role per namespace.
*/}}
{{- define "sparkop.rules" -}}
- apiGroups: ["sparkop.io"]
  resources: ["sparkapplications", "sparkdrivers", "scheduledsparkapplications", "sparkconnects", "sparkhistoryservers"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: ["sparkop.io"]
  resources: ["sparkapplications/status", "sparkdrivers/status", "scheduledsparkapplications/status", "sparkconnects/status", "sparkhistoryservers/status"]
  verbs: ["get", "patch", "update"]
{{- if .Values.kubeflowAPI.enabled }}
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications", "scheduledsparkapplications", "sparkconnects"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications/status", "scheduledsparkapplications/status", "sparkconnects/status"]
  verbs: ["get", "patch", "update"]
{{- end }}
- apiGroups: [""]
  resources: ["pods", "configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
{{- if gt (int .Values.controller.driverLogTailLines) 0 }}
# The end of a driver pod's log, kept in its SparkDriver's status before the pod may go.
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
{{- end }}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "delete", "patch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
{{- if .Values.controller.networkPolicy.enable }}
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
{{- end }}
{{- if has "history" .Values.controller.controllers }}
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
{{- end }}
{{- if .Values.controller.gatewayAPI.enable }}
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes", "grpcroutes"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
{{- end }}
{{- if .Values.controller.batchScheduler.enable }}
- apiGroups: ["scheduling.volcano.sh", "scheduling.x-k8s.io"]
  resources: ["podgroups"]
  verbs: ["get", "list", "watch", "create"]
{{- end }}
{{- if .Values.controller.kueue.enable }}
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads/status"]
  verbs: ["get", "patch"]
{{- end }}
{{- end }}

{{/*
kubeflow values that ask for what sparkop cannot do, each with why and what to do instead: a kubeflow
values file either works here or is refused naming every such value at once. (Misspelt or unknown
values are refused before this, by values.schema.json.)
*/}}
{{- define "sparkop.refusals" -}}
{{- $c := .Values.controller }}
{{- $refused := list }}
{{- if contains "kubeflow/spark-operator" (printf "%s/%s" .Values.image.registry .Values.image.repository) }}
{{- $refused = append $refused (printf "image.repository %s is kubeflow's operator image: sparkop runs its own (sparkop.io/sparkop; docs/operations.md#the-image)" .Values.image.repository) }}
{{- end }}
{{- range $c.featureGates }}
{{- if .enabled }}
{{- $refused = append $refused (printf "controller.featureGates %s: sparkop has no feature gates (a spec changed mid-run re-runs the app once; spark-defaults.conf is the image's)" .name) }}
{{- end }}
{{- end }}
{{- if $c.pprof.enable }}
{{- $refused = append $refused "controller.pprof.enable: sparkop has no Go profiler (bench/throughput.py --profile samples it with py-spy)" }}
{{- end }}
{{- if $c.uiIngress.tls }}
{{- $refused = append $refused "controller.uiIngress.tls: sparkop has no operator-wide Ingress TLS; set spec.sparkUIOptions.ingressTLS per app" }}
{{- end }}
{{- if $c.uiIngress.annotations }}
{{- $refused = append $refused "controller.uiIngress.annotations: sparkop has no operator-wide Ingress annotations; set spec.sparkUIOptions.ingressAnnotations per app" }}
{{- end }}
{{- if and $c.uiIngress.enable (not $c.uiIngress.urlFormat) }}
{{- $refused = append $refused "controller.uiIngress.enable needs controller.uiIngress.urlFormat, e.g. '{{$appName}}.spark.example.com'" }}
{{- end }}
{{- if $c.batchScheduler.kubeSchedulerNames }}
{{- $refused = append $refused "controller.batchScheduler.kubeSchedulerNames: sparkop knows spec.batchScheduler kube-scheduler (scheduler-plugins' Coscheduling) by that name only" }}
{{- end }}
{{- if $c.batchScheduler.default }}
{{- $refused = append $refused "controller.batchScheduler.default: sparkop has no default batch scheduler; set spec.batchScheduler per app" }}
{{- end }}
{{- if .Values.hook.upgradeCrd }}
{{- $refused = append $refused "hook.upgradeCrd: sparkop's chart runs no hook Job; apply the CRDs before an upgrade with kubectl apply --server-side -f charts/sparkop/crds/" }}
{{- end }}
{{- if ne (regexReplaceAll "\\s" (toString .Values.prometheus.metrics.jobStartLatencyBuckets) "") "30,60,90,120,150,180,210,240,270,300" }}
{{- $refused = append $refused "prometheus.metrics.jobStartLatencyBuckets: sparkop's start-latency buckets are kubeflow's defaults, fixed (30,60,...,300)" }}
{{- end }}
{{- if ne (regexReplaceAll "\\s" (toString .Values.prometheus.metrics.jobSubmitLatencyBuckets) "") "0.5,1,2,4,8,16,32,64,128,256" }}
{{- $refused = append $refused "prometheus.metrics.jobSubmitLatencyBuckets: sparkop's submit-latency buckets are kubeflow's defaults, fixed (0.5,1,2,...,256)" }}
{{- end }}
{{- if and (gt (int $c.replicas) 1) (not $c.leaderElection.enable) }}
{{- $refused = append $refused "controller.replicas > 1 needs controller.leaderElection.enable: without it every replica would reconcile" }}
{{- end }}
{{- if and $c.podDisruptionBudget.enable (le (int $c.replicas) 1) }}
{{- $refused = append $refused "controller.podDisruptionBudget.enable needs controller.replicas > 1: with one replica it would block every drain" }}
{{- end }}
{{- if and $c.topologySpreadConstraints (le (int $c.replicas) 1) }}
{{- $refused = append $refused "controller.topologySpreadConstraints need controller.replicas > 1" }}
{{- end }}
{{- if and $c.podAntiAffinity (hasKey (default dict $c.affinity) "podAntiAffinity") }}
{{- $refused = append $refused "controller.podAntiAffinity and controller.affinity.podAntiAffinity: set one of them" }}
{{- end }}
{{- if and .Values.prometheus.serviceMonitor.create (not .Values.prometheus.service.create) }}
{{- $refused = append $refused "prometheus.serviceMonitor.create needs prometheus.service.create" }}
{{- end }}
{{- if and (or .Values.prometheus.serviceMonitor.create .Values.prometheus.podMonitor.create) (not .Values.prometheus.metrics.enable) }}
{{- $refused = append $refused "prometheus.podMonitor.create and prometheus.serviceMonitor.create need prometheus.metrics.enable" }}
{{- end }}
{{- if $refused }}
{{- fail (printf "\nsparkop's chart cannot do what these values ask (charts/sparkop/README.md, Coming from kubeflow's chart):\n- %s" (join "\n- " $refused)) }}
{{- end }}
{{- end }}

{{/* kubeflow values the chart accepts and does not use (they tune what sparkop does not have),
when set to other than kubeflow's default: NOTES.txt names them. */}}
{{- define "sparkop.unused" -}}
{{- $c := .Values.controller }}
{{- $unused := list }}
{{- if .Values.webhook.enable }}
{{- $unused = append $unused "webhook.*: nothing in sparkop needs a webhook (it builds the driver and executor pods itself); no webhook is installed" }}
{{- end }}
{{- if .Values.certManager.enable }}
{{- $unused = append $unused "certManager.*: there is no webhook to give certificates to" }}
{{- end }}
{{- if ne (toString $c.driverPodCreationGracePeriod) "10s" }}
{{- $unused = append $unused "controller.driverPodCreationGracePeriod: sparkop creates the driver pod itself" }}
{{- end }}
{{- if ne (toString $c.scheduledSparkApplicationTimestampPrecision) "nanos" }}
{{- $unused = append $unused "controller.scheduledSparkApplicationTimestampPrecision: a scheduled run is named <name>-<minutes since 1970>" }}
{{- end }}
{{- $queue := $c.workqueueRateLimiter }}
{{- if or (ne (int $queue.bucketQPS) 50) (ne (int $queue.bucketSize) 500) (not $queue.maxDelay.enable) (ne (toString $queue.maxDelay.duration) "6h") }}
{{- $unused = append $unused "controller.workqueueRateLimiter.*: sparkop's bound on its requests is controller.kubeApi.qps and .burst" }}
{{- end }}
{{- if or (ne (int $c.kubeAPIQPS) 20) (ne (int $c.kubeAPIBurst) 30) }}
{{- $unused = append $unused "controller.kubeAPIQPS, controller.kubeAPIBurst: sparkop's bound on its requests is controller.kubeApi.qps and .burst" }}
{{- end }}
{{- toJson $unused }}
{{- end }}
