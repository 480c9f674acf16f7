package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/wire"
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
