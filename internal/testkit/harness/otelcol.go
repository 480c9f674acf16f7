package harness

import (
	"context"
	"strconv"
	"testing"
)

// Collector is a running OpenTelemetry Collector (the one ocb builds from tools/otelcol) with one
// of deploy/otel-collector's configs, every listener on 127.0.0.1. The zero value is not usable;
// get one from StartCollector.
type Collector struct {
	otlpGRPC int
	metrics  int
	proc     *Process
}

// StartCollector starts the collector (binary from CCTRACE_OTELCOL_BIN, see Require) named name
// with the config file config, which must take its listeners from the variables that
// deploy/otel-collector's files read: OTELCOL_OTLP_GRPC_ENDPOINT, OTELCOL_OTLP_HTTP_ENDPOINT,
// OTELCOL_HEALTH_ENDPOINT, OTELCOL_METRICS_HOST and OTELCOL_METRICS_PORT; StartCollector sets
// them to free ports on 127.0.0.1. env ("NAME=value") adds the rest of the config's variables.
// It returns once the health check answers; t.Cleanup stops it.
func StartCollector(t testing.TB, name, config string, env ...string) *Collector {
	t.Helper()
	bin := Require(t, EnvOtelcol, "OpenTelemetry Collector (ocb, tools/otelcol)")
	c := retryStart(t, name, func(dir string) (*Collector, error) {
		ports := make([]int, 4)
		for i := range ports {
			p, err := PickFreePort()
			if err != nil {
				return nil, err
			}
			ports[i] = p
		}
		c := &Collector{otlpGRPC: ports[0], metrics: ports[3]}
		health := "127.0.0.1:" + strconv.Itoa(ports[2])
		vars := ChildEnv(append([]string{
			"OTELCOL_OTLP_GRPC_ENDPOINT=127.0.0.1:" + strconv.Itoa(ports[0]),
			"OTELCOL_OTLP_HTTP_ENDPOINT=127.0.0.1:" + strconv.Itoa(ports[1]),
			"OTELCOL_HEALTH_ENDPOINT=" + health,
			"OTELCOL_METRICS_HOST=127.0.0.1",
			"OTELCOL_METRICS_PORT=" + strconv.Itoa(ports[3]),
		}, env...)...)
		var err error
		c.proc, err = startServer(context.Background(), name, dir, vars, "http://"+health+"/", bin, "--config", config)
		return c, err
	})
	c.proc.cleanup(t)
	return c
}

// OTLPEndpoint returns the plaintext OTLP/gRPC receiver as "http://127.0.0.1:PORT", the form
// OTEL_EXPORTER_OTLP_ENDPOINT takes.
func (c *Collector) OTLPEndpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.otlpGRPC)
}

// OTLPAddress returns the OTLP/gRPC receiver as "127.0.0.1:PORT", the form a collector's
// exporter or resolver takes.
func (c *Collector) OTLPAddress() string {
	return "127.0.0.1:" + strconv.Itoa(c.otlpGRPC)
}

// MetricsURL returns the address of the collector's own metrics, "http://127.0.0.1:PORT/metrics".
func (c *Collector) MetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.metrics) + "/metrics"
}

// Log returns the last part of the collector's log.
func (c *Collector) Log() string { return c.proc.LogTail() }
