// Package jaegerconf writes the Jaeger v2 configuration that tests and benchmarks run Jaeger
// with. Jaeger's built-in defaults listen on all interfaces and on fixed ports, so every listener
// (receivers, query API, health check, its own metrics) is named here, on 127.0.0.1.
package jaegerconf

import "fmt"

// Ports are the TCP ports of Jaeger's listeners, all on 127.0.0.1.
type Ports struct {
	OTLPGRPC, OTLPHTTP     int
	QueryHTTP, QueryGRPC   int
	HealthHTTP, HealthGRPC int
	Metrics                int
}

// Loopback returns a Jaeger v2 config with in-memory storage holding at most maxTraces traces,
// logging at logLevel ("info", "warn", …), and every listener on 127.0.0.1 at p's ports.
func Loopback(p Ports, logLevel string, maxTraces int) string {
	return fmt.Sprintf(template, p.Metrics, logLevel, p.HealthHTTP, p.HealthGRPC, maxTraces,
		p.QueryHTTP, p.QueryGRPC, p.OTLPGRPC, p.OTLPHTTP)
}

// template's verbs, in order: metrics port, log level, health HTTP and gRPC ports, maximum
// traces, query HTTP and gRPC ports, OTLP gRPC and HTTP ports.
const template = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d
    logs:
      level: %s

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%d
      status:
        enabled: true
        path: /status
    grpc:
      endpoint: 127.0.0.1:%d
      transport: tcp

  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: %d

  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    max_clock_skew_adjust: 0s
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`
