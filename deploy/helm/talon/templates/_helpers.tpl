{{/* Names and labels shared by every template. */}}

{{- define "talon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "talon.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains (include "talon.name" .) .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "talon.name" .) | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "talon.coordinator" -}}{{ include "talon.fullname" . }}-coordinator{{- end -}}
{{- define "talon.worker" -}}{{ include "talon.fullname" . }}-worker{{- end -}}

{{- define "talon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "talon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "talon.labels" -}}
{{ include "talon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* talon.roleLabels: labels of one role's objects; call with (list $ "coordinator"). */}}
{{- define "talon.roleLabels" -}}
{{ include "talon.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "talon.roleSelector" -}}
{{ include "talon.selectorLabels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "talon.image" -}}
{{- if eq .Values.image.tag "latest" -}}
{{- fail (printf "image.tag %q is refused: a moving tag runs different code on each pod restart; set a released version (the chart's appVersion is %s) or image.digest" .Values.image.tag .Chart.AppVersion) -}}
{{- end -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{- define "talon.adminSecret" -}}
{{- .Values.adminAuth.existingSecret | default (printf "%s-admin-tokens" (include "talon.fullname" .)) -}}
{{- end -}}

{{/* talon.issuerRef: the issuer the csi-driver asks for pod certificates. */}}
{{- define "talon.issuerRef" -}}
{{- if .Values.tls.issuer.create -}}
name: {{ include "talon.fullname" . }}-ca
kind: Issuer
group: cert-manager.io
{{- else -}}
name: {{ required "tls.issuer.issuerRef.name is required when tls.issuer.create is false" .Values.tls.issuer.issuerRef.name }}
kind: {{ .Values.tls.issuer.issuerRef.kind }}
group: {{ .Values.tls.issuer.issuerRef.group }}
{{- end -}}
{{- end -}}

{{/* talon.clusterID: the cluster-id both roles run with (the release name by default). */}}
{{- define "talon.clusterID" -}}
{{- index .Values.config "cluster-id" | default .Release.Name -}}
{{- end -}}

{{- define "talon.adminScheme" -}}
{{- if .Values.adminTLS.enabled }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/*
talon.seconds: a duration string of whole seconds ("35s") as an int, or -1
when it has another form the template does not parse.
*/}}
{{- define "talon.seconds" -}}
{{- if regexMatch "^[0-9]+s$" (toString .) -}}{{ trimSuffix "s" (toString .) }}{{- else -}}-1{{- end -}}
{{- end -}}

{{/*
talon.roleConfig: the merged config file of one role; call with
(list $ "coordinator"). Chart-managed keys win over user values (the schema
refuses them in user values anyway).
*/}}
{{/*
talon.clusterId: the cluster ID every process gets (config.cluster-id, else
the release name); certificates are bound to it.
*/}}
{{- define "talon.clusterId" -}}
{{- index .Values.config "cluster-id" | default .Release.Name -}}
{{- end -}}

{{- define "talon.roleConfig" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
{{- $roleValues := index $.Values $role -}}
{{- $cfg := mergeOverwrite (deepCopy $.Values.config) (deepCopy $roleValues.config) -}}
{{- $_ := set $cfg "cluster-id" (index $cfg "cluster-id" | default $.Release.Name) -}}
{{- if eq $role "coordinator" -}}
{{- $_ := set $cfg "listen" (printf ":%d" (int $roleValues.ports.control)) -}}
{{- $_ := set $cfg "coordinator-replicas" (int $roleValues.replicas) -}}
{{- $_ := set $cfg "ha" (gt (int $roleValues.replicas) 1) -}}
{{- $_ := set $cfg "kube-namespace" $.Release.Namespace -}}
{{- if $.Values.attestation.enabled -}}
{{- $_ := set $cfg "worker-attestation" "kubernetes" -}}
{{- $_ := set $cfg "worker-attestation-audience" $.Values.attestation.audience -}}
{{- $_ := set $cfg "worker-attestation-service-accounts" (list (printf "%s/%s" $.Release.Namespace (include "talon.worker" $))) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $cfg "listen" (printf ":%d" (int $roleValues.ports.data)) -}}
{{- $_ := set $cfg "coordinators" (list (printf "%s.%s.svc:%d" (include "talon.coordinator" $) $.Release.Namespace (int $.Values.coordinator.ports.control))) -}}
{{- $_ := set $cfg "cache-dir" "/var/cache/talon" -}}
{{- if $.Values.attestation.enabled -}}
{{- $_ := set $cfg "attestation-token-file" "/var/run/secrets/talon/attestation/token" -}}
{{- end -}}
{{- end -}}
{{- $_ := set $cfg "admin-listen" (printf ":%d" (int $roleValues.ports.admin)) -}}
{{- if $.Values.adminAuth.enabled -}}
{{- $_ := set $cfg "admin-token-file" "/etc/talon/admin/tokens" -}}
{{- end -}}
{{- if $.Values.adminTLS.enabled -}}
{{- $_ := set $cfg "admin-tls-cert-file" "/etc/talon/admin-tls/tls.crt" -}}
{{- $_ := set $cfg "admin-tls-key-file" "/etc/talon/admin-tls/tls.key" -}}
{{- end -}}
{{- if $.Values.tls.enabled -}}
{{- $_ := set $cfg "tls-ca-file" "/etc/talon/tls/ca.crt" -}}
{{- $_ := set $cfg "tls-cert-file" "/etc/talon/tls/tls.crt" -}}
{{- $_ := set $cfg "tls-key-file" "/etc/talon/tls/tls.key" -}}
{{- else -}}
{{- $_ := set $cfg "insecure-control-plane" true -}}
{{- end -}}
{{- $grace := int $roleValues.terminationGracePeriodSeconds -}}
{{- $drain := int (include "talon.seconds" (index $cfg "drain-delay" | default "5s")) -}}
{{- $shutdown := int (include "talon.seconds" (index $cfg "shutdown-timeout" | default "20s")) -}}
{{- if and (ge $drain 0) (ge $shutdown 0) (le $grace (add $drain $shutdown)) -}}
{{- fail (printf "%s.terminationGracePeriodSeconds %d must exceed drain-delay %ds + shutdown-timeout %ds, or the kubelet kills %ss mid-drain" $role $grace $drain $shutdown $role) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* talon.podSecurityContext and talon.containerSecurityContext: non-root, read-only, no capabilities. */}}
{{/* The pod's and the containers' security contexts: the safe defaults
below, with .Values.podSecurityContext and .Values.securityContext merged
over them (a key set there wins; a platform that assigns its own UIDs, as
OpenShift does, sets runAsUser, runAsGroup and fsGroup to null). */}}
{{- define "talon.podSecurityContextDefaults" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "talon.podSecurityContext" -}}
{{- $ctx := mergeOverwrite (include "talon.podSecurityContextDefaults" . | fromYaml) (deepCopy (.Values.podSecurityContext | default dict)) -}}
{{- range $k, $v := $ctx }}{{ if kindIs "invalid" $v }}{{ $_ := unset $ctx $k }}{{ end }}{{ end -}}
{{- toYaml $ctx -}}
{{- end -}}

{{- define "talon.containerSecurityContextDefaults" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities: {drop: [ALL]}
{{- end -}}

{{- define "talon.containerSecurityContext" -}}
{{- $ctx := mergeOverwrite (include "talon.containerSecurityContextDefaults" . | fromYaml) (deepCopy (.Values.securityContext | default dict)) -}}
{{- range $k, $v := $ctx }}{{ if kindIs "invalid" $v }}{{ $_ := unset $ctx $k }}{{ end }}{{ end -}}
{{- toYaml $ctx -}}
{{- end -}}

{{/* talon.bytes: a size such as 90GiB, 100Gi, 20G or 512Mi in bytes (a
float), for the cache check; units are Kubernetes' and the config's. */}}
{{- define "talon.bytes" -}}
{{- $s := toString . | trim -}}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" $s -}}
{{- $unit := trimPrefix $n $s | trimSuffix "B" | trimSuffix "b" -}}
{{- $mult := dict "" 1 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "k" 1000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if or (eq $n "") (not (hasKey $mult $unit)) -}}
{{- fail (printf "size %q: write a number with a unit such as 90GiB, 100Gi or 512Mi" $s) -}}
{{- end -}}
{{- mulf (float64 $n) (index $mult $unit) -}}
{{- end -}}

{{/* talon.checkCacheFits fails the render when the workers' cache-capacity
is larger than the volume that holds the cache (the PVC's size, or the
emptyDir's sizeLimit): the cache would fill the volume and the worker
fail its writes. */}}
{{- define "talon.checkCacheFits" -}}
{{- $cap := index .Values.config "cache-capacity" -}}
{{- if $cap -}}
{{- $p := .Values.worker.persistence -}}
{{- $vol := ternary $p.size $p.emptyDirSizeLimit $p.enabled -}}
{{- $what := ternary "worker.persistence.size" "worker.persistence.emptyDirSizeLimit" $p.enabled -}}
{{- if gt (include "talon.bytes" $cap | float64) (include "talon.bytes" $vol | float64) -}}
{{- fail (printf "config.cache-capacity %s does not fit the cache volume: %s is %s; make the volume larger or the cache smaller (leave room for the file system)" $cap $what $vol) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* talon.scheduling: anti-affinity and topology spread of one role; call with (list $ "worker"). */}}
{{- define "talon.scheduling" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
{{- $v := index $.Values $role -}}
{{- if $v.affinity }}
affinity:
  {{- toYaml $v.affinity | nindent 2 }}
{{- else }}
affinity:
  podAntiAffinity:
    {{- if eq $v.podAntiAffinity "hard" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "talon.roleSelector" (list $ $role) | nindent 12 }}
    {{- else }}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "talon.roleSelector" (list $ $role) | nindent 14 }}
    {{- end }}
{{- end }}
{{- if $v.topologySpread.enabled }}
topologySpreadConstraints:
  {{- range $key := list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
  - maxSkew: {{ $v.topologySpread.maxSkew }}
    topologyKey: {{ $key }}
    whenUnsatisfiable: {{ $v.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "talon.roleSelector" (list $ $role) | nindent 8 }}
  {{- end }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* talon.volumes: the config, token and TLS volumes of one role; call with (list $ "worker"). */}}
{{- define "talon.volumes" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
- name: config
  configMap:
    name: {{ include "talon.fullname" $ }}-config
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- if $.Values.adminAuth.enabled }}
- name: admin-tokens
  # Coordinators read "tokens"; workers "worker-tokens", the metrics token
  # alone: no worker pod holds the operator token.
  secret:
    secretName: {{ include "talon.adminSecret" $ }}
    items: [{key: {{ ternary "worker-tokens" "tokens" (eq $role "worker") }}, path: tokens}]
{{- end }}
{{- if $.Values.adminTLS.enabled }}
- name: admin-tls
  secret:
    secretName: {{ required "adminTLS.secretName is required when adminTLS.enabled" $.Values.adminTLS.secretName }}
{{- end }}
{{- if $.Values.tls.enabled }}
{{- $issuer := include "talon.issuerRef" $ | fromYaml }}
- name: tls
  # One certificate per pod from cert-manager's csi-driver: CN = pod name
  # (the node ID), OU = role, and the SPIFFE ID that binds it to this
  # cluster; renewed in place, and talon reloads it.
  csi:
    driver: csi.cert-manager.io
    readOnly: true
    volumeAttributes:
      csi.cert-manager.io/issuer-name: {{ $issuer.name }}
      csi.cert-manager.io/issuer-kind: {{ $issuer.kind }}
      csi.cert-manager.io/issuer-group: {{ $issuer.group }}
      csi.cert-manager.io/common-name: "${POD_NAME}"
      csi.cert-manager.io/organizationalunits: {{ $role }}
      csi.cert-manager.io/uri-sans: "spiffe://talon/talon/{{ include "talon.clusterId" $ }}/{{ $role }}/${POD_NAME}"
      csi.cert-manager.io/key-usages: "digital signature,key encipherment,client auth,server auth"
      csi.cert-manager.io/duration: {{ $.Values.tls.duration }}
      csi.cert-manager.io/renew-before: {{ $.Values.tls.renewBefore }}
      csi.cert-manager.io/fs-group: "65532"
{{- end }}
{{- if and $.Values.attestation.enabled (eq $role "worker") }}
- name: attestation
  # The worker's identity as the platform sees it: a token bound to this
  # pod, for the coordinators' TokenReview only (audience), never the API.
  projected:
    sources:
      - serviceAccountToken:
          audience: {{ $.Values.attestation.audience }}
          expirationSeconds: {{ $.Values.attestation.expirationSeconds }}
          path: token
{{- end }}
{{- with (index $.Values $role).extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "talon.volumeMounts" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
- {name: config, mountPath: /etc/talon/config, readOnly: true}
- {name: tmp, mountPath: /tmp}
{{- if $.Values.adminAuth.enabled }}
- {name: admin-tokens, mountPath: /etc/talon/admin, readOnly: true}
{{- end }}
{{- if $.Values.adminTLS.enabled }}
- {name: admin-tls, mountPath: /etc/talon/admin-tls, readOnly: true}
{{- end }}
{{- if $.Values.tls.enabled }}
- {name: tls, mountPath: /etc/talon/tls, readOnly: true}
{{- end }}
{{- if and $.Values.attestation.enabled (eq $role "worker") }}
- {name: attestation, mountPath: /var/run/secrets/talon/attestation, readOnly: true}
{{- end }}
{{- with (index $.Values $role).extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* talon.env: the per-pod settings (node ID and advertised addresses) of one role. */}}
{{- define "talon.env" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
{{- $ports := (index $.Values $role).ports -}}
{{- $listen := ternary $ports.control $ports.data (eq $role "coordinator") -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
- name: TALON_NODE_ID
  value: $(POD_NAME)
- name: TALON_ADVERTISE
  value: $(POD_IP):{{ $listen }}
- name: TALON_ADMIN_ADVERTISE
  value: $(POD_IP):{{ $ports.admin }}
{{- with (index $.Values $role).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
talon.probes: the probes of one role; call with (list $ "worker").
startupProbe holds liveness off for startupSeconds (a worker's scan of a
large cache); readiness needs three misses in a row (6 s) so one slow
answer does not pull a pod out of its Service; liveness restarts a process
that has not answered /healthz for 30 s.
*/}}
{{- define "talon.probes" -}}
{{- $ := index . 0 -}}{{- $role := index . 1 -}}
{{- $scheme := include "talon.adminScheme" $ -}}
startupProbe:
  httpGet: {path: /healthz, port: admin, scheme: {{ $scheme }}}
  periodSeconds: 2
  timeoutSeconds: 2
  failureThreshold: {{ div (add (index $.Values $role).startupSeconds 1) 2 }}
readinessProbe:
  httpGet: {path: /readyz, port: admin, scheme: {{ $scheme }}}
  periodSeconds: 2
  timeoutSeconds: 2
  failureThreshold: 3
  successThreshold: 1
livenessProbe:
  httpGet: {path: /healthz, port: admin, scheme: {{ $scheme }}}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}
