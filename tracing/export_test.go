package tracing

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/cctrace/cctrace/instrument"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// collector is an in-process OTLP gRPC trace collector.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer

	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *collector) resourceSpans() []*tracepb.ResourceSpans {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.ResourceSpans
	for _, r := range c.requests {
		out = append(out, r.ResourceSpans...)
	}
	return out
}

// startCollector serves a collector on 127.0.0.1 and returns it with its endpoint URL.
func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return c, "http://" + lis.Addr().String()
}

func stringAttr(kvs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue(), true
		}
	}
	return "", false
}

func TestExportOverOTLPGRPC(t *testing.T) {
	c, endpoint := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)

	var logs logBuffer
	sink, err := New(WithExporterFromEnv(context.Background()), WithServiceVersion("v0.1.0-test"), WithLogger(logs.logger()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !sink.Exporting() {
		t.Fatal("Exporting() = false with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	run(sink, turnSteps())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sink.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	spans := make(map[instrument.SpanID]*tracepb.Span)
	for _, rs := range c.resourceSpans() {
		attrs := rs.GetResource().GetAttributes()
		if v, _ := stringAttr(attrs, "service.name"); v != "cctrace" {
			t.Errorf("service.name = %q, want cctrace", v)
		}
		if v, _ := stringAttr(attrs, "service.version"); v != "v0.1.0-test" {
			t.Errorf("service.version = %q, want v0.1.0-test", v)
		}
		if v, _ := stringAttr(attrs, "telemetry.sdk.language"); v != "go" {
			t.Errorf("telemetry.sdk.language = %q, want go", v)
		}
		for _, ss := range rs.ScopeSpans {
			if ss.GetScope().GetName() != instrumentationName {
				t.Errorf("scope = %q, want %q", ss.GetScope().GetName(), instrumentationName)
			}
			for _, s := range ss.Spans {
				spans[instrument.SpanID(s.SpanId)] = s
			}
		}
	}
	if len(spans) != 7 {
		t.Fatalf("collector received %d spans, want 7", len(spans))
	}
	tests := []struct {
		id       instrument.SpanID
		parent   instrument.SpanID
		name     string
		kind     tracepb.Span_SpanKind
		attr     string
		attrWant string
	}{
		{sid(1), instrument.SpanID{}, "invoke_agent claude-code", tracepb.Span_SPAN_KIND_INTERNAL, "gen_ai.operation.name", "invoke_agent"},
		{sid(2), sid(1), "chat claude-opus-4-6", tracepb.Span_SPAN_KIND_CLIENT, "gen_ai.response.id", "msg_01"},
		{sid(3), sid(1), "execute_tool Agent", tracepb.Span_SPAN_KIND_INTERNAL, "gen_ai.tool.call.id", "toolu_01"},
		{sid(4), sid(3), "invoke_agent Explore", tracepb.Span_SPAN_KIND_INTERNAL, "gen_ai.agent.id", "a1b2c3"},
		{sid(6), sid(1), "chat claude-opus-4-6", tracepb.Span_SPAN_KIND_CLIENT, "error.type", "overloaded_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.id.String(), func(t *testing.T) {
			s := spans[tt.id]
			if s == nil {
				t.Fatalf("span %s not received", tt.id)
			}
			if instrument.TraceID(s.TraceId) != turnTrace {
				t.Errorf("trace id = %x, want %s", s.TraceId, turnTrace)
			}
			var parent instrument.SpanID
			copy(parent[:], s.ParentSpanId)
			if parent != tt.parent {
				t.Errorf("parent = %s, want %s", parent, tt.parent)
			}
			if s.Name != tt.name || s.Kind != tt.kind {
				t.Errorf("name, kind = %q, %v, want %q, %v", s.Name, s.Kind, tt.name, tt.kind)
			}
			if v, _ := stringAttr(s.Attributes, tt.attr); v != tt.attrWant {
				t.Errorf("%s = %q, want %q", tt.attr, v, tt.attrWant)
			}
		})
	}
	if lines := logs.lines(); len(lines) != 0 {
		t.Errorf("unexpected log lines:\n%s", strings.Join(lines, "\n"))
	}
}

func TestExporterFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{name: "no endpoint", want: false},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, want: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector.example:4317"}, want: true},
		{name: "exporter none", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
			"OTEL_TRACES_EXPORTER":        "none",
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var logs logBuffer
			sink, err := New(WithExporterFromEnv(context.Background()), WithLogger(logs.logger()))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := sink.Exporting(); got != tt.want {
				t.Errorf("Exporting() = %v, want %v", got, tt.want)
			}
			// Nothing was recorded, so shutting down sends nothing and cannot fail.
			if err := sink.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if lines := logs.lines(); len(lines) != 0 {
				t.Errorf("unexpected log lines:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

func TestResource(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		opts        []Option
		wantName    string
		wantVersion string
	}{
		{name: "default", opts: []Option{WithServiceVersion("v1.2.3")}, wantName: "cctrace", wantVersion: "v1.2.3"},
		{name: "OTEL_SERVICE_NAME", env: map[string]string{"OTEL_SERVICE_NAME": "cc-proxy"},
			opts: []Option{WithServiceVersion("v1.2.3")}, wantName: "cc-proxy", wantVersion: "v1.2.3"},
		{name: "OTEL_RESOURCE_ATTRIBUTES", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=team-proxy,service.version=9"},
			opts: []Option{WithServiceVersion("v1.2.3")}, wantName: "team-proxy", wantVersion: "9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got := record(t, []step{{span: &instrument.Span{
				TraceID: turnTrace, ID: sid(1), Kind: instrument.KindTurn, Start: at(0), End: at(1),
			}}}, tt.opts...)
			res := got[sid(1)].Resource()
			name, _ := res.Set().Value("service.name")
			version, _ := res.Set().Value("service.version")
			if name.AsString() != tt.wantName || version.AsString() != tt.wantVersion {
				t.Errorf("service = %q %q, want %q %q", name.AsString(), version.AsString(), tt.wantName, tt.wantVersion)
			}
		})
	}
}

// TestDeadCollector checks that an unreachable collector blocks neither the tracker nor shutdown
// beyond its deadline, and is reported as one warning however many exports fail.
func TestDeadCollector(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now: connections are refused
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000") // ms: each export gives up after this
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")      // ms: export batches at once
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")     // keep the drain at shutdown to one batch
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100")

	var logs logBuffer
	sink, err := New(WithExporterFromEnv(context.Background()), WithLogger(logs.logger()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	// Far more spans than the batch queue holds: the overflow must be dropped, not waited for.
	begin := time.Now()
	for i := range 1000 {
		for _, st := range turnSteps() {
			st.span.TraceID[0] = byte(i)
			st.span.TraceID[1] = byte(i >> 8)
			if st.started {
				sink.SpanStarted(st.span)
				continue
			}
			st.finish(st.span)
			sink.SpanEnded(st.span)
		}
	}
	if d := time.Since(begin); d > harness.Patience {
		t.Errorf("7000 spans took %v with a dead collector", d)
	}

	waitFor(t, "a failed export", func() bool { return sink.errors.count() >= 1 })

	const deadline = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	begin = time.Now()
	err = sink.Shutdown(ctx)
	if d := time.Since(begin); d > deadline+time.Second {
		t.Errorf("Shutdown took %v, deadline %v", d, deadline)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown error = %v, want a deadline exceeded", err)
	}

	// The exports that Shutdown abandoned still end within the exporter's timeout; wait for them,
	// so that no goroutine outlives the test.
	waitFor(t, "the abandoned exports to end", func() bool {
		return !goroutinesIn("otlptracegrpc", "batchSpanProcessor")
	})
	if n := sink.errors.count(); n < 2 {
		t.Errorf("%d export errors handled, want at least 2", n)
	}

	var warnings int
	for _, l := range logs.lines() {
		if strings.Contains(l, "OpenTelemetry export failing") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d export warnings, want 1:\n%s", warnings, strings.Join(logs.lines(), "\n"))
	}
}

// goroutinesIn reports whether any goroutine has a function of one of the packages on its stack.
func goroutinesIn(names ...string) bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, n := range names {
		if strings.Contains(stacks, n) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	harness.Eventually(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}
