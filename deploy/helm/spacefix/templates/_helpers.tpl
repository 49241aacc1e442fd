{{/* The release's objects are named after it, as Helm charts usually do. */}}
{{- define "spacefix.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "spacefix.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "spacefix.labels" -}}
{{ include "spacefix.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "spacefix.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "spacefix.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* postgres is "true" when the store is PostgreSQL. */}}
{{- define "spacefix.postgres" -}}
{{- if .Values.postgres.existingSecret -}}true{{- end -}}
{{- end -}}

{{/*
spacefix.validate refuses values that would deploy something that cannot
work, with a sentence saying why and what to set instead.
*/}}
{{- define "spacefix.validate" -}}
{{- $pg := include "spacefix.postgres" . -}}
{{- $many := or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled -}}
{{- if and $many (not $pg) -}}
{{- fail "replicaCount is more than 1 (or autoscaling is on) on SQLite: SQLite is one file on one volume that only one gateway may open at a time. Set postgres.existingSecret (a Secret with key url) and nats.url to run several gateways, or keep replicaCount: 1." -}}
{{- end -}}
{{- if and $many (not .Values.nats.url) -}}
{{- fail "replicaCount is more than 1 (or autoscaling is on) without nats.url: gateways sharing a store need NATS to share agents and calls. Set nats.url, e.g. nats://nats.nats.svc:4222." -}}
{{- end -}}
{{- if and $pg (not .Values.secretKey.existingSecret) -}}
{{- fail "postgres.existingSecret is set but secretKey.existingSecret is not: with PostgreSQL every gateway needs the same secret key file. Create a Secret with key secret.key (head -c 32 /dev/urandom | base64 > secret.key; kubectl create secret generic spacefix-secret-key --from-file=secret.key) and set secretKey.existingSecret to its name." -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.publicURL) -}}
{{- fail "ingress.enabled needs publicURL, the https:// URL the Ingress serves (e.g. https://mcp.example.com): its host is the Ingress's host and the gateway's OAuth issuer." -}}
{{- end -}}
{{- if and .Values.publicURL (not (regexMatch "^https?://[^/]+/?$" .Values.publicURL)) -}}
{{- fail (printf "publicURL %q is not a base URL: give scheme and host only, e.g. https://mcp.example.com" .Values.publicURL) -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor scrapes the metrics port." -}}
{{- end -}}
{{- end -}}
