package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/pipeline"
)

// trackedSink says when the tracker has taken its first request: its session is new.
type trackedSink struct{ tracked chan struct{} }

func (s trackedSink) SpanStarted(*instrument.Span) {}
func (s trackedSink) SpanEnded(*instrument.Span)   {}
func (s trackedSink) SessionsActive(int)           { s.tracked <- struct{}{} }

// TestWaitingDefersWork checks WithWaiting: queued work waits while a client waits for its
// answer, and runs when Wake says none does, when maxWait has passed, or at once when the queue
// holds a quarter of its budget.
func TestWaitingDefersWork(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		body    int           // bytes of the request body; the queue budget is 1000
		wake    bool          // stop waiting and Wake the pipeline after the first check
		before  time.Duration // the span must not start before this
	}{
		{"held until Wake", time.Hour, 100, true, 100 * time.Millisecond},
		{"held until maxWait", 150 * time.Millisecond, 100, false, 150 * time.Millisecond},
		{"a quarter of the budget queued", time.Hour, 300, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waiting atomic.Bool
			waiting.Store(true)
			sink := trackedSink{tracked: make(chan struct{}, 16)}
			// No tick within the test: the tick drains the queue whatever waits.
			p := pipeline.New(instrument.New(instrument.Sinks{sink}), pipeline.WithQueueBudget(1000),
				pipeline.WithWaiting(waiting.Load, tc.maxWait), pipeline.WithTickInterval(time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); <-p.Done() }()
			go p.Run(ctx)

			body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", tc.body-50) + `"}]}`
			send := func(id uint64) {
				p.RequestRead(&wire.Request{ExchangeID: id, Time: time.Now(), Method: "POST", Path: "/v1/messages",
					Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: fmt.Sprint("session-", id)}}, []byte(body))
			}
			// Two requests of two sessions, the second while the first is held: both are tracked
			// (each new session is one report of the sessions held).
			sent := time.Now()
			send(1)
			time.Sleep(10 * time.Millisecond)
			send(2)
			if tc.before > 0 {
				// Only the maxWait case has a deadline of its own; check a little before it.
				hold := tc.before
				if !tc.wake {
					hold = tc.before * 2 / 3
				}
				select {
				case <-sink.tracked:
					t.Fatalf("request tracked after %v, while a client was waiting", time.Since(sent))
				case <-time.After(hold - 10*time.Millisecond):
				}
			}
			if tc.wake {
				waiting.Store(false)
				p.Wake()
			}
			for i := range 2 {
				select {
				case <-sink.tracked:
				case <-time.After(5 * time.Second):
					t.Fatalf("request %d not tracked within 5s", i+1)
				}
			}
			if took := time.Since(sent); took < tc.before {
				t.Errorf("request tracked after %v, want at least %v", took, tc.before)
			}
		})
	}
}
