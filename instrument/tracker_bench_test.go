package instrument_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// dropSink is a Sink that keeps nothing.
type dropSink struct{}

func (dropSink) SpanStarted(*instrument.Span) {}
func (dropSink) SpanEnded(*instrument.Span)   {}
func (dropSink) SessionsActive(int)           {}

// parsedBody decodes a Claude-Code-shaped request body of size bytes.
func parsedBody(tb testing.TB, size int) *wire.Body {
	tb.Helper()
	rec, err := traffic.FindRecording()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := wire.ParseBody(rec.Body(size), "")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// turnFeeder feeds a tracker one finished turn at a time, as the pipeline would: a request
// carrying a new human prompt, then its streamed end_turn response.
type turnFeeder struct {
	tr   *instrument.Tracker
	body *wire.Body
	now  time.Time
	id   uint64
}

// turn tracks one turn of session. The tracker keeps the request it is given and drops its
// messages, so each request gets its own copy of the body and of the message list.
func (f *turnFeeder) turn(session string) {
	f.id++
	f.now = f.now.Add(time.Millisecond)
	body := *f.body
	body.Messages = slices.Clone(f.body.Messages)
	body.HistoryHash = f.id // a new prompt: the history differs from the last request's
	f.tr.Request(&wire.Request{
		ExchangeID: f.id, Time: f.now, Method: "POST", Path: "/v1/messages",
		Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: session}, BodySize: 200 << 10,
		Body: &body,
	})
	f.tr.Response(&wire.Response{
		ExchangeID: f.id, Status: 200, HeaderTime: f.now, FirstChunk: f.now, End: f.now.Add(time.Millisecond),
		ContentType: "text/event-stream", Streamed: true,
		Message: &wire.MessageInfo{
			ID: fmt.Sprintf("msg_%d", f.id), Model: body.Model, StopReason: "end_turn",
			Usage:  wire.Usage{InputTokens: 40, CacheReadInputTokens: 50000, CacheCreationInputTokens: 300, OutputTokens: 500},
			Blocks: map[wire.BlockType]int{wire.BlockText: 1},
		},
	})
}

// BenchmarkTrackerStep is the tracker's work per API request: one request carrying a new prompt
// in a history of 200 KB (about 140 messages) and its end_turn response, across 100 sessions.
// The copy of the message list each request needs is included.
func BenchmarkTrackerStep(b *testing.B) {
	f := &turnFeeder{tr: instrument.New(dropSink{}), body: parsedBody(b, 200<<10), now: time.Now()}
	sessions := make([]string, 100)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("5e55a000-0000-4000-8000-%012d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.turn(sessions[i%len(sessions)])
		i++
	}
}

// idleSessionsHeap returns the live heap the tracker holds after n sessions each finished one
// turn of a 200 KB history.
func idleSessionsHeap(tb testing.TB, n int) uint64 {
	body := parsedBody(tb, 200<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := instrument.New(dropSink{}, instrument.WithMaxSessions(n))
	f := &turnFeeder{tr: tr, body: body, now: time.Now()}
	for i := range n {
		f.turn(fmt.Sprintf("1d1e0000-0000-4000-8000-%012d", i))
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := tr.Sessions(); got != n {
		tb.Fatalf("tracker holds %d sessions, want %d", got, n)
	}
	runtime.KeepAlive(tr)
	runtime.KeepAlive(body)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// TestIdleSessionsMemory checks the guard of BENCHMARKS.md: 10,000 idle sessions (each after a finished
// turn, with a 200 KB history) take at most 50 MB, because per-session state is proportional to
// what is pending, not to the history.
func TestIdleSessionsMemory(t *testing.T) {
	const sessions, limit = 10000, 50 << 20
	heap := idleSessionsHeap(t, sessions)
	t.Logf("%d idle sessions: %.1f MB (%d bytes per session)", sessions, float64(heap)/(1<<20), heap/sessions)
	if heap > limit {
		t.Errorf("%d idle sessions hold %.1f MB, want at most %d MB", sessions, float64(heap)/(1<<20), limit>>20)
	}
}

// BenchmarkTrackerIdleSessions reports the heap held by 10,000 idle sessions.
func BenchmarkTrackerIdleSessions(b *testing.B) {
	var heap uint64
	for b.Loop() {
		heap = idleSessionsHeap(b, 10000)
	}
	b.ReportMetric(float64(heap)/(1<<20), "MB/10k-sessions")
	b.ReportMetric(float64(heap)/10000, "B/session")
}
