package metrics

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// The GenAI client metrics of the OpenTelemetry semantic conventions, as the OpenTelemetry
// Prometheus exporter names them (unit suffixes added, dots as underscores; "{token}" is an
// annotation, not a unit, and adds none). Dashboards built for other GenAI gateways query these.
const (
	nameGenAITokenUsage        = "gen_ai_client_token_usage"
	nameGenAIOperationDuration = "gen_ai_client_operation_duration_seconds"
)

// Bucket boundaries the semantic conventions advise for the two GenAI client histograms.
var (
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	genAIDurationBuckets = durationBuckets
)

// genAI records gen_ai.client.token.usage and gen_ai.client.operation.duration through the
// OpenTelemetry metrics SDK, exported on the same Prometheus registry as the cctrace_* metrics:
// the SDK and its exporter, not this package, own the names and conversions of the conventions.
type genAI struct {
	tokens   genaiconv.ClientTokenUsage
	duration genaiconv.ClientOperationDuration
	// latest holds the instruments of the conventions' latest experimental version, which
	// replace the two above when asked for (WithGenAILatest); nil otherwise.
	latest *genAILatest

	// errorTypes caps error.type, which is whatever the upstream sent, as the other labels from
	// the upstream are capped.
	errorTypes *cappedLabel

	mu    sync.Mutex
	attrs map[genAIKey]attribute.Set // built once per model, token type and error
}

// genAIKey picks one attribute set: the model label (already capped), a token type or "", and
// an error type or "".
type genAIKey struct {
	provider                    wire.Provider
	model, tokenType, errorType string
}

func newGenAI(reg prometheus.Registerer, latest bool) (*genAI, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// cctrace is the only producer on this registry: a target_info series and otel_scope_*
		// labels on every series would say nothing the scrape job does not.
		otelprom.WithoutTargetInfo(),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("registering the GenAI client metrics: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	meter := provider.Meter("github.com/cctrace/cctrace/metrics")
	g := &genAI{attrs: make(map[genAIKey]attribute.Set), errorTypes: newCappedLabel(defaultLabelCap)}
	if latest {
		if g.latest, err = newGenAILatest(meter); err != nil {
			return nil, err
		}
		return g, nil
	}
	if g.tokens, err = genaiconv.NewClientTokenUsage(meter, metric.WithExplicitBucketBoundaries(genAITokenBuckets...)); err != nil {
		return nil, fmt.Errorf("creating %s: %w", g.tokens.Name(), err)
	}
	if g.duration, err = genaiconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(genAIDurationBuckets...)); err != nil {
		return nil, fmt.Errorf("creating %s: %w", g.duration.Name(), err)
	}
	return g, nil
}

// request records one ended API request attempt: its duration, and, when it was answered, its
// input tokens (all of them, cache reads and writes included, as gen_ai.usage.input_tokens
// counts them) and output tokens. Requests that are not Messages API calls are left out.
func (g *genAI) request(model string, s *instrument.Span, msg *wire.MessageInfo) {
	c := s.Chat
	if c.Request.Endpoint != wire.EndpointMessages || s.End.IsZero() || s.End.Before(s.Start) {
		return
	}
	ctx := context.Background()
	errType := ""
	if s.Status == instrument.StatusError {
		errType = g.errorTypes.value(s.ErrorType, "_OTHER")
	}
	if l := g.latest; l != nil {
		l.request(ctx, s.End.Sub(s.Start).Seconds(), g.attributes(genAIKey{provider: c.Request.Provider, model: model, errorType: errType}),
			g.attributes(genAIKey{provider: c.Request.Provider, model: model}), msg)
		return
	}
	g.duration.RecordSet(ctx, s.End.Sub(s.Start).Seconds(), g.attributes(genAIKey{provider: c.Request.Provider, model: model, errorType: errType}))
	if msg == nil {
		return
	}
	g.tokens.RecordSet(ctx, int64(msg.Usage.TotalInput()), g.attributes(genAIKey{provider: c.Request.Provider, model: model, tokenType: string(genaiconv.TokenTypeInput)}))
	g.tokens.RecordSet(ctx, int64(msg.Usage.OutputTokens), g.attributes(genAIKey{provider: c.Request.Provider, model: model, tokenType: string(genaiconv.TokenTypeOutput)}))
}

// attributes returns the attribute set of k, built the first time it is asked for: the caps on
// the model and error type labels bound how many there are.
func (g *genAI) attributes(k genAIKey) attribute.Set {
	g.mu.Lock()
	defer g.mu.Unlock()
	if o, ok := g.attrs[k]; ok {
		return o
	}
	kv := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(k.provider.GenAIName()),
		semconv.GenAIRequestModel(k.model),
	}
	if k.tokenType != "" {
		kv = append(kv, semconv.GenAITokenTypeKey.String(k.tokenType))
	}
	if k.errorType != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(k.errorType))
	}
	set := attribute.NewSet(kv...)
	g.attrs[k] = set
	return set
}

// The metrics of the GenAI conventions' latest experimental version
// (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental), as their migration guide from
// v1.41.0 names them (docs/metrics.md): inference duration under its own name, token counters
// by kind, and per-operation token histograms in place of gen_ai.client.token.usage.
const (
	genAIInferenceDuration = "gen_ai.client.inference.duration"
	genAIUsageInput        = "gen_ai.client.inference.usage.input_tokens"
	genAIUsageOutput       = "gen_ai.client.inference.usage.output_tokens"
	genAIUsageCacheRead    = "gen_ai.client.inference.usage.cache_read.input_tokens"
	genAIUsageCacheWrite   = "gen_ai.client.inference.usage.cache_write.input_tokens"
	genAIOperationInput    = "gen_ai.client.inference.operation.input_tokens"
	genAIOperationOutput   = "gen_ai.client.inference.operation.output_tokens"
	genAITokenUnit         = "{token}"
	genAIDurationUnit      = "s"
	genAIDurationHelp      = "Duration of GenAI inference operations."
)

// genAILatest is the latest experimental version's instruments.
type genAILatest struct {
	duration                        metric.Float64Histogram
	input, output, cacheRead, write metric.Int64Counter
	opInput, opOutput               metric.Int64Histogram
}

func newGenAILatest(meter metric.Meter) (*genAILatest, error) {
	l := &genAILatest{}
	var err error
	if l.duration, err = meter.Float64Histogram(genAIInferenceDuration, metric.WithUnit(genAIDurationUnit),
		metric.WithDescription(genAIDurationHelp), metric.WithExplicitBucketBoundaries(genAIDurationBuckets...)); err != nil {
		return nil, fmt.Errorf("creating %s: %w", genAIInferenceDuration, err)
	}
	for _, c := range []struct {
		to         *metric.Int64Counter
		name, help string
	}{
		{&l.input, genAIUsageInput, "Input tokens of inference operations, cached ones included."},
		{&l.output, genAIUsageOutput, "Output tokens of inference operations."},
		{&l.cacheRead, genAIUsageCacheRead, "Input tokens read from the provider's prompt cache."},
		{&l.write, genAIUsageCacheWrite, "Input tokens written to the provider's prompt cache."},
	} {
		if *c.to, err = meter.Int64Counter(c.name, metric.WithUnit(genAITokenUnit), metric.WithDescription(c.help)); err != nil {
			return nil, fmt.Errorf("creating %s: %w", c.name, err)
		}
	}
	for _, h := range []struct {
		to         *metric.Int64Histogram
		name, help string
	}{
		{&l.opInput, genAIOperationInput, "Input tokens per inference operation, cached ones included."},
		{&l.opOutput, genAIOperationOutput, "Output tokens per inference operation."},
	} {
		if *h.to, err = meter.Int64Histogram(h.name, metric.WithUnit(genAITokenUnit), metric.WithDescription(h.help),
			metric.WithExplicitBucketBoundaries(genAITokenBuckets...)); err != nil {
			return nil, fmt.Errorf("creating %s: %w", h.name, err)
		}
	}
	return l, nil
}

// request records one ended inference operation: its duration under timed (which carries
// error.type when it failed), and, when it was answered, its tokens under counted.
func (l *genAILatest) request(ctx context.Context, seconds float64, timed, counted attribute.Set, msg *wire.MessageInfo) {
	l.duration.Record(ctx, seconds, metric.WithAttributeSet(timed))
	if msg == nil {
		return
	}
	u := msg.Usage
	set := metric.WithAttributeSet(counted)
	l.input.Add(ctx, int64(u.TotalInput()), set)
	l.output.Add(ctx, int64(u.OutputTokens), set)
	l.cacheRead.Add(ctx, int64(u.CacheReadInputTokens), set)
	l.write.Add(ctx, int64(u.CacheCreationInputTokens), set)
	l.opInput.Record(ctx, int64(u.TotalInput()), set)
	l.opOutput.Record(ctx, int64(u.OutputTokens), set)
}
