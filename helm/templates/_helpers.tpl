{{/*
Named templates, for this chart and for an application's own chart that includes freshet as a
dependency. Each takes a context with .Values (freshet's values), .Release and .Chart; from a
parent chart pass (dict "Values" .Values.freshet "Release" .Release "Chart" .Chart) and set
freshet.image.tag (the parent's appVersion is not freshet's). See helm/README.md.
*/}}

{{- define "freshet.name" -}}
{{- default "freshet" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "freshet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "freshet.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "freshet.labels" -}}
app.kubernetes.io/name: {{ include "freshet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service | default "Helm" }}
{{- end -}}

{{- define "freshet.image" -}}
{{- $tag := .Values.image.tag -}}
{{- if not $tag -}}
{{- if eq .Chart.Name "freshet" -}}{{- $tag = .Chart.AppVersion -}}{{- else -}}{{- fail "freshet: set freshet.image.tag (the parent chart's appVersion is not freshet's)" -}}{{- end -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* The news example's reads (examples/news/freshet.toml), cached by the demo. */}}
{{- define "freshet.demoCaches" -}}
- name: story_with_votes
  query: SELECT stories.id, stories.title, stories.url, COUNT(votes.user_id) AS votes FROM stories LEFT JOIN votes ON votes.story_id = stories.id WHERE stories.id = ? GROUP BY stories.id, stories.title, stories.url
- name: story_comments
  query: SELECT comments.id, comments.body, comments.created_at, users.name FROM comments JOIN users ON users.id = comments.author_id WHERE comments.story_id = ? ORDER BY comments.id
- name: user_karma
  query: SELECT users.id, COUNT(votes.user_id) AS karma FROM users LEFT JOIN stories ON stories.author_id = users.id LEFT JOIN votes ON votes.story_id = stories.id WHERE users.id = ? GROUP BY users.id
- name: top_stories
  query: SELECT stories.id, stories.title, COUNT(votes.user_id) AS votes FROM stories JOIN votes ON votes.story_id = stories.id GROUP BY stories.id, stories.title ORDER BY votes DESC, stories.id LIMIT 10
{{- end -}}

{{/* freshet.toml: every value from .Values; the password never (it comes from the Secret). */}}
{{- define "freshet.config" -}}
{{- $v := .Values -}}
{{- $caches := $v.caches -}}
{{- if and $v.demo.enabled (not $caches) -}}{{- $caches = include "freshet.demoCaches" . | fromYamlArray -}}{{- end -}}
{{- $upstreamHost := $v.upstream.host -}}
{{- $database := $v.upstream.database -}}
{{- if $v.demo.enabled -}}{{- $upstreamHost = default (printf "%s-demo-mariadb" (include "freshet.fullname" .)) $upstreamHost -}}{{- $database = default "news" $database -}}{{- end -}}
# Rendered by the freshet chart; every key is documented in examples/freshet.toml.
[upstream]
{{- if not $v.upstream.urlKey }}
{{- if not $upstreamHost }}{{ fail "freshet: set upstream.host (or upstream.urlKey)" }}{{ end }}
url = {{ printf "mysql://%s@%s:%d/%s" $v.upstream.user $upstreamHost (int $v.upstream.port) $database | toJson }}
{{- end }}
tls = {{ $v.upstream.tls | toJson }}
connect_timeout = {{ $v.upstream.connectTimeout | toJson }}

[listen]
mysql = {{ printf "127.0.0.1:%d" (int $v.listen.mysqlPort) | toJson }}
admin = {{ printf "0.0.0.0:%d" (int $v.listen.adminPort) | toJson }}

[log]
level = {{ $v.logLevel | toJson }}

[memory]
limit = {{ $v.memoryLimit | toJson }}

[fill]
timeout = {{ $v.fillTimeout | toJson }}

[consistency]
max_lag = {{ $v.maxLag | toJson }}

[admin]
users = {{ $v.adminUsers | toJson }}

[caches]
strict = {{ $v.cachesStrict }}

[shutdown]
grace = "{{ int $v.shutdown.graceSeconds }}s"
drain = "{{ if $v.sidecar.native }}0{{ else }}{{ int $v.shutdown.drainSeconds }}{{ end }}s"
{{- range $caches }}

[[cache]]
name = {{ .name | toJson }}
query = {{ .query | toJson }}
{{- end }}
{{- end -}}

{{/* Pod annotations: a changed config rolls the pods. */}}
{{- define "freshet.podAnnotations" -}}
checksum/freshet-config: {{ include "freshet.config" . | sha256sum }}
{{- end -}}

{{- define "freshet.terminationGracePeriodSeconds" -}}
{{- int .Values.shutdown.graceSeconds -}}
{{- end -}}

{{/* The pod volumes freshet needs: its config, and a writable /tmp on a read-only root. */}}
{{- define "freshet.volumes" -}}
- name: freshet-config
  configMap:
    name: {{ include "freshet.fullname" . }}
- name: freshet-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/*
The freshet container: an initContainers entry when sidecar.native (restartPolicy: Always:
started before the application once /startup passes, stopped after it), else a containers
entry.
*/}}
{{- define "freshet.container" -}}
{{- $v := .Values -}}
- name: freshet
  image: {{ include "freshet.image" . }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if $v.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  args: ["--config", "/etc/freshet/freshet.toml"]
  ports:
    - name: freshet-admin
      containerPort: {{ $v.listen.adminPort }}
      protocol: TCP
  env:
    {{- if $v.upstream.urlKey }}
    - name: FRESHET_UPSTREAM_URL
      valueFrom:
        secretKeyRef:
          name: {{ required "freshet: upstream.existingSecret is required with upstream.urlKey" $v.upstream.existingSecret }}
          key: {{ $v.upstream.urlKey }}
    {{- else if $v.upstream.existingSecret }}
    - name: FRESHET_UPSTREAM_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ $v.upstream.existingSecret }}
          key: {{ $v.upstream.passwordKey }}
    {{- else if $v.demo.enabled }}
    - name: FRESHET_UPSTREAM_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ include "freshet.fullname" . }}-demo-db
          key: password
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  startupProbe:
    httpGet:
      path: {{ if $v.startup.waitForCaches }}/startup?caches{{ else }}/startup{{ end }}
      port: freshet-admin
    periodSeconds: {{ $v.startup.periodSeconds }}
    failureThreshold: {{ $v.startup.failureThreshold }}
    timeoutSeconds: 6
  livenessProbe:
    httpGet:
      path: /live
      port: freshet-admin
    periodSeconds: 10
    timeoutSeconds: 5
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /ready
      port: freshet-admin
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: freshet-config
      mountPath: /etc/freshet
      readOnly: true
    - name: freshet-tmp
      mountPath: /tmp
{{- end -}}
