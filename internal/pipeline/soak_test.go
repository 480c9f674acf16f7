package pipeline_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/tracing"
)

// recordedEvent is one request or response of a recorded session, decoded once.
type recordedEvent struct {
	at   time.Duration // since the session's first request
	req  *wire.Request
	body []byte // the raw request body
	resp *wire.Response
}

// recordedSessions loads every recorded Claude Code session as its decoded event sequence.
func recordedSessions(t *testing.T) [][]recordedEvent {
	t.Helper()
	dirs, _ := replay.Sessions("../../testdata/claude-code")
	var out [][]recordedEvent
	for _, dir := range dirs {
		exs, err := replay.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		raw := map[uint64][]byte{}
		for _, ex := range exs {
			raw[ex.Request.ExchangeID] = ex.Body
		}
		c := &eventCapture{}
		replay.Play(c, exs)
		start := c.events[0].req.Time
		for i := range c.events {
			ev := &c.events[i]
			if ev.req != nil {
				ev.at, ev.body = ev.req.Time.Sub(start), raw[ev.req.ExchangeID]
			} else {
				ev.at = ev.resp.End.Sub(start)
			}
		}
		out = append(out, c.events)
	}
	if len(out) < 8 {
		t.Fatalf("found %d recorded sessions", len(out))
	}
	return out
}

// eventCapture is a replay target that keeps the decoded events in order.
type eventCapture struct{ events []recordedEvent }

func (c *eventCapture) Request(r *wire.Request) { c.events = append(c.events, recordedEvent{req: r}) }
func (c *eventCapture) Response(r *wire.Response) {
	c.events = append(c.events, recordedEvent{resp: r})
}

// countingSink counts spans without keeping them.
type countingSink struct {
	mu                    sync.Mutex
	started, ended, chats int
	open                  map[instrument.SpanID]bool
	errors                map[string]int
}

func (s *countingSink) SpanStarted(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	s.open[sp.ID] = true
}

func (s *countingSink) SpanEnded(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended++
	delete(s.open, sp.ID)
	if sp.Kind == instrument.KindChat {
		s.chats++
	}
	if sp.ErrorType != "" {
		s.errors[sp.ErrorType]++
	}
}

func (s *countingSink) SessionsActive(int) {}

// soakCollector is an in-process OTLP gRPC receiver that counts spans.
type soakCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans int
}

func (c *soakCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	c.mu.Lock()
	c.spans += n
	c.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// waitFor waits until the collector has received n spans.
func (c *soakCollector) waitFor(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(harness.Patience); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		got := c.spans
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector received %d spans of %d", got, n)
		}
	}
}

func (s *countingSink) endedSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSoak plays thousands of Claude Code sessions recorded from the real CLI (turns, tool
// loops, subagents in the foreground and background, compactions, retries, interruptions, side
// requests), many at once, through the pipeline into the tracker, with the OTel sink exporting
// to an in-process collector and at most 200 sessions held. Memory must stay flat, every request
// must give exactly one chat span, no span may stay open, and the collector must receive every
// span. In -short mode it plays fewer sessions.
func TestSoak(t *testing.T) {
	checkLeaks(t)
	sessions := 6000
	if testing.Short() {
		sessions = 1500
	}
	const wave, maxSessions = 100, 200

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &soakCollector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, col)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")

	otel, err := tracing.New(tracing.WithExporterFromEnv(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	counts := &countingSink{open: map[instrument.SpanID]bool{}, errors: map[string]int{}}
	var seed uint64
	tr := instrument.New(instrument.Sinks{counts, otel},
		instrument.WithMaxSessions(maxSessions),
		instrument.WithSessionTimeout(10*time.Minute),
		instrument.WithIDSource(func() uint64 { seed++; return seed }))
	pipe := pipeline.New(tr)

	recorded := recordedSessions(t)
	begin := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var now time.Time
	var exchangeID uint64
	requests := 0
	type timed struct {
		at time.Time
		ev recordedEvent
		id uint64
		s  int
	}
	var early uint64
	maxHeld := 0
	for first := 0; first < sessions; first += wave {
		// A wave of sessions runs at the same time, interleaved by their recorded timing; each
		// wave starts two minutes after the last, so that sessions pile up past the limit and
		// are evicted for it, and idle ones are evicted after the session timeout.
		start := begin.Add(time.Duration(first/wave) * 2 * time.Minute)
		var evs []timed
		for s := first; s < min(first+wave, sessions); s++ {
			rec := recorded[s%len(recorded)]
			offset := time.Duration(s%wave) * 137 * time.Millisecond
			ids := map[uint64]uint64{}
			for _, ev := range rec {
				orig := uint64(0)
				if ev.req != nil {
					orig = ev.req.ExchangeID
					exchangeID++
					ids[orig] = exchangeID
				} else {
					orig = ev.resp.ExchangeID
				}
				evs = append(evs, timed{at: start.Add(offset + ev.at), ev: ev, id: ids[orig], s: s})
			}
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		for _, e := range evs {
			now = e.at
			if e.ev.req != nil {
				req := *e.ev.req
				req.ExchangeID, req.Time = e.id, e.at
				req.Headers.SessionID = fmt.Sprintf("soak-session-%d", e.s)
				var body []byte
				if e.s%10 == 0 {
					// Some bodies are decoded by the pipeline, as from the proxy.
					req.Body, body = nil, e.ev.body
				}
				requests++
				pipe.RequestRead(&req, body)
				continue
			}
			resp := *e.ev.resp
			shift := e.at.Sub(resp.End)
			resp.ExchangeID, resp.End = e.id, e.at
			if !resp.HeaderTime.IsZero() {
				resp.HeaderTime = resp.HeaderTime.Add(shift)
			}
			if m := resp.Message; m != nil {
				mc := *m
				mc.ToolUses = append([]wire.ToolUse(nil), m.ToolUses...)
				for i := range mc.ToolUses {
					mc.ToolUses[i].End = mc.ToolUses[i].End.Add(shift)
				}
				resp.Message = &mc
			}
			pipe.ResponseDone(&resp, nil)
		}
		pipe.Flush()
		tr.Tick(now.Add(time.Minute))
		// Real sessions wait seconds for each response; a wave's spans arrive here in
		// milliseconds. Let the exporter catch up between waves, as it does between real
		// requests: a burst beyond the batcher's queue (OTEL_BSP_MAX_QUEUE_SIZE, 2048 by
		// default) is dropped by design, so that a slow collector never holds the tracker.
		col.waitFor(t, counts.endedSoFar())
		held := tr.Sessions()
		if held > maxSessions {
			t.Fatalf("%d sessions held, limit %d", held, maxSessions)
		}
		maxHeld = max(maxHeld, held)
		if first == sessions/5/wave*wave {
			early = heapInUse()
		}
	}
	late := heapInUse()
	tr.Close(now.Add(time.Minute))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := otel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv.GracefulStop()

	t.Logf("%d sessions, %d requests, %d spans, %d errors by type %v; heap %d KiB after 20%%, %d KiB at the end",
		sessions, requests, counts.ended, len(counts.errors), counts.errors, early>>10, late>>10)
	if maxHeld != maxSessions {
		t.Errorf("at most %d sessions were held: the session limit (%d) was never reached", maxHeld, maxSessions)
	}
	if requests < sessions*2 {
		t.Errorf("only %d requests for %d sessions", requests, sessions)
	}
	if counts.chats != requests {
		t.Errorf("%d chat spans for %d requests", counts.chats, requests)
	}
	if len(counts.open) != 0 || counts.started != counts.ended {
		t.Errorf("%d spans started, %d ended, %d left open", counts.started, counts.ended, len(counts.open))
	}
	if late > early+early/2+4<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB: state is not bounded", early>>10, late>>10)
	}
	col.mu.Lock()
	got := col.spans
	col.mu.Unlock()
	if got != counts.ended {
		t.Errorf("the collector received %d spans of %d", got, counts.ended)
	}
}
