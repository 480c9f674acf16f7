// Package tracing is the OpenTelemetry sink: it turns the tracker's spans into OpenTelemetry SDK
// spans that keep the tracker's own trace and span ids, with GenAI semantic-convention
// attributes, and exports them over OTLP gRPC as the standard OTEL_* environment says.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// instrumentationName names the tracer (the instrumentation scope) of every span.
const instrumentationName = "github.com/cctrace/cctrace/tracing"

// serviceName is service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
const serviceName = "cctrace"

// Sink is an instrument.Sink that records the tracker's spans with the OpenTelemetry SDK.
// Build it with New; the zero value is not usable. Its methods are safe for concurrent use.
type Sink struct {
	provider  *sdktrace.TracerProvider
	tracer    trace.Tracer
	attrs     attributeSet
	logger    *slog.Logger
	exporting bool
	errors    *exportErrorHandler // nil when not exporting
	exporter  *countingExporter   // nil when not exporting
	ended     atomic.Int64        // spans ended, and so handed to the batcher

	mu   sync.Mutex
	open map[spanKey]spanStart // spans started and not yet ended
	// turns holds, by trace, the spans of turns whose root has not ended yet; held counts them
	// over all turns (see SpanEnded).
	turns map[instrument.TraceID]*heldTurn
	held  int
}

// heldTurn is the spans of a turn whose root has not ended: started and complete in the SDK,
// waiting to be ended (which hands them to the exporter) with their root.
type heldTurn struct{ spans []heldSpan }

type heldSpan struct {
	span trace.Span
	end  time.Time
}

// Bounds on the spans held for turns still running: past them a span is exported as it ends, as
// a turn's spans always were. A turn of a thousand tool calls holds two thousand.
const (
	maxHeldPerTurn = 4096
	maxHeld        = 32768
)

// spanKey identifies an open span. Span ids are only unique within a trace.
type spanKey struct {
	trace instrument.TraceID
	span  instrument.SpanID
}

var _ instrument.Sink = (*Sink)(nil)
var _ instrument.Suspender = (*Sink)(nil)

// New builds a Sink with its own TracerProvider. Without WithExporterFromEnv or
// WithSpanProcessor it records spans and drops them.
//
// With an exporter, New installs a global OpenTelemetry error handler (otel.SetErrorHandler)
// that logs through the sink's logger without flooding: an unreachable collector is one warning,
// then a summary at most every minute.
func New(opts ...Option) (*Sink, error) {
	cfg := config{logger: slog.Default()}
	for _, opt := range opts {
		opt(&cfg)
	}

	res := cfg.resource
	if res == nil {
		var err error
		res, err = defaultResource(cfg.serviceVersion)
		if err != nil {
			// A malformed OTEL_RESOURCE_ATTRIBUTES still leaves a usable resource.
			cfg.logger.Warn("tracing: resource from environment is incomplete", "err", err)
		}
	}

	tpOpts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(trackerIDGenerator{}),
		// The tracker has already decided what a trace is; sampling some of its spans away
		// would leave /api/turns pointing at traces that do not exist.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	}
	for _, sp := range cfg.processors {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(sp))
	}

	s := &Sink{
		attrs: attributeSet{
			capture:       cfg.capture,
			serverAddress: cfg.serverAddress,
			serverPort:    cfg.serverPort,
			provider:      cfg.provider,
			latest:        cfg.genAILatest,
		},
		logger: cfg.logger,
		open:   make(map[spanKey]spanStart),
		turns:  make(map[instrument.TraceID]*heldTurn),
	}

	if cfg.exporterFromEnv {
		exp, err := exporterFromEnv(cfg.exporterCtx, cfg.logger)
		if err != nil {
			return nil, err
		}
		if exp != nil {
			s.exporting = true
			s.errors = newExportErrorHandler(cfg.logger, time.Now)
			otel.SetErrorHandler(s.errors)
			// The batcher drops spans when its queue is full rather than blocking the tracker;
			// counting what reaches the exporter tells Shutdown how many were dropped.
			s.exporter = &countingExporter{SpanExporter: exp}
			tpOpts = append(tpOpts, sdktrace.WithBatcher(s.exporter))
		}
	}

	s.provider = sdktrace.NewTracerProvider(tpOpts...)
	s.tracer = s.provider.Tracer(instrumentationName, trace.WithSchemaURL(semconv.SchemaURL))
	return s, nil
}

// defaultResource is resource.Default() with service.name "cctrace" and service.version, the
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES environment variables taking precedence.
func defaultResource(version string) (*resource.Resource, error) {
	if version == "" {
		version = buildVersion()
	}
	// Detectors merge in order, later ones winning: the environment comes last. The own
	// attributes are schemaless so that they merge with the SDK's, whatever its schema version.
	return resource.New(context.Background(),
		resource.WithTelemetrySDK(),
		resource.WithDetectors(resource.StringDetector("", semconv.ServiceNameKey,
			func() (string, error) { return serviceName, nil })),
		resource.WithDetectors(resource.StringDetector("", semconv.ServiceVersionKey,
			func() (string, error) { return version, nil })),
		resource.WithFromEnv(),
	)
}

// buildVersion is the main module's version as the go command recorded it.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// exporterFromEnv returns an OTLP gRPC exporter configured by the OTEL_* environment, or nil
// when the environment names no endpoint or disables trace export.
func exporterFromEnv(ctx context.Context, logger *slog.Logger) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none") {
		return nil, nil
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(name); p != "" && p != "grpc" {
			// The gRPC exporter ignores the protocol; say so, since an http/protobuf endpoint
			// (usually port 4318) will not answer gRPC.
			logger.Warn("tracing: only OTLP over gRPC is supported; protocol setting ignored", "env", name, "value", p)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating OTLP gRPC trace exporter: %w", err)
	}
	return exp, nil
}

// Exporting reports whether spans are exported to an OTLP collector.
func (s *Sink) Exporting() bool { return s.exporting }

// SpanStarted notes what sp is at its start. The SDK span is started and ended at once by
// SpanEnded: the exporter only ever sees ended spans, and a span started now would be built
// twice, with the attributes known now and again with the final ones.
func (s *Sink) SpanStarted(sp *instrument.Span) {
	if !sp.TraceID.IsValid() {
		return
	}
	st := startOf(sp)
	s.mu.Lock()
	s.open[spanKey{sp.TraceID, sp.ID}] = st
	if sp.Kind == instrument.KindTurn && !sp.Parent.IsValid() {
		s.turns[sp.TraceID] = &heldTurn{}
	}
	s.mu.Unlock()
}

// spanStart is what SpanStarted keeps of a span: what its SDK span takes from the start, and
// what Shutdown needs to end it should the tracker never do so. A copy, since the tracker goes
// on changing the span (Shutdown reads it on another goroutine).
type spanStart struct {
	traceID       instrument.TraceID
	id, parent    instrument.SpanID
	kind          instrument.SpanKind
	name, session string
	start         time.Time
	link          instrument.LinkedSpan // zero (invalid) without one
	clientParent  bool                  // parent is a span of the client's trace
	provider      wire.Provider         // a chat span's request's
}

// startOf returns what sp is at its start.
func startOf(sp *instrument.Span) spanStart {
	st := spanStart{
		traceID: sp.TraceID, id: sp.ID, parent: sp.Parent, kind: sp.Kind,
		name: spanName(sp), session: sp.SessionID, start: sp.Start, clientParent: sp.ClientParent,
	}
	if st.start.IsZero() {
		st.start = time.Now() // as the SDK would have started it
	}
	if sp.Link != nil {
		st.link = *sp.Link
	}
	if sp.Chat != nil {
		st.provider = sp.Chat.Request.Provider
	}
	return st
}

// SpanEnded records the span sp names: ids, parent, kind, start time and link as they were at
// its start; name, attributes, events and status as they are now. It ends at sp.End. A span
// that was never started is started and ended at once; one without a trace id (a request
// outside any session) is not exported.
//
// The spans of a turn are handed to the exporter together, when its root ends; those that end
// after it (a background subagent's) as they end. So a trace never holds a span whose parent
// was not exported: a cctrace that dies, or loses its session to another replica, mid-turn
// leaves that turn's spans unexported rather than half a tree, and the replica that carries the
// turn on exports its part whole, in the same trace.
func (s *Sink) SpanEnded(sp *instrument.Span) {
	if !sp.TraceID.IsValid() {
		return
	}
	key := spanKey{sp.TraceID, sp.ID}
	s.mu.Lock()
	st, ok := s.open[key]
	delete(s.open, key)
	s.mu.Unlock()
	if !ok {
		st = startOf(sp)
	}

	a := attrsPool.Get().(*attrs)
	*a = (*a)[:0]
	s.attrs.spanAttributes(a, sp)
	span := s.begin(&st, spanName(sp), *a)
	attrsPool.Put(a)
	complete(span, sp)
	s.ended.Add(1)

	s.mu.Lock()
	ht := s.turns[sp.TraceID]
	var release []heldSpan
	switch {
	case ht == nil:
	case !sp.Parent.IsValid() && sp.Kind == instrument.KindTurn:
		release = ht.spans
		s.held -= len(ht.spans)
		delete(s.turns, sp.TraceID)
	case len(ht.spans) < maxHeldPerTurn && s.held < maxHeld:
		ht.spans = append(ht.spans, heldSpan{span, sp.End})
		s.held++
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	for _, h := range release {
		h.span.End(trace.WithTimestamp(h.end))
	}
	span.End(trace.WithTimestamp(sp.End))
}

// SpanSuspended forgets sp, a started span that another process ends (instrument.Suspender):
// nothing of it is exported here. When sp is a turn's root, the spans of that turn held so far
// go out now: their parent is the root the next process exports, with the same ids.
func (s *Sink) SpanSuspended(sp *instrument.Span) {
	s.mu.Lock()
	delete(s.open, spanKey{sp.TraceID, sp.ID})
	var release []heldSpan
	if ht := s.turns[sp.TraceID]; ht != nil && !sp.Parent.IsValid() && sp.Kind == instrument.KindTurn {
		release = ht.spans
		s.held -= len(ht.spans)
		delete(s.turns, sp.TraceID)
	}
	s.mu.Unlock()
	for _, h := range release {
		h.span.End(trace.WithTimestamp(h.end))
	}
}

// complete adds sp's events and status to span.
func complete(span trace.Span, sp *instrument.Span) {
	if t := sp.Turn; t != nil {
		if !t.PlanModeEntered.IsZero() {
			span.AddEvent("cctrace.plan_mode.entered", trace.WithTimestamp(t.PlanModeEntered))
		}
		if !t.PlanModeExited.IsZero() {
			span.AddEvent("cctrace.plan_mode.exited", trace.WithTimestamp(t.PlanModeExited))
		}
	}
	switch sp.Status {
	case instrument.StatusOK:
		span.SetStatus(codes.Ok, "")
	case instrument.StatusError:
		span.SetStatus(codes.Error, sp.StatusMessage)
	}
}

// SessionsActive does nothing: the number of sessions is a metric, not a span.
func (s *Sink) SessionsActive(int) {}

// begin starts the SDK span of a tracker span with the tracker's ids, parent, kind, start time
// and link as st has them, and the given name and attributes.
func (s *Sink) begin(st *spanStart, name string, attrs []attribute.KeyValue) trace.Span {
	ctx := withTrackerIDs(context.Background(), st.traceID, st.id)
	if st.parent.IsValid() {
		// A client's span (instrument.WithJoinClientTrace) was propagated to cctrace: a remote
		// parent, as an extracted traceparent is.
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID(st.traceID),
			SpanID:     trace.SpanID(st.parent),
			TraceFlags: trace.FlagsSampled,
			Remote:     st.clientParent,
		}))
	}
	kind := trace.SpanKindInternal
	if st.kind == instrument.KindChat {
		kind = trace.SpanKindClient
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(st.start), trace.WithSpanKind(kind)}
	if l := st.link; l.TraceID.IsValid() && l.SpanID.IsValid() {
		var flags trace.TraceFlags
		if l.Sampled {
			flags = trace.FlagsSampled
		}
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID(l.TraceID),
			SpanID:     trace.SpanID(l.SpanID),
			TraceFlags: flags,
			Remote:     true,
		})}))
	}
	_, span := s.tracer.Start(ctx, name, opts...)
	// Set rather than passed to Start (trace.WithAttributes), where the SDK would copy them once
	// more for the sampler, which (AlwaysSample) does not look at them. Either way they are
	// the span's first attributes.
	span.SetAttributes(attrs...)
	return span
}

// countingExporter counts the spans the batcher hands to the exporter.
type countingExporter struct {
	sdktrace.SpanExporter
	exported, failed atomic.Int64
}

// ExportSpans exports spans and counts them as exported or failed.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.failed.Add(int64(len(spans)))
	} else {
		e.exported.Add(int64(len(spans)))
	}
	return err
}

// spanName is sp.Name, or the operation name when the tracker gave none.
func spanName(sp *instrument.Span) string {
	if sp.Name != "" {
		return sp.Name
	}
	switch sp.Kind {
	case instrument.KindChat:
		return "chat"
	case instrument.KindTool:
		return "execute_tool"
	default:
		return "invoke_agent"
	}
}

// Shutdown ends the spans still open (at the current time, status unset), flushes what is queued
// and stops the exporter. It returns when done or when ctx ends, whichever is first; a collector
// that does not answer costs at most ctx's deadline.
func (s *Sink) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	open := s.open
	s.open = make(map[spanKey]spanStart)
	turns := s.turns
	s.turns = make(map[instrument.TraceID]*heldTurn)
	s.held = 0
	s.mu.Unlock()
	for _, ht := range turns {
		// Turns whose root the tracker never ended: their spans go out as they are.
		for _, h := range ht.spans {
			h.span.End(trace.WithTimestamp(h.end))
		}
	}
	if len(open) > 0 {
		// Pipeline.Run closes the tracker, which ends every span, before the sink shuts down:
		// these are spans of a tracker that was not closed.
		s.logger.Warn("tracing: ending spans still open at shutdown", "spans", len(open))
		for _, st := range open {
			// Ending now, status unset, with the attributes that the start's fields alone give:
			// the conversation id and the constant ones of the span's kind.
			var a attrs
			as := s.attrs
			if st.kind == instrument.KindChat {
				as.provider = st.provider
			}
			as.spanAttributes(&a, &instrument.Span{Kind: st.kind, SessionID: st.session})
			s.begin(&st, st.name, a).End()
		}
		s.ended.Add(int64(len(open)))
	}

	err := s.provider.Shutdown(ctx)
	if e := s.exporter; e != nil && err == nil {
		// Everything queued has been through the exporter now; what never reached it was
		// dropped by the batcher, which says so only in an SDK debug log.
		if lost := s.ended.Load() - e.exported.Load() - e.failed.Load(); lost > 0 {
			s.logger.Warn("tracing: spans dropped because the export queue was full; raise OTEL_BSP_MAX_QUEUE_SIZE (default 2048)",
				"dropped", lost, "spans", s.ended.Load())
		}
	}
	if s.errors != nil {
		s.errors.flush()
	}
	if err != nil {
		return fmt.Errorf("shutting down tracing: %w", err)
	}
	return nil
}
