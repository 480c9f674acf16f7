{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "cctrace.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cctrace.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "cctrace.selectorLabels" . }}
{{- end -}}

{{- define "cctrace.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: proxy
{{- end -}}

{{- define "cctrace.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cctrace.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The OTLP endpoint the replicas export to: the value, else this chart's collector gateway. */}}
{{- define "cctrace.otlpEndpoint" -}}
{{- if .Values.otlp.endpoint -}}
{{- .Values.otlp.endpoint -}}
{{- else if .Values.collector.enabled -}}
{{- printf "http://%s-collector-gateway:4317" (include "cctrace.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "cctrace.pricingConfigMap" -}}
{{- default (printf "%s-pricing" (include "cctrace.fullname" .)) .Values.pricing.existingConfigMap -}}
{{- end -}}

{{/* Labels of a collector tier; the argument is a dict with the root context and the tier. */}}
{{- define "cctrace.collectorLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{ include "cctrace.collectorSelectorLabels" . }}
{{- end -}}

{{- define "cctrace.collectorSelectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: collector-{{ .tier }}
{{- end -}}

{{- define "cctrace.identitySecret" -}}
{{- default (printf "%s-identity" (include "cctrace.fullname" .)) .Values.identity.existingSecret -}}
{{- end -}}

{{- define "cctrace.directoryConfigMap" -}}
{{- default (printf "%s-directory" (include "cctrace.fullname" .)) .Values.directory.existingConfigMap -}}
{{- end -}}

{{- define "cctrace.budgetsConfigMap" -}}
{{- default (printf "%s-budgets" (include "cctrace.fullname" .)) .Values.budgets.existingConfigMap -}}
{{- end -}}
