{{/*
allot.labels: the labels of every object, Helm's recommended set
(app.kubernetes.io/*, helm.sh/chart).
*/}}
{{- define "allot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: allot
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | trunc 63 | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
allot.selectorLabels: a component's pods (config/'s, so that a release can
take over a kustomize install: a selector cannot change).
*/}}
{{- define "allot.selectorLabels" -}}
app.kubernetes.io/name: allot
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/*
allot.image: REPOSITORY@DIGEST, else REPOSITORY:TAG with the chart's
appVersion as the default tag. Call with (dict "image" .Values.image "chart" .Chart).
*/}}
{{- define "allot.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
allot.user: the user name of a service account of the release, as the API
server names it to admission policies.
*/}}
{{- define "allot.user" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .name }}
{{- end }}

{{/*
allot.managerArgs: allot manager's arguments: config/manager's, then the
values'.
*/}}
{{- define "allot.managerArgs" -}}
- manager
- --leader-elect=true
- {{ printf "--leader-election-namespace=%s" .Release.Namespace | quote }}
- --metrics-bind-address=:8080
- --health-probe-bind-address=:8081
- --git-cache-dir=/var/cache/allot
{{- if ne .Values.manager.scheduler "allot" }}
- {{ printf "--scheduler=%s" .Values.manager.scheduler | quote }}
{{- end }}
{{- if .Values.manager.kueueApproximate }}
- --kueue-approximate=true
{{- end }}
{{- with .Values.manager.cluster }}
- {{ printf "--cluster=%s" . | quote }}
{{- end }}
{{- if .Values.manager.quotaFromHub }}
- --quota-from-hub=true
{{- end }}
{{- if .Values.hub.enabled }}
- --hub=true
{{- with .Values.hub.namespace }}
- {{ printf "--hub-namespace=%s" . | quote }}
{{- end }}
{{- if .Values.hub.allowWorkerProxy }}
- --hub-allow-worker-proxy=true
{{- end }}
{{- if .Values.hub.allowInsecureWorkers }}
- --hub-allow-insecure-workers=true
{{- end }}
{{- end }}
{{- range .Values.manager.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
allot.gitSecretNames: the Git credential Secrets the manager may get.
*/}}
{{- define "allot.gitSecretNames" -}}
{{- $names := .Values.manager.gitSecretNames | default list }}
{{- with .Values.capacitySource.secretName }}
{{- $names = append $names . }}
{{- end }}
{{- toJson ($names | uniq) }}
{{- end }}

{{/*
allot.validate: what values.schema.json cannot check. The release
namespace is written into the admission policies' CEL (the service
accounts' user names): it must be a DNS label, as Kubernetes has it.
*/}}
{{- define "allot.validate" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .Release.Namespace) }}
{{- fail (printf "release namespace %q: want a DNS label (lower-case letters, digits and '-')" .Release.Namespace) }}
{{- end }}
{{- if gt (len .Release.Namespace) 63 }}
{{- fail (printf "release namespace %q: longer than 63 characters" .Release.Namespace) }}
{{- end }}
{{- end }}
