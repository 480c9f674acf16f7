//go:build tools

// Package tools pins dependencies that packages of this module start using as they land.
package tools

import (
	_ "github.com/andybalholm/brotli"
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil/promlint"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	_ "go.opentelemetry.io/otel/sdk/resource"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/sdk/trace/tracetest"
	_ "go.opentelemetry.io/otel/semconv/v1.40.0"
	_ "go.uber.org/goleak"
)
