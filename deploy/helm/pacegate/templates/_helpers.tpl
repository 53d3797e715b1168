{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "pacegate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name of every object. */}}
{{- define "pacegate.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "pacegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pacegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pacegate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "pacegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding admin-token: the user's, or the chart's. */}}
{{- define "pacegate.secretName" -}}
{{- .Values.existingSecret | default (include "pacegate.fullname" .) }}
{{- end }}

{{/*
The admin token: the value given, else the one already in the chart's
Secret (so upgrades keep it), else a new random one.
*/}}
{{- define "pacegate.adminToken" -}}
{{- if .Values.adminToken }}
{{- .Values.adminToken }}
{{- else }}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "pacegate.fullname" .) }}
{{- if and $old $old.data (hasKey $old.data "admin-token") }}
{{- index $old.data "admin-token" | b64dec }}
{{- else }}
{{- randAlphaNum 40 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The backend name, defaulted as pacegate defaults it. */}}
{{- define "pacegate.backend" -}}
{{- (.Values.config.queue | default dict).backend | default "embedded" }}
{{- end }}

{{/*
pacegate.yaml: .Values.config plus the fields the chart owns. Tenant keys
become "sha256:<hex>" digests; the plain keys stay in the Secret.
*/}}
{{- define "pacegate.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $_ := set $cfg "listen" "0.0.0.0:8080" }}
{{- $_ := set $cfg "admin" (dict "listen" "0.0.0.0:9090") }}
{{- $server := get $cfg "server" | default dict }}
{{- $_ := set $server "shutdown_delay" (printf "%ds" (int .Values.shutdown.delaySeconds)) }}
{{- $_ := set $server "shutdown_grace" (printf "%ds" (int .Values.shutdown.graceSeconds)) }}
{{- $_ := set $cfg "server" $server }}
{{- if eq (include "pacegate.backend" .) "rocketmq" }}
{{- $queue := get $cfg "queue" }}
{{- $rmq := get $queue "rocketmq" | default dict }}
{{- $_ := unset $rmq "replicas" }}
{{- $_ := unset $rmq "replica_id" }}
{{- $_ := set $queue "rocketmq" $rmq }}
{{- end }}
{{- $cluster := get $cfg "cluster" | default dict }}
{{- $_ := set $cluster "replicas" (int .Values.replicaCount) }}
{{- $_ := unset $cluster "replica_id" }}
{{- with include "pacegate.store" . }}
{{- $_ := set $cluster "store" . }}
{{- end }}
{{- $_ := set $cfg "cluster" $cluster }}
{{- $tenants := list }}
{{- range .Values.tenants }}
{{- $t := deepCopy . }}
{{- $digests := list }}
{{- range .keys }}
{{- if hasPrefix "sha256:" . }}
{{- $digests = append $digests . }}
{{- else }}
{{- $digests = append $digests (printf "sha256:%s" (sha256sum .)) }}
{{- end }}
{{- end }}
{{- $_ := set $t "keys" $digests }}
{{- $tenants = append $tenants $t }}
{{- end }}
{{- $_ := set $cfg "tenants" $tenants }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The cluster store's URL: the release's own Redis (redis.enabled), else
clusterStore, else none.
*/}}
{{- define "pacegate.store" -}}
{{- if .Values.redis.enabled -}}
redis://{{ include "pacegate.fullname" . }}-redis:6379/0
{{- else -}}
{{ .Values.clusterStore }}
{{- end -}}
{{- end }}

{{/*
The cluster store's pod labels: a name of their own, so that neither the
gateway's Service nor its StatefulSet selects the Redis pod.
*/}}
{{- define "pacegate.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "pacegate.name" . }}-redis
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: cluster-store
{{- end }}
