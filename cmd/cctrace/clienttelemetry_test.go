package main

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestClientTelemetryEnv(t *testing.T) {
	envOf := func(list []string) map[string]string {
		m := map[string]string{}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			if _, dup := m[k]; dup {
				t.Errorf("%s set twice in %q", k, list)
			}
			m[k] = v
		}
		return m
	}
	base := []string{"PATH=/bin", "HOME=/home/u", "OTEL_SERVICE_NAME=cctrace", "OTEL_EXPORTER_OTLP_HEADERS=x-token=abc"}

	got, err := clientTelemetryEnv(append(slices.Clone(base), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "CLAUDE_CODE_ENABLE_TELEMETRY=0"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PATH": "/bin", "HOME": "/home/u", "OTEL_EXPORTER_OTLP_HEADERS": "x-token=abc",
		"OTEL_EXPORTER_OTLP_ENDPOINT":         "http://127.0.0.1:4317",
		"CLAUDE_CODE_ENABLE_TELEMETRY":        "1",
		"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
		"CLAUDE_CODE_PROPAGATE_TRACEPARENT":   "1",
		"OTEL_TRACES_EXPORTER":                "otlp",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":  "grpc",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  "http://127.0.0.1:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL":         "grpc",
	}
	if g := envOf(got); !maps.Equal(g, want) {
		t.Errorf("env:\n got %v\nwant %v", g, want)
	}

	// A traces endpoint of cctrace's own wins; the user's settings for Claude Code's metrics
	// and logs stay theirs.
	got, err = clientTelemetryEnv(append(slices.Clone(base), "OTEL_EXPORTER_OTLP_ENDPOINT=http://metrics:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://traces:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_METRICS_EXPORTER=otlp"))
	if err != nil {
		t.Fatal(err)
	}
	g := envOf(got)
	if g["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != "https://traces:4317" || g["OTEL_EXPORTER_OTLP_PROTOCOL"] != "http/protobuf" ||
		g["OTEL_METRICS_EXPORTER"] != "otlp" || g["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] != "grpc" {
		t.Errorf("env with the user's own settings: %v", g)
	}
	if _, ok := g["OTEL_LOGS_EXPORTER"]; ok {
		t.Error("logs exporter turned on")
	}

	for _, env := range [][]string{base, append(slices.Clone(base), "OTEL_EXPORTER_OTLP_ENDPOINT=http://x:4317", "OTEL_TRACES_EXPORTER=none")} {
		if _, err := clientTelemetryEnv(env); !errors.Is(err, errNoEndpoint) {
			t.Errorf("clientTelemetryEnv(%q) = %v, want errNoEndpoint", env, err)
		}
	}
}
