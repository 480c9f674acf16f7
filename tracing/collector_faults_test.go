package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// countingCollector is an OTLP gRPC receiver that counts spans, optionally taking delay per
// export.
type countingCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	delay time.Duration

	mu    sync.Mutex
	spans int
}

func (c *countingCollector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
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

func (c *countingCollector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans
}

// serveCollector serves c on addr ("127.0.0.1:0" for any port) and returns the address and a
// stop function.
func serveCollector(t *testing.T, addr string, c *countingCollector) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	var once sync.Once
	stop := func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// sendTurns hands n turns (7 spans each) to the sink and returns how long the calls took.
func sendTurns(sink *Sink, from, n int) time.Duration {
	begin := time.Now()
	for i := from; i < from+n; i++ {
		for _, st := range turnSteps() {
			st.span.TraceID[0], st.span.TraceID[1], st.span.TraceID[2] = byte(i), byte(i>>8), byte(i>>16)
			if st.started {
				sink.SpanStarted(st.span)
				continue
			}
			st.finish(st.span)
			sink.SpanEnded(st.span)
		}
	}
	return time.Since(begin)
}

// TestCollectorDiesMidRun stops the collector while cctrace exports and brings it back on the
// same address: the sink never blocks while it is gone, and spans flow again once it is back.
func TestCollectorDiesMidRun(t *testing.T) {
	c := &countingCollector{}
	addr, stop := serveCollector(t, "127.0.0.1:0", c)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	var logs logBuffer
	sink, err := New(WithExporterFromEnv(context.Background()), WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}

	sendTurns(sink, 0, 10)
	waitFor(t, "the first spans", func() bool { return c.count() == 70 })

	stop()
	if d := sendTurns(sink, 10, 200); d > harness.Patience {
		t.Errorf("1400 spans took %v while the collector was down", d)
	}
	waitFor(t, "a failed export", func() bool { return sink.errors.count() >= 1 })

	back := &countingCollector{}
	serveCollector(t, addr, back)
	// gRPC reconnects with backoff; keep sending until spans arrive again.
	turn := 1000
	harness.Eventually(t, "a span to reach the collector after it came back", func() error {
		if back.count() > 0 {
			return nil
		}
		sendTurns(sink, turn, 1)
		turn++
		return errors.New("none yet")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sink.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after the collector came back: %v", err)
	}
	waitFor(t, "the exporter's goroutines to end", func() bool {
		return !goroutinesIn("otlptracegrpc", "batchSpanProcessor")
	})
}

// TestSlowCollector checks that a collector taking seconds per export blocks neither the tracker
// nor shutdown beyond its deadline.
func TestSlowCollector(t *testing.T) {
	c := &countingCollector{delay: 3 * time.Second}
	addr, _ := serveCollector(t, "127.0.0.1:0", c)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100")
	var logs logBuffer
	sink, err := New(WithExporterFromEnv(context.Background()), WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	if d := sendTurns(sink, 0, 1000); d > harness.Patience {
		t.Errorf("7000 spans took %v with a slow collector", d)
	}
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	begin := time.Now()
	err = sink.Shutdown(ctx)
	if d := time.Since(begin); d > deadline+time.Second {
		t.Errorf("Shutdown took %v, deadline %v", d, deadline)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown error = %v, want a deadline exceeded", err)
	}
	waitFor(t, "the abandoned exports to end", func() bool {
		return !goroutinesIn("otlptracegrpc", "batchSpanProcessor")
	})
}

// TestDroppedSpansReported checks that spans the batcher drops because its queue is full are
// reported at shutdown (the SDK itself only says so in a debug log), and that nothing is
// reported when nothing was dropped.
func TestDroppedSpansReported(t *testing.T) {
	tests := []struct {
		name     string
		turns    int
		wantWarn bool
	}{
		{"burst over the queue", 1000, true},
		{"within the queue", 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingCollector{delay: 100 * time.Millisecond}
			addr, _ := serveCollector(t, "127.0.0.1:0", c)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
			t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100")
			var logs logBuffer
			sink, err := New(WithExporterFromEnv(context.Background()), WithLogger(logs.logger()))
			if err != nil {
				t.Fatal(err)
			}
			sendTurns(sink, 0, tt.turns)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sink.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			var warned bool
			for _, l := range logs.lines() {
				if strings.Contains(l, "spans dropped") {
					warned = true
					if !strings.Contains(l, fmt.Sprintf("spans=%d", tt.turns*7)) || !strings.Contains(l, "dropped=") {
						t.Errorf("warning %q", l)
					}
				}
			}
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v; the collector got %d of %d spans:\n%s", warned, tt.wantWarn, c.count(), tt.turns*7, strings.Join(logs.lines(), "\n"))
			}
			if !tt.wantWarn && c.count() != tt.turns*7 {
				t.Errorf("the collector got %d of %d spans", c.count(), tt.turns*7)
			}
		})
	}
}
