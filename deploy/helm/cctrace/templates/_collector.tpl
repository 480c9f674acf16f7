{{/* The collector gateway's config: deploy/otel-collector/gateway.yaml, with the samplers found
through DNS (their headless Service lists every ready sampler pod). */}}
{{- define "cctrace.collectorConfig.gateway" -}}
{{- $fullname := include "cctrace.fullname" . -}}
extensions:
  health_check:
    endpoint: 0.0.0.0:13133
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
exporters:
  loadbalancing:
    routing_key: traceID
    protocol:
      otlp:
        tls:
          insecure: true
        timeout: 5s
    resolver:
      dns:
        hostname: {{ $fullname }}-collector-sampler.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
        port: "4317"
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter]
      exporters: [loadbalancing]
  telemetry:
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 0.0.0.0
                port: 8888
{{- end -}}

{{/* The samplers' config: deploy/otel-collector/sampler.yaml with the chart's thresholds. */}}
{{- define "cctrace.collectorConfig.sampler" -}}
{{- $c := .Values.collector -}}
extensions:
  health_check:
    endpoint: 0.0.0.0:13133
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
  tail_sampling:
    decision_wait: {{ $c.sampler.decisionWait }}
    decision_wait_after_root_received: {{ $c.sampler.decisionWaitAfterRoot }}
    num_traces: 50000
    decision_cache:
      sampled_cache_size: 200000
      non_sampled_cache_size: 200000
    policies:
      - name: errors
        type: status_code
        status_code:
          status_codes: [ERROR]
      - name: compactions
        type: ottl_condition
        ottl_condition:
          error_mode: ignore
          span:
            - attributes["cctrace.compaction.trigger"] != nil
            - attributes["gen_ai.conversation.compacted"] == true
      - name: expensive
        type: ottl_condition
        ottl_condition:
          error_mode: ignore
          span:
            - attributes["cctrace.cost_usd"] > {{ $c.sampler.costThresholdUSD | float64 }}
      - name: the-rest
        type: probabilistic
        probabilistic:
          sampling_percentage: {{ $c.sampler.samplePercent }}
  batch:
    send_batch_size: 512
    timeout: 2s
exporters:
  otlp_grpc/backend:
    endpoint: {{ $c.backendEndpoint }}
    tls:
      insecure: true
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, tail_sampling, batch]
      exporters: [otlp_grpc/backend]
  telemetry:
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 0.0.0.0
                port: 8888
{{- end -}}
