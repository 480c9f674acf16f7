package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/pipeline"
)

// TestQueueBudget checks that bodies count against the budget until they are decoded, that a
// body over the budget is dropped (its exchange still tracked) while others wait, and that a body
// larger than the whole budget is accepted when nothing else is waiting.
func TestQueueBudget(t *testing.T) {
	p := pipeline.New(instrument.New(instrument.Sinks{}), pipeline.WithQueueBudget(100))
	body := func(n int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", n-50) + `"}]}`)
	}
	var id uint64
	send := func(size int) *wire.Request {
		id++
		req := &wire.Request{ExchangeID: id, Time: time.Now(), Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages}
		p.RequestRead(req, body(size))
		return req
	}
	full := "not decoded: cctrace's decode queue was full"
	for _, step := range []struct {
		name    string
		size    int
		flush   bool // decode what is queued first
		dropped bool
	}{
		{"first body fits", 80, false, false},
		{"second body would exceed the budget", 80, false, true},
		{"after decoding there is room again", 80, true, false},
		{"a body over the whole budget with nothing waiting", 500, true, false},
		{"anything while it waits", 60, false, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.flush {
				p.Flush()
			}
			req := send(step.size)
			if got := req.ParseError == full; got != step.dropped {
				t.Errorf("dropped = %v (ParseError %q), want %v", got, req.ParseError, step.dropped)
			}
		})
	}
	p.Flush()
}

// TestQueueFullWarning checks that dropped bodies are logged at most once a minute, with their
// count, and once more at shutdown for what is left.
func TestQueueFullWarning(t *testing.T) {
	var logs strings.Builder
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := pipeline.New(instrument.New(instrument.Sinks{}), pipeline.WithQueueBudget(100),
		pipeline.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), pipeline.WithClock(func() time.Time { return now }))
	var id uint64
	burst := func() {
		for range 3 {
			id++
			p.RequestRead(&wire.Request{ExchangeID: id, Endpoint: wire.EndpointMessages}, []byte(`{"messages":[`+strings.Repeat(" ", 80)+`]}`))
		}
		p.Flush()
	}
	warnings := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "decode queue full") {
				out = append(out, l)
			}
		}
		return out
	}
	burst() // the first body fits, two are dropped: warned at once
	burst()
	now = now.Add(30 * time.Second)
	burst()
	if w := warnings(); len(w) != 1 || !strings.Contains(w[0], "count=2") {
		t.Fatalf("after three bursts within a minute: %q, want one warning of 2", w)
	}
	now = now.Add(31 * time.Second)
	burst()
	if w := warnings(); len(w) != 2 || !strings.Contains(w[1], "count=6") {
		t.Fatalf("a minute after the first warning: %q, want a second one of 6", w)
	}
	burst()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Run(ctx)
	if w := warnings(); len(w) != 3 || !strings.Contains(w[2], "count=2") {
		t.Fatalf("at shutdown: %q, want a last warning of 2", w)
	}
}

// TestDecode checks the decoding a budget gate waits for: it is done ahead of what is queued,
// fills the caller's request, leaves it alone when the caller stops waiting, and answers at once
// once the pipeline has stopped.
func TestDecode(t *testing.T) {
	p := pipeline.New(instrument.New(instrument.Sinks{}))
	const prompt = `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"do it"}]}`
	// Something queued before it.
	p.RequestRead(&wire.Request{ExchangeID: 1, Endpoint: wire.EndpointMessages}, []byte(prompt))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := &wire.Request{ExchangeID: 2, Endpoint: wire.EndpointMessages}
	if err := p.Decode(ctx, left, []byte(prompt)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Decode with a canceled context = %v", err)
	}

	run, stop := context.WithCancel(context.Background())
	go p.Run(run)
	req := &wire.Request{ExchangeID: 3, Endpoint: wire.EndpointMessages}
	if err := p.Decode(context.Background(), req, []byte(prompt)); err != nil || req.Body == nil || req.Body.Model != "claude-sonnet-4-5" {
		t.Fatalf("Decode = %v, body %+v", err, req.Body)
	}
	bad := &wire.Request{ExchangeID: 4, Endpoint: wire.EndpointMessages}
	if err := p.Decode(context.Background(), bad, []byte(`{"messages":`)); err != nil || bad.Body != nil || bad.ParseError == "" {
		t.Fatalf("Decode of a cut body = %v, body %+v, parse error %q", err, bad.Body, bad.ParseError)
	}
	if left.Body != nil || left.ParseError != "" {
		t.Errorf("a request whose caller stopped waiting was changed: %+v", left)
	}
	stop()
	<-p.Done()
	if err := p.Decode(context.Background(), &wire.Request{Endpoint: wire.EndpointMessages}, []byte(prompt)); err == nil {
		t.Error("Decode answered nil after the pipeline stopped")
	}
}

// TestDecodeWhileQueueFull checks that a held request is decoded even when the queue is over its
// budget, and is not counted as a body dropped.
func TestDecodeWhileQueueFull(t *testing.T) {
	var logs strings.Builder
	p := pipeline.New(instrument.New(instrument.Sinks{}), pipeline.WithQueueBudget(100),
		pipeline.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	// Accepted with nothing else waiting, and over the whole budget.
	p.RequestRead(&wire.Request{ExchangeID: 1, Endpoint: wire.EndpointMessages},
		[]byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("x", 500)+`"}]}`))

	ctx, stop := context.WithCancel(context.Background())
	go p.Run(ctx)
	req := &wire.Request{ExchangeID: 2, Endpoint: wire.EndpointMessages}
	if err := p.Decode(context.Background(), req, []byte(`{"model":"m","messages":[{"role":"user","content":"do it"}]}`)); err != nil || req.Body == nil {
		t.Fatalf("Decode with the queue over its budget = %v, body %+v, parse error %q", err, req.Body, req.ParseError)
	}
	stop()
	<-p.Done()
	if strings.Contains(logs.String(), "decode queue full") {
		t.Errorf("a held request counted as a body dropped:\n%s", logs.String())
	}
}

// TestDecodeKeepsItsMessages checks that what Decode fills in stays the caller's while the
// pipeline goes on decoding other bodies.
func TestDecodeKeepsItsMessages(t *testing.T) {
	p := pipeline.New(instrument.New(instrument.Sinks{}))
	ctx, stop := context.WithCancel(context.Background())
	defer func() { stop(); <-p.Done() }()
	go p.Run(ctx)
	decode := func(session, text string) *wire.Request {
		req := &wire.Request{Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: session}}
		if err := p.Decode(context.Background(), req, []byte(`{"model":"m","messages":[{"role":"user","content":"`+text+`"}]}`)); err != nil || req.Body == nil {
			t.Fatalf("Decode = %v, parse error %q", err, req.ParseError)
		}
		return req
	}
	first := decode("s-1", "first")
	decode("s-2", "second")
	if m := first.Body.Messages; len(m) != 1 || m[0].Text != "first" {
		t.Errorf("the first request's messages after the second was decoded: %+v", m)
	}
}
