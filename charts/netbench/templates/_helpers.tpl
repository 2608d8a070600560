{{/* Name of the chart (label value). */}}
{{- define "netbench.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the Deployment, Service, ServiceAccount and RBAC objects: "<release>-operator". */}}
{{- define "netbench.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "netbench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "netbench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "netbench.labels" -}}
{{ include "netbench.selectorLabels" . }}
app.kubernetes.io/part-of: netbench
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "netbench.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Worker (load generator) image; the tag defaults to the chart's appVersion like the operator's. */}}
{{- define "netbench.loadgenImage" -}}
{{- printf "%s:%s" .Values.loadgen.repository (default .Chart.AppVersion .Values.loadgen.tag) -}}
{{- end -}}

{{- define "netbench.apiUrl" -}}
{{- default (printf "http://%s.%s.svc:%v" (include "netbench.fullname" .) .Release.Namespace .Values.service.port) .Values.apiUrl -}}
{{- end -}}

{{/* true when a namespace list allows every namespace. */}}
{{- define "netbench.allNamespaces" -}}
{{- if has "*" . -}}true{{- end -}}
{{- end -}}

{{/* Pod Security level enforced in the release namespace: namespace.podSecurity, else
privileged when offload Jobs (hostNetwork, NET_ADMIN, root) may run there, else restricted. */}}
{{- define "netbench.podSecurityLevel" -}}
{{- if .Values.namespace.podSecurity -}}
{{- .Values.namespace.podSecurity -}}
{{- else if .Values.security.offloadNamespaces -}}
privileged
{{- else -}}
restricted
{{- end -}}
{{- end -}}

{{/* Pod Security Admission labels of the release namespace. */}}
{{- define "netbench.podSecurityLabels" -}}
pod-security.kubernetes.io/enforce: {{ include "netbench.podSecurityLevel" . }}
pod-security.kubernetes.io/enforce-version: latest
pod-security.kubernetes.io/warn: restricted
pod-security.kubernetes.io/warn-version: latest
pod-security.kubernetes.io/audit: restricted
pod-security.kubernetes.io/audit-version: latest
{{- end -}}
