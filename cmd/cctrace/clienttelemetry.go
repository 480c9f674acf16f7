package main

import (
	"errors"
	"strings"
)

// errNoEndpoint is why --client-telemetry refuses to run: Claude Code's spans are to go where
// cctrace's go, and cctrace's go nowhere.
var errNoEndpoint = errors.New("--client-telemetry sends Claude Code's spans where cctrace sends its own, and cctrace has no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4317)")

// clientTelemetryEnv returns env, cctrace's environment, made into the environment of a Claude
// Code whose own tracing is on and joins cctrace's (`cctrace run --client-telemetry`): its
// traces exported over OTLP gRPC to cctrace's trace endpoint, with the traceparent of its
// llm_request span sent with each API request. The OTLP variables that both read (headers,
// TLS) are shared as they are. Claude Code's metrics and logs exporters stay as the user set
// them (unset: off), and OTEL_SERVICE_NAME, which names cctrace's service, is left out so that
// Claude Code's spans keep their own, claude-code. It fails when cctrace itself exports nowhere.
func clientTelemetryEnv(env []string) ([]string, error) {
	get := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(env[i], "="); k == name {
				return v
			}
		}
		return ""
	}
	if strings.EqualFold(strings.TrimSpace(get("OTEL_TRACES_EXPORTER")), "none") {
		return nil, errNoEndpoint
	}
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if strings.TrimSpace(endpoint) == "" {
		return nil, errNoEndpoint
	}
	set := []string{
		"CLAUDE_CODE_ENABLE_TELEMETRY=1",
		"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1",
		"CLAUDE_CODE_PROPAGATE_TRACEPARENT=1",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + endpoint,
	}
	if get("OTEL_EXPORTER_OTLP_PROTOCOL") == "" {
		// For what reads only the general variable; one the user set for Claude Code's
		// metrics or logs stays theirs.
		set = append(set, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "OTEL_SERVICE_NAME" && !setsName(set, name) {
			out = append(out, kv)
		}
	}
	return append(out, set...), nil
}

// setsName reports whether one of the NAME=value pairs in env sets name.
func setsName(env []string, name string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}
