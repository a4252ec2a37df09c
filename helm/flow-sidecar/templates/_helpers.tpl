{{/* Names and labels, as `helm create` makes them. */}}
{{- define "flow-sidecar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flow-sidecar.fullname" -}}
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

{{- define "flow-sidecar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flow-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flow-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flow-sidecar.labels" -}}
helm.sh/chart: {{ include "flow-sidecar.chart" . }}
{{ include "flow-sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Refuse values that would give a sidecar that cannot start or cannot read the broker, with
the fix in the message, at `helm install` time rather than in a crash-looping pod.
(values.schema.json already refuses an unknown mode and unknown options.)
*/}}
{{- define "flow-sidecar.validate" -}}
{{- if not (or .Values.token.existingSecret .Values.token.value .Values.insecure) }}
{{- fail "flow-sidecar listens on 0.0.0.0 in a pod and refuses to without a token: set token.existingSecret (a Secret with key token.key) or token.value, or insecure=true to let anyone who reaches it change thresholds" }}
{{- end }}
{{- if not (or .Values.management.existingSecret .Values.management.password) }}
{{- fail "the broker's management API needs credentials: set management.existingSecret (e.g. the Cluster Operator's <cluster>-default-user) or management.user and management.password" }}
{{- end }}
{{- if and .Values.management.existingSecret (not .Values.management.userKey) (not .Values.management.user) }}
{{- fail "management.userKey is empty: set management.user to the broker user name" }}
{{- end }}
{{- if and (not .Values.management.existingSecret) .Values.management.password (not .Values.management.user) }}
{{- fail "management.password is set: set management.user too" }}
{{- end }}
{{- if and (eq .Values.mode "deployment") (regexMatch "^https?://(127\\.|localhost|\\[::1\\])" .Values.management.url) }}
{{- fail (printf "management.url=%s is loopback, which in deployment mode is flow-sidecar's own pod: point it at the broker's Service, e.g. http://my-rabbit.rabbitmq.svc:15672" .Values.management.url) }}
{{- end }}
{{- if and (eq .Values.mode "deployment") .Values.persistence.enabled (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "persistence.enabled with replicaCount=%v: a claim is mounted by one pod, and each replica needs its own data directory. Leave persistence.enabled=false (the shared state lives in the broker; each pod keeps an emptyDir cache) or set replicaCount=1" .Values.replicaCount) }}
{{- end }}
{{- if and (not (include "flow-sidecar.rabbitmq" .)) (or (eq .Values.mode "sidecar") (gt (int .Values.replicaCount) 1)) }}
{{- fail "a Qpid broker (config.broker, or an amqp:// or broker-j+ management.url) has no global parameters for replicas to share their state through: mode=deployment with replicaCount=1" }}
{{- end }}
{{- if and (eq .Values.mode "sidecar") (not .Values.sidecar.podSelector) }}
{{- fail "sidecar mode: set sidecar.podSelector to the RabbitMQ pods' labels, for the Service that reaches their sidecars" }}
{{- end }}
{{- end }}

{{/* The Secret the chart creates when token or credentials are given as values. */}}
{{- define "flow-sidecar.createsSecret" -}}
{{- if or (and .Values.token.value (not .Values.token.existingSecret)) (and .Values.producerToken.value (not .Values.producerToken.existingSecret)) (not .Values.management.existingSecret) }}true{{ end }}
{{- end }}

{{/*
A value of `config` as the string flow-sidecar parses. Helm reads numbers in values files as
float64, which would print 104857600 as 1.048576e+08: whole numbers are printed as integers.
*/}}
{{- define "flow-sidecar.optionValue" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
Pod template annotations: checksums of the settings and of the chart's Secret, so that
`helm upgrade` with changed values rolls the pods (environment variables are only read at
start). A change inside an existingSecret is not seen: roll the pods yourself.
*/}}
{{- define "flow-sidecar.checksums" -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if include "flow-sidecar.createsSecret" . }}
checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end }}

{{/* The same container in both modes: in the Deployment and in the sidecar snippets. */}}
{{- define "flow-sidecar.container" -}}
- name: flow-sidecar
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  ports:
    - name: flow-http
      containerPort: {{ .Values.containerPort }}
      protocol: TCP
  envFrom:
    - configMapRef:
        name: {{ include "flow-sidecar.fullname" . }}
  env:
    {{- $secret := include "flow-sidecar.fullname" . }}
    {{- if not (hasKey .Values.config "advertise-url") }}
    # credit grants are forwarded to the replica owning a vhost's credit: reach it by pod IP
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: FLOW_ADVERTISE_URL
      value: "http://$(POD_IP):{{ .Values.containerPort }}"
    {{- end }}
    {{- with .Values.management }}
    - name: FLOW_MANAGEMENT_USER
      {{- if not .existingSecret }}
      valueFrom:
        secretKeyRef:
          name: {{ $secret }}
          key: management-user
      {{- else if .userKey }}
      valueFrom:
        secretKeyRef:
          name: {{ .existingSecret }}
          key: {{ .userKey }}
      {{- else }}
      value: {{ .user | quote }}
      {{- end }}
    - name: FLOW_MANAGEMENT_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ .existingSecret | default $secret }}
          key: {{ ternary .passwordKey "management-password" (not (empty .existingSecret)) }}
    {{- end }}
    {{- with .Values.token }}
    {{- if or .existingSecret .value }}
    - name: FLOW_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ .existingSecret | default $secret }}
          key: {{ ternary .key "token" (not (empty .existingSecret)) }}
    {{- end }}
    {{- end }}
    {{- with .Values.producerToken }}
    {{- if or .existingSecret .value }}
    - name: FLOW_PRODUCER_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ .existingSecret | default $secret }}
          key: {{ ternary .key "producer-token" (not (empty .existingSecret)) }}
    {{- end }}
    {{- end }}
  volumeMounts:
    - name: flow-sidecar-data
      mountPath: /data
    # SQLite puts temporary files in /tmp; the root filesystem is read-only.
    - name: flow-sidecar-tmp
      mountPath: /tmp
  livenessProbe:
    {{- toYaml .Values.livenessProbe | nindent 4 }}
  {{- if or (eq .Values.mode "deployment") .Values.sidecar.gateBrokerReadiness }}
  readinessProbe:
    {{- toYaml .Values.readinessProbe | nindent 4 }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
{{- end }}

{{/* The container's volumes; for the data volume see persistence and sidecar in values.yaml. */}}
{{- define "flow-sidecar.volumes" -}}
- name: flow-sidecar-data
{{- if and .Values.persistence.enabled .Values.persistence.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .Values.persistence.existingClaim }}
{{- else if and .Values.persistence.enabled (eq .Values.mode "deployment") }}
  persistentVolumeClaim:
    claimName: {{ include "flow-sidecar.fullname" . }}-data
{{- else }}
  emptyDir: {}
{{- end }}
- name: flow-sidecar-tmp
  emptyDir: {}
{{- end }}

{{/* --allowed-hosts: the Service's names (any cluster domain) and allowedHosts. */}}
{{- define "flow-sidecar.allowedHosts" -}}
{{- $fullname := include "flow-sidecar.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $service := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.*" $fullname $ns) }}
{{- join "," (concat $service .Values.allowedHosts) }}
{{- end }}

{{/* "true" when the broker is RabbitMQ (config.broker, else the management URL's scheme, as
flow-sidecar decides): only then can replicas share their state through it. */}}
{{- define "flow-sidecar.rabbitmq" -}}
{{- $broker := (.Values.config | default dict).broker | default "auto" | toString }}
{{- if or (eq $broker "rabbitmq") (and (eq $broker "auto") (regexMatch "^https?://" .Values.management.url)) }}true{{ end }}
{{- end }}
