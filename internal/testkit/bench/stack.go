package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/stack"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
	"github.com/cctrace/cctrace/tracing"
)

// Stack is cctrace assembled in this process by the constructor `cctrace serve` uses
// (stack.New: proxy, pipeline and tracker), with the metrics, turn summary and tracing sinks,
// tracing recording spans and dropping them, for the in-process short run and the Go benchmarks. The zero value is not
// usable; call NewStack.
type Stack struct {
	// Proxy is the handler to serve.
	Proxy http.Handler

	pipe    *pipeline.Pipeline
	tracing *tracing.Sink
	stop    context.CancelFunc
	turns   *turnCounter
}

// NewStack assembles cctrace in front of upstream and starts its pipeline.
func NewStack(upstream *url.URL) (*Stack, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, fmt.Errorf("creating metrics: %w", err)
	}
	ts, err := tracing.New(tracing.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("creating tracing: %w", err)
	}
	s := &Stack{tracing: ts, turns: &turnCounter{}}
	sinks := instrument.Sinks{m, summary.New(summary.WithOutput(io.Discard)), ts, s.turns}
	s.Proxy, s.pipe, err = stack.New(upstream, instrument.New(sinks), log, nil)
	if err != nil {
		_ = ts.Shutdown(context.Background())
		return nil, fmt.Errorf("creating proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.pipe.Run(ctx)
	return s, nil
}

// Close stops the pipeline (ending every open span) and the tracing sink.
func (s *Stack) Close() error {
	s.stop()
	<-s.pipe.Done()
	if err := s.tracing.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("stopping tracing: %w", err)
	}
	return nil
}

// Outcomes returns how many turns ended, by "outcome/trigger".
func (s *Stack) Outcomes() map[string]int {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	return maps.Clone(s.turns.outcomes)
}

// Undecoded returns how many requests cctrace tracked without decoding their body, because it
// was over one of its memory budgets (as it may be under load).
func (s *Stack) Undecoded() int64 { return s.turns.undecoded.Load() }

// turnCounter is a sink that counts turns by outcome and trigger, and requests whose body
// cctrace did not decode because it was over a memory budget. Every benchmark request whose body
// was decoded starts one turn that ends with end_turn (counted as "end_turn/prompt"), so the
// counts tell whether the pipeline decoded what it forwarded.
type turnCounter struct {
	undecoded atomic.Int64
	mu        sync.Mutex
	outcomes  map[string]int
}

func (c *turnCounter) SpanStarted(*instrument.Span) {}

func (c *turnCounter) SpanEnded(s *instrument.Span) {
	if ch := s.Chat; ch != nil && wire.IsNotDecoded(ch.Request.ParseError) {
		c.undecoded.Add(1)
	}
	if s.Turn == nil {
		return
	}
	c.mu.Lock()
	if c.outcomes == nil {
		c.outcomes = map[string]int{}
	}
	c.outcomes[string(s.Turn.Outcome)+"/"+string(s.Turn.Trigger)]++
	c.mu.Unlock()
}

func (c *turnCounter) SessionsActive(int) {}
