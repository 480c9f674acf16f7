package tracing

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
)

// twoPhaseSink records spans the straightforward way: an SDK span started at SpanStarted with
// the attributes known then, given the final name and attributes at SpanEnded. The Sink starts
// SDK spans only at SpanEnded; TestSinkAsTwoPhase checks that its spans are the same, but for
// what it says differs on purpose.
type twoPhaseSink struct {
	sink *Sink // for its tracer, attributes and shutdown
	open map[spanKey]trace.Span
	// forget starts spans without attributes and gives them those of their start only if they
	// are still open at shutdown: a span ended by the tracker has the attributes of its end
	// alone, even where those of its start are no longer there (which the tracker never does).
	forget bool
	starts map[spanKey][]attribute.KeyValue // with forget, the attributes of open spans
}

func (s *twoPhaseSink) attributes(sp *instrument.Span) []attribute.KeyValue {
	var a attrs
	s.sink.attrs.spanAttributes(&a, sp)
	return a
}

func (s *twoPhaseSink) start(sp *instrument.Span) trace.Span {
	ctx := withTrackerIDs(context.Background(), sp.TraceID, sp.ID)
	if sp.Parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID(sp.TraceID), SpanID: trace.SpanID(sp.Parent), TraceFlags: trace.FlagsSampled,
		}))
	}
	kind := trace.SpanKindInternal
	if sp.Kind == instrument.KindChat {
		kind = trace.SpanKindClient
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(sp.Start), trace.WithSpanKind(kind)}
	if s.forget {
		s.starts[spanKey{sp.TraceID, sp.ID}] = s.attributes(sp)
	} else {
		opts = append(opts, trace.WithAttributes(s.attributes(sp)...))
	}
	if l := sp.Link; l != nil && l.TraceID.IsValid() && l.SpanID.IsValid() {
		var flags trace.TraceFlags
		if l.Sampled {
			flags = trace.FlagsSampled
		}
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID(l.TraceID), SpanID: trace.SpanID(l.SpanID), TraceFlags: flags, Remote: true,
		})}))
	}
	_, span := s.sink.tracer.Start(ctx, spanName(sp), opts...)
	return span
}

func (s *twoPhaseSink) SpanStarted(sp *instrument.Span) {
	s.open[spanKey{sp.TraceID, sp.ID}] = s.start(sp)
}

func (s *twoPhaseSink) SpanEnded(sp *instrument.Span) {
	if !sp.TraceID.IsValid() {
		return // a request outside any session: in no trace (instrument.Sink)
	}
	key := spanKey{sp.TraceID, sp.ID}
	span, ok := s.open[key]
	delete(s.open, key)
	if !ok {
		span = s.start(sp)
	}
	span.SetName(spanName(sp))
	span.SetAttributes(s.attributes(sp)...)
	complete(span, sp) // events and status as the sink adds them: sink_test.go checks those
	span.End(trace.WithTimestamp(sp.End))
}

func (s *twoPhaseSink) SessionsActive(int) {}

func (s *twoPhaseSink) shutdown() error {
	for key, span := range s.open {
		span.SetAttributes(s.starts[key]...)
		span.End()
	}
	s.open = nil
	return s.sink.provider.Shutdown(context.Background())
}

// sinkPair is a Sink and a twoPhaseSink recording the same calls.
type sinkPair struct {
	sink, twoPhase *tracetest.SpanRecorder
	instrument.Sinks
	s     *Sink
	p     *twoPhaseSink
	began time.Time
}

func newSinkPair(t *testing.T, opts ...Option) *sinkPair {
	t.Helper()
	p := &sinkPair{sink: tracetest.NewSpanRecorder(), twoPhase: tracetest.NewSpanRecorder(), began: time.Now()}
	var logs logBuffer
	var err error
	if p.s, err = New(append([]Option{WithSpanProcessor(p.sink), WithLogger(logs.logger())}, opts...)...); err != nil {
		t.Fatal(err)
	}
	ref, err := New(append([]Option{WithSpanProcessor(p.twoPhase)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p.p = &twoPhaseSink{sink: ref, open: make(map[spanKey]trace.Span), starts: make(map[spanKey][]attribute.KeyValue)}
	p.Sinks = instrument.Sinks{p.s, p.p}
	return p
}

// compare shuts both sinks down and checks that they recorded the same spans. The end times of
// spans ended at shutdown (at the current time) are not compared.
func (p *sinkPair) compare(t *testing.T) {
	t.Helper()
	if err := p.s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.p.shutdown(); err != nil {
		t.Fatal(err)
	}
	got, want := p.sink.Ended(), p.twoPhase.Ended()
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	// Spans ended at shutdown come in no particular order.
	order := func(a, b sdktrace.ReadOnlySpan) int {
		return strings.Compare(a.SpanContext().SpanID().String()+a.SpanContext().TraceID().String(),
			b.SpanContext().SpanID().String()+b.SpanContext().TraceID().String())
	}
	slices.SortStableFunc(got, order)
	slices.SortStableFunc(want, order)
	for i := range got {
		if diff := spanDiff(got[i], want[i], p.began); diff != "" {
			t.Errorf("span %d (%s %s):\n%s", i, want[i].Name(), want[i].SpanContext().SpanID(), diff)
		}
	}
}

// spanDiff says how a differs from b, in everything an exporter reads. Of spans ended at
// shutdown (b ends after began) only what comes from their start is compared: ids, name, kind,
// parent, start time and link; and a may have fewer attributes than b, never other ones.
func spanDiff(a, b sdktrace.ReadOnlySpan, began time.Time) string {
	var d []string
	check := func(what string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			d = append(d, fmt.Sprintf("%s: %v, want %v", what, x, y))
		}
	}
	check("name", a.Name(), b.Name())
	check("span context", a.SpanContext(), b.SpanContext())
	check("parent", a.Parent(), b.Parent())
	check("kind", a.SpanKind(), b.SpanKind())
	check("start", a.StartTime().UnixNano(), b.StartTime().UnixNano())
	check("links", a.Links(), b.Links())
	if !b.EndTime().Before(began) {
		check("ended at shutdown", !a.EndTime().Before(began), true)
		start := attrMap(b)
		var known []attribute.KeyValue
		for _, kv := range a.Attributes() {
			if v, ok := start[kv.Key]; ok && v.Type() == kv.Value.Type() && v.String() == kv.Value.String() {
				known = append(known, kv)
			}
		}
		check("attributes (those of the start only)", attrSet(a.Attributes()), attrSet(known))
		return strings.Join(d, "\n")
	}
	check("end", a.EndTime().UnixNano(), b.EndTime().UnixNano())
	check("attributes", attrSet(a.Attributes()), attrSet(b.Attributes()))
	check("events", a.Events(), b.Events())
	check("status", a.Status(), b.Status())
	check("child spans", a.ChildSpanCount(), b.ChildSpanCount())
	check("scope", a.InstrumentationScope(), b.InstrumentationScope())
	return strings.Join(d, "\n")
}

// attrSet lists kvs as a set, in key order: OTLP attributes are a set, and backends show them
// by key.
func attrSet(kvs []attribute.KeyValue) string {
	var lines []string
	for _, kv := range kvs {
		lines = append(lines, fmt.Sprintf("\n\t%s=%s(%s)", kv.Key, kv.Value.String(), kv.Value.Type()))
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// TestSinkAsTwoPhase checks that the sink records what starting each SDK span at SpanStarted
// and completing it at SpanEnded would: the same names, ids, times, links, events, status and
// set of attributes (their order, and so which ones an attribute count limit keeps, is the
// sink's own). Spans still open at shutdown keep what they took from their start; their
// attributes are a few of their start's.
func TestSinkAsTwoPhase(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		n++
		for _, capture := range []bool{false, true} {
			// Whole sessions, and sessions cut short with spans open at shutdown.
			for _, cut := range []bool{false, true} {
				name := fmt.Sprintf("%s/capture=%v/cut=%v", filepath.Base(dir), capture, cut)
				t.Run(name, func(t *testing.T) {
					exchanges, err := replay.Load(dir)
					if err != nil {
						t.Fatal(err)
					}
					p := newSinkPair(t, WithContentCapture(capture), WithServer("api.anthropic.com", 443))
					var seed uint64
					trOpts := []instrument.Option{instrument.WithIDSource(func() uint64 { seed++; return seed })}
					if capture {
						trOpts = append(trOpts, instrument.WithContentCapture(nil))
					}
					tr := instrument.New(p, trOpts...)
					if cut {
						// Sessions cut short: turns, tools and the last request's chat span are
						// still open at shutdown.
						exchanges = exchanges[:(len(exchanges)+1)/2]
						replay.Play(&noResponse{tr, exchanges[len(exchanges)-1].Request.ExchangeID}, exchanges)
					} else {
						replay.Play(tr, exchanges)
						last := exchanges[len(exchanges)-1].Response.End
						tr.Tick(last.Add(time.Minute))
						tr.Close(last.Add(2 * time.Minute))
					}
					p.compare(t)
				})
			}
		}
	}
	if n < 8 {
		t.Fatalf("found %d recorded sessions, want the scenarios of testdata/claude-code", n)
	}

	t.Run("sink tests", func(t *testing.T) {
		for _, capture := range []bool{false, true} {
			p := newSinkPair(t, WithContentCapture(capture))
			steps := turnSteps()
			// End the turn root only at shutdown.
			run(p.Sinks, steps[:len(steps)-1])
			p.compare(t)
		}
	})

	// Spans that the tracker does not make: what was set at the start is gone at the end, ids,
	// times and kinds change, spans start twice or end twice. The sink gives a span the
	// attributes of its end alone.
	req := messagesRequest("claude-opus-4-6", 4)
	odd := []struct {
		name   string
		span   *instrument.Span
		finish func(*instrument.Span)
	}{
		{"tool outcome cleared", &instrument.Span{
			TraceID: turnTrace, ID: sid(1), Parent: sid(9), Kind: instrument.KindTool, Start: at(0),
			Status: instrument.StatusError, ErrorType: "interrupted",
			Tool: &instrument.Tool{Name: "Bash", CallID: "toolu_1", Outcome: "interrupted", InputBytes: 20},
		}, func(s *instrument.Span) {
			s.End, s.Status, s.ErrorType = at(5), instrument.StatusOK, ""
			s.Tool.Outcome, s.Tool.InputBytes, s.Tool.ResultBytes = "", 0, 30
		}},
		{"turn reordered", &instrument.Span{
			TraceID: turnTrace, ID: sid(2), Kind: instrument.KindTurn, Start: at(0), SessionID: "s",
			Turn: &instrument.Turn{Index: 1, Outcome: "x", Totals: instrument.Totals{Models: []string{"m"}, Usage: wire.Usage{CacheCreation5m: 3}}},
		}, func(s *instrument.Span) {
			s.End = at(9)
			s.Turn = &instrument.Turn{Index: 2, Trigger: "prompt", Outcome: "end_turn", Totals: instrument.Totals{Models: []string{"a", "b"}}}
		}},
		{"chat blocks and compaction", &instrument.Span{
			TraceID: turnTrace, ID: sid(3), Parent: sid(2), Kind: instrument.KindChat, Start: at(1),
			Chat: &instrument.Chat{Request: req, Kind: instrument.RequestTurn, NewBlocks: map[instrument.BlockKey]int{
				{Role: wire.RoleUser, Type: wire.BlockToolResult}: 2, {Role: wire.RoleUser, Type: wire.BlockText}: 1,
				{Role: wire.RoleSystem, Type: wire.BlockText}: 1, {Role: "odd", Type: "odd"}: 1,
				{Role: wire.RoleUser, Type: wire.BlockImage}: 1,
			}},
		}, func(s *instrument.Span) {
			s.End = at(3)
			s.Chat.NewBlocks[instrument.BlockKey{Role: wire.RoleAssistant, Type: wire.BlockText}] = 1
			s.Chat.NewBlocks[instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockText}] = 5
			s.Chat.Compacted = true
			s.Chat.Compaction = &instrument.Compaction{Trigger: "auto", MessagesBefore: 10, MessagesAfter: 2}
			s.Chat.Response = &wire.Response{Status: 200, Message: &wire.MessageInfo{StopReason: "end_turn"}}
			b := *s.Chat.Request.Body
			b.Messages = nil
			s.Chat.Request.Body = &b
		}},
		{"blocks gone", &instrument.Span{
			TraceID: turnTrace, ID: sid(4), Kind: instrument.KindChat, Start: at(1),
			Chat: &instrument.Chat{NewBlocks: map[instrument.BlockKey]int{
				{Role: wire.RoleUser, Type: wire.BlockToolResult}: 2, {Role: wire.RoleUser, Type: wire.BlockText}: 1,
			}},
		}, func(s *instrument.Span) {
			s.End = at(3)
			delete(s.Chat.NewBlocks, instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockText})
		}},
		{"ids, times, kind and link change", &instrument.Span{
			TraceID: turnTrace, ID: sid(5), Parent: sid(2), Kind: instrument.KindSubagent, Start: at(1), Name: "a",
			Link:     &instrument.LinkedSpan{TraceID: otherLink, SpanID: sid(7)},
			Subagent: &instrument.Subagent{Type: "Explore"},
		}, func(s *instrument.Span) {
			s.End, s.Start, s.Name, s.Parent, s.Kind = at(4), at(2), "b", sid(3), instrument.KindTool
			s.Link.Sampled = true
			s.Subagent.Type = ""
			s.Tool = &instrument.Tool{Name: "Read"}
		}},
		{"new ids", &instrument.Span{
			TraceID: turnTrace, ID: sid(6), Kind: instrument.KindTurn, Start: at(1),
		}, func(s *instrument.Span) {
			s.End, s.ID = at(4), sid(16)
		}},
	}
	for _, o := range odd {
		t.Run(o.name, func(t *testing.T) {
			p := newSinkPair(t)
			p.p.forget = true
			p.SpanStarted(o.span)
			o.finish(o.span)
			p.SpanEnded(o.span)
			p.compare(t)
		})
	}
	t.Run("twice", func(t *testing.T) {
		p := newSinkPair(t)
		span := &instrument.Span{TraceID: turnTrace, ID: sid(1), Kind: instrument.KindTool, Start: at(1),
			Tool: &instrument.Tool{Name: "Read"}}
		p.SpanStarted(span)
		span.Tool.Name = "Write"
		p.SpanStarted(span)
		span.End = at(2)
		p.SpanEnded(span)
		span.End = at(3)
		p.SpanEnded(span)
		p.compare(t)
	})
}

// noResponse plays exchanges into a tracker, but for the response to one request.
type noResponse struct {
	*instrument.Tracker
	exchange uint64
}

func (n *noResponse) Response(resp *wire.Response) {
	if resp.ExchangeID != n.exchange {
		n.Tracker.Response(resp)
	}
}
