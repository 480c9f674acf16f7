package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cctrace/cctrace/instrument"
)

// trackerIDs are the ids the tracker chose for the span about to be started.
type trackerIDs struct {
	traceID trace.TraceID
	spanID  trace.SpanID
}

type trackerIDsKey struct{}

// withTrackerIDs returns ctx carrying the ids that trackerIDGenerator hands to the next span
// started with it. Invalid ids are left out, so the generator falls back to random ones.
func withTrackerIDs(ctx context.Context, traceID instrument.TraceID, spanID instrument.SpanID) context.Context {
	return &idsContext{Context: ctx, ids: trackerIDs{traceID: trace.TraceID(traceID), spanID: trace.SpanID(spanID)}}
}

// idsContext is a context carrying trackerIDs: one allocation per span, where context.WithValue
// would take two (the context, and the ids boxed in an interface).
type idsContext struct {
	context.Context
	ids trackerIDs
}

// Value returns a *trackerIDs for trackerIDsKey, else what the parent context holds for key.
func (c *idsContext) Value(key any) any {
	if _, ok := key.(trackerIDsKey); ok {
		return &c.ids
	}
	return c.Context.Value(key)
}

// trackerIDsFrom returns the ids ctx carries, zero (invalid) ones when it carries none.
func trackerIDsFrom(ctx context.Context) trackerIDs {
	if ids, ok := ctx.Value(trackerIDsKey{}).(*trackerIDs); ok {
		return *ids
	}
	return trackerIDs{}
}

// trackerIDGenerator makes the SDK use the tracker's trace and span ids, so that what Jaeger
// shows, what /api/turns lists and the metric exemplars all name the same spans. It falls back
// to random ids when the context carries none (or invalid ones).
type trackerIDGenerator struct{}

var _ sdktrace.IDGenerator = trackerIDGenerator{}

// NewIDs is called for a span without a parent.
func (trackerIDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	ids := trackerIDsFrom(ctx)
	if !ids.traceID.IsValid() {
		ids.traceID = randomTraceID()
	}
	if !ids.spanID.IsValid() {
		ids.spanID = randomSpanID()
	}
	return ids.traceID, ids.spanID
}

// NewSpanID is called for a span with a parent; the trace id is the parent's.
func (trackerIDGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	ids := trackerIDsFrom(ctx)
	if !ids.spanID.IsValid() {
		return randomSpanID()
	}
	return ids.spanID
}

// randomTraceID returns a valid random trace id. math/rand/v2's global source is safe for
// concurrent use and randomly seeded, which is all span ids need.
func randomTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

// randomSpanID returns a valid random span id.
func randomSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}
