package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestTailSamplingPolicies sends turns shaped as cctrace exports them through the collector
// gateway (deploy/otel-collector/gateway.yaml) to a sampler (sampler.yaml) that keeps none of
// "the rest", and checks that exactly the turns its policies promise to keep reach Jaeger: one
// with an error, one with a compaction, one whose request follows a compaction, and one that
// cost more than the threshold; not a cheap, clean one.
func TestTailSamplingPolicies(t *testing.T) {
	jaeger := harness.StartJaeger(t)
	sampler := harness.StartCollector(t, "sampler", "../deploy/otel-collector/sampler.yaml",
		"OTELCOL_BACKEND_ENDPOINT="+strings.TrimPrefix(jaeger.OTLPEndpoint(), "http://"),
		"OTELCOL_SAMPLE_PERCENT=0",
		"OTELCOL_COST_THRESHOLD_USD=1.5",
		"OTELCOL_DECISION_WAIT=3s",
		"OTELCOL_DECISION_WAIT_AFTER_ROOT=1s",
	)
	gateway := harness.StartCollector(t, "gateway", "../deploy/otel-collector/gateway.yaml",
		"OTELCOL_SAMPLERS=["+sampler.OTLPAddress()+"]")

	const service = "cctrace-sampling"
	ctx := context.Background()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(gateway.OTLPEndpoint()))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))))
	defer tp.Shutdown(ctx)
	tracer := tp.Tracer("sampling-test")

	// turn sends a root with its cost and a chat span under it, changed by chat.
	turn := func(name string, cost float64, chat func(trace.Span)) string {
		ctx, root := tracer.Start(ctx, "invoke_agent claude-code", trace.WithAttributes(
			attribute.String("cctrace.test.turn", name),
			attribute.Float64("cctrace.cost_usd", cost),
		))
		_, span := tracer.Start(ctx, "chat claude-opus-5-5", trace.WithAttributes(
			attribute.Float64("cctrace.cost_usd", cost/2),
		))
		if chat != nil {
			chat(span)
		}
		span.End()
		root.End()
		return root.SpanContext().TraceID().String()
	}
	kept := map[string]string{
		turn("error", 0.01, func(s trace.Span) { s.SetStatus(codes.Error, "overloaded_error") }):                                 "error",
		turn("compaction", 0.01, func(s trace.Span) { s.SetAttributes(attribute.String("cctrace.compaction.trigger", "auto")) }): "compaction",
		turn("compacted", 0.01, func(s trace.Span) { s.SetAttributes(attribute.Bool("gen_ai.conversation.compacted", true)) }):   "compacted",
		turn("expensive", 2.5, nil): "expensive",
	}
	dropped := turn("cheap", 0.01, nil)
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	jaeger.WaitTraces(t, service, len(kept))
	// Once the sampler counts a trace it decided not to keep, the cheap turn is either in
	// Jaeger or dropped for good.
	harness.Eventually(t, "the sampler's decision to drop a trace", func() error {
		body, err := harness.GetBody(sampler.MetricsURL())
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "otelcol_processor_tail_sampling_global_count_traces_sampled") && strings.Contains(line, `sampled="false"`) && !strings.HasSuffix(line, " 0") {
				return nil
			}
		}
		return fmt.Errorf("no trace counted as not sampled:\n%s", body)
	})
	traces := jaeger.Traces(t, service)
	got := map[string]bool{}
	for _, tr := range traces {
		got[tr.TraceID] = true
		if tr.TraceID == dropped {
			t.Errorf("the cheap, clean turn was kept, with none of the rest sampled")
		}
	}
	for id, name := range kept {
		if !got[id] {
			t.Errorf("the %s turn was not kept", name)
		}
	}
}
