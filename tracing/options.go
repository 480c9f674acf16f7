package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cctrace/cctrace/instrument/wire"
)

// config is what the options of New set.
type config struct {
	processors      []sdktrace.SpanProcessor
	exporterFromEnv bool
	exporterCtx     context.Context
	resource        *resource.Resource
	serviceVersion  string
	capture         bool
	logger          *slog.Logger
	serverAddress   string
	serverPort      int
	provider        wire.Provider
	genAILatest     bool
}

// Option configures a Sink built by New.
type Option func(*config)

// WithSpanProcessor adds a span processor that sees every span, in the order given; tests pass
// tracetest.NewSpanRecorder(). A span starts and ends in the SDK at once, when the tracker ends
// it (see Sink.SpanStarted). It may be repeated. Default: none besides the exporter's.
func WithSpanProcessor(sp sdktrace.SpanProcessor) Option {
	return func(c *config) {
		if sp != nil {
			c.processors = append(c.processors, sp)
		}
	}
}

// WithExporterFromEnv exports spans over OTLP gRPC, in batches, configured only by the standard
// OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// …_HEADERS, …_INSECURE, …_TIMEOUT, OTEL_BSP_*). An http:// endpoint means plaintext gRPC.
// When neither endpoint variable is set, or OTEL_TRACES_EXPORTER is "none", nothing is exported
// and nothing complains. ctx bounds the exporter's creation only. Default: no exporter.
func WithExporterFromEnv(ctx context.Context) Option {
	return func(c *config) {
		c.exporterFromEnv = true
		c.exporterCtx = ctx
	}
}

// WithResource sets the resource that describes this process on every span. Default:
// resource.Default() with service.name "cctrace" and service.version, where OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES take precedence.
func WithResource(r *resource.Resource) Option {
	return func(c *config) { c.resource = r }
}

// WithServiceVersion sets service.version on the default resource (it is ignored when
// WithResource is given). Default: the main module version from the build info.
func WithServiceVersion(v string) Option {
	return func(c *config) { c.serviceVersion = v }
}

// WithContentCapture puts content previews (prompts, tool arguments and results, subagent
// descriptions) on spans as attributes. Default: false, no content on spans.
func WithContentCapture(on bool) Option {
	return func(c *config) { c.capture = on }
}

// WithLogger sets the logger for the sink's own warnings, export failures included.
// Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithProvider sets gen_ai.provider.name on the invoke_agent spans of turns and subagents: the
// provider cctrace forwards to. Chat spans name the provider of their own request
// (wire.Request.Provider). Default wire.ProviderAnthropic.
func WithProvider(p wire.Provider) Option {
	return func(c *config) { c.provider = p }
}

// WithServer sets server.address and server.port on chat spans: the upstream the proxy forwards
// to. A port of 0 is left out. Default: neither attribute.
func WithServer(host string, port int) Option {
	return func(c *config) {
		c.serverAddress = host
		c.serverPort = port
	}
}

// WithGenAILatest names attributes as the latest experimental version of the OpenTelemetry GenAI
// conventions does, for OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: cache writes
// are gen_ai.usage.cache_write.input_tokens, and invoke_agent spans carry no cache counts.
// Default: the names of semantic conventions v1.41.0.
func WithGenAILatest() Option {
	return func(c *config) { c.genAILatest = true }
}
