package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestJaegerRoundTrip sends a parent and a child span over OTLP/gRPC with the OTel SDK and reads
// them back from Jaeger's query API; then checks the server is gone once its test ended.
func TestJaegerRoundTrip(t *testing.T) {
	var (
		proc *Process
		port int
	)
	t.Run("spans", func(t *testing.T) {
		j := StartJaeger(t)
		proc, port = j.proc, j.queryHTTP
		service := "harness-selftest-" + strconv.Itoa(os.Getpid())

		ctx := context.Background()
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(j.OTLPEndpoint()), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatalf("creating exporter: %v", err)
		}
		res := resource.NewSchemaless(attribute.String("service.name", service))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
		tracer := tp.Tracer("harness-selftest")
		start := time.Now().Add(-time.Second).Truncate(time.Microsecond)
		ctx, parent := tracer.Start(ctx, "invoke_agent selftest", trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindInternal))
		_, child := tracer.Start(ctx, "chat selftest-model", trace.WithTimestamp(start.Add(time.Millisecond)),
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(
				attribute.String("gen_ai.request.model", "selftest-model"),
				attribute.Int64("gen_ai.usage.input_tokens", 1<<40+1),
				attribute.Bool("selftest.flag", true),
				attribute.Float64("selftest.ratio", 0.25),
			))
		child.AddEvent("retry", trace.WithTimestamp(start.Add(2*time.Millisecond)),
			trace.WithAttributes(attribute.Int64("attempt", 2)))
		child.End(trace.WithTimestamp(start.Add(11 * time.Millisecond)))
		parent.End(trace.WithTimestamp(start.Add(20 * time.Millisecond)))
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutting down tracer provider: %v", err)
		}

		traces := j.WaitSpans(t, service, 2)
		if len(traces) != 1 {
			t.Fatalf("got %d traces, want 1", len(traces))
		}
		tr := traces[0]
		if want := parent.SpanContext().TraceID().String(); tr.TraceID != want {
			t.Errorf("trace ID = %s, want %s", tr.TraceID, want)
		}
		root, ok := tr.Root()
		if !ok {
			t.Fatalf("trace has no root span: %+v", tr)
		}
		if root.OperationName != "invoke_agent selftest" || root.SpanID != parent.SpanContext().SpanID().String() {
			t.Errorf("root = %s %q, want %s %q", root.SpanID, root.OperationName,
				parent.SpanContext().SpanID(), "invoke_agent selftest")
		}
		if root.ServiceName != service {
			t.Errorf("service = %q, want %q", root.ServiceName, service)
		}
		if !root.StartTime.Equal(start) || root.Duration != 20*time.Millisecond {
			t.Errorf("root start/duration = %v/%v, want %v/20ms", root.StartTime, root.Duration, start)
		}
		kids := tr.Children(root.SpanID)
		if len(kids) != 1 {
			t.Fatalf("root has %d children, want 1: %+v", len(kids), tr.Spans)
		}
		c := kids[0]
		if got := tr.SpansNamed("chat selftest-model"); len(got) != 1 || got[0].SpanID != c.SpanID {
			t.Errorf("SpansNamed(chat selftest-model) = %+v, want the child", got)
		}
		if c.Duration != 10*time.Millisecond {
			t.Errorf("child duration = %v, want 10ms", c.Duration)
		}
		wantTags := map[string]any{
			"gen_ai.request.model":      "selftest-model",
			"gen_ai.usage.input_tokens": int64(1<<40 + 1),
			"selftest.flag":             true,
			"selftest.ratio":            0.25,
			"span.kind":                 "client",
		}
		for k, want := range wantTags {
			if got := c.Tags[k]; got != want {
				t.Errorf("child tag %s = %#v, want %#v", k, got, want)
			}
		}
		if len(c.Logs) != 1 || c.Logs[0].Fields["event"] != "retry" || c.Logs[0].Fields["attempt"] != int64(2) {
			t.Errorf("child logs = %+v, want one retry event with attempt=2", c.Logs)
		}
	})
	assertStopped(t, proc, port)
}

// TestPrometheusScrape has Prometheus scrape a promhttp handler and reads back a counter and
// its exemplar; then checks the server is gone once its test ended.
func TestPrometheusScrape(t *testing.T) {
	var (
		proc *Process
		port int
	)
	t.Run("counter", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		events := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "harness_selftest_events_total",
			Help: "Events counted by the harness self-test.",
		}, []string{"kind"})
		reg.MustRegister(events)
		events.WithLabelValues("a").(prometheus.ExemplarAdder).AddWithExemplar(3,
			prometheus.Labels{"trace_id": "0af7651916cd43dd8448eb211c80319c"})
		events.WithLabelValues("b").Add(1)
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
		t.Cleanup(srv.Close)

		p := StartPrometheus(t, srv.Listener.Addr().String())
		proc, port = p.proc, p.port
		expr := fmt.Sprintf(`harness_selftest_events_total{job=%q,kind="a"}`, ScrapeJob)
		p.WaitQuery(t, expr, 3)
		if got := p.Query(t, `sum(harness_selftest_events_total)`); got != 4 {
			t.Errorf("sum = %v, want 4", got)
		}
		if got := p.Query(t, `scalar(harness_selftest_events_total{kind="b"})`); got != 1 {
			t.Errorf("scalar(kind=b) = %v, want 1", got)
		}
		if _, err := p.query(`harness_selftest_events_total`); err == nil {
			t.Error("query matching two series: got no error, want one")
		}
		ex := p.Exemplars(t, expr)
		if len(ex) != 1 || ex[0].Labels["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || ex[0].Value != 3 {
			t.Errorf("exemplars = %+v, want one with trace_id and value 3", ex)
		}
	})
	assertStopped(t, proc, port)
}

// assertStopped checks that the server of a finished test was reaped and its port released.
func assertStopped(t *testing.T, proc *Process, port int) {
	t.Helper()
	if proc == nil {
		return // the subtest was skipped or failed before starting the server
	}
	select {
	case <-proc.exited:
	default:
		t.Fatalf("%s still running after its test ended", proc.Name)
	}
	if err := syscall.Kill(-proc.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("%s process group still exists after its test ended (kill 0: %v)", proc.Name, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Errorf("%s port %d still taken after its test ended: %v", proc.Name, port, err)
		return
	}
	if err := l.Close(); err != nil {
		t.Errorf("closing listener: %v", err)
	}
}

func TestDecodeTraces(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []Trace
		wantErr bool
	}{
		{
			name: "empty",
			body: `{"data":[],"total":0,"limit":0,"offset":0,"errors":null}`,
			want: []Trace{},
		},
		{
			name: "parent and child",
			body: `{"data":[{"traceID":"t1","spans":[
				{"traceID":"t1","spanID":"s1","operationName":"root","references":[],
				 "startTime":1700000000000001,"duration":5,"tags":[{"key":"n","type":"int64","value":9007199254740993}],
				 "logs":[],"processID":"p1","warnings":null},
				{"traceID":"t1","spanID":"s2","operationName":"kid",
				 "references":[{"refType":"FOLLOWS_FROM","traceID":"t1","spanID":"s0"},{"refType":"CHILD_OF","traceID":"t1","spanID":"s1"}],
				 "startTime":1700000000000002,"duration":1,
				 "tags":[{"key":"s","type":"string","value":"x"},{"key":"b","type":"bool","value":false},{"key":"f","type":"float64","value":1.5}],
				 "logs":[{"timestamp":1700000000000003,"fields":[{"key":"event","type":"string","value":"e"}]}],
				 "processID":"p2","warnings":["w"]}],
				"processes":{"p1":{"serviceName":"a","tags":[{"key":"service.instance.id","type":"string","value":"r1"}]},"p2":{"serviceName":"b","tags":[]}}}]}`,
			want: []Trace{{TraceID: "t1", Spans: []Span{
				{
					TraceID: "t1", SpanID: "s1", OperationName: "root",
					StartTime: time.UnixMicro(1700000000000001), Duration: 5 * time.Microsecond,
					Tags: map[string]any{"n": int64(9007199254740993)}, ServiceName: "a",
					Process: map[string]any{"service.instance.id": "r1"},
				},
				{
					TraceID: "t1", SpanID: "s2", ParentSpanID: "s1", OperationName: "kid",
					References: []Reference{{"FOLLOWS_FROM", "t1", "s0"}, {"CHILD_OF", "t1", "s1"}},
					StartTime:  time.UnixMicro(1700000000000002), Duration: time.Microsecond,
					Tags:        map[string]any{"s": "x", "b": false, "f": 1.5},
					Logs:        []Log{{Timestamp: time.UnixMicro(1700000000000003), Fields: map[string]any{"event": "e"}}},
					ServiceName: "b", Process: map[string]any{}, Warnings: []string{"w"},
				},
			}}},
		},
		{
			name:    "jaeger error",
			body:    `{"data":null,"errors":[{"code":400,"msg":"parameter 'service' is required"}]}`,
			wantErr: true,
		},
		{
			name:    "tag of wrong type",
			body:    `{"data":[{"traceID":"t","spans":[{"spanID":"s","tags":[{"key":"n","type":"int64","value":"x"}]}]}]}`,
			wantErr: true,
		},
		{
			name:    "not json",
			body:    `<html>`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeTraces([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParseScrapeTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    scrapeTarget
		wantErr bool
	}{
		{in: "127.0.0.1:9464", want: scrapeTarget{"http", "127.0.0.1:9464", "/metrics"}},
		{in: "http://127.0.0.1:9464/custom", want: scrapeTarget{"http", "127.0.0.1:9464", "/custom"}},
		{in: "https://127.0.0.1:1", want: scrapeTarget{"https", "127.0.0.1:1", "/metrics"}},
		{in: "http:///metrics", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseScrapeTarget(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// recordingTB records how Require ended a test. Fatal and Skip unwind with a panic, as the
// real ones unwind with runtime.Goexit.
type recordingTB struct {
	testing.TB
	ended string
}

type endTest struct{}

func (r *recordingTB) Helper()                  {}
func (r *recordingTB) Fatal(args ...any)        { r.end("fatal") }
func (r *recordingTB) Fatalf(string, ...any)    { r.end("fatal") }
func (r *recordingTB) Skip(args ...any)         { r.end("skip") }
func (r *recordingTB) Skipf(f string, a ...any) { r.end("skip") }
func (r *recordingTB) end(how string) {
	r.ended = how
	panic(endTest{})
}

func TestRequire(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value, ci, want string
	}{
		{name: "set", value: exe, want: "ok"},
		{name: "set under CI", value: exe, ci: "true", want: "ok"},
		{name: "unset skips", want: "skip"},
		{name: "unset fails under CI", ci: "true", want: "fatal"},
		{name: "unset skips with CI=false", ci: "false", want: "skip"},
		{name: "missing file fails", value: filepath.Join(t.TempDir(), "nope"), want: "fatal"},
		{name: "not executable fails", value: plain, want: "fatal"},
		{name: "directory fails", value: t.TempDir(), want: "fatal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			t.Setenv("CCTRACE_HARNESS_SELFTEST_BIN", tt.value)
			rec := &recordingTB{TB: t}
			got := func() (got string) {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(endTest); !ok {
							panic(r)
						}
						got = rec.ended
					}
				}()
				if path := Require(rec, "CCTRACE_HARNESS_SELFTEST_BIN", "self-test tool"); path != tt.value {
					return "wrong path " + path
				}
				return "ok"
			}()
			if got != tt.want {
				t.Errorf("Require ended with %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWaitReadyExitedServer(t *testing.T) {
	p, err := StartProcess("early-exit", filepath.Join(t.TempDir(), "log"), nil, "/bin/sh", "-c", "echo boom; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = p.WaitReady(context.Background(), "http://127.0.0.1:"+strconv.Itoa(FreePort(t))+"/")
	if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("WaitReady on a server that exited = %v, want errExited with exit status 3", err)
	}
	if log := p.Output(); log != "boom\n" {
		t.Errorf("log = %q, want %q", log, "boom\n")
	}
}

func TestStopKillsProcessGroup(t *testing.T) {
	p, err := StartProcess("group", filepath.Join(t.TempDir(), "log"), nil, "/bin/sh", "-c", "sleep 300 & echo started; sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the shell to start its children", func() error {
		if p.Output() != "started\n" {
			return errors.New("not yet")
		}
		return nil
	})
	p.Stop()
	assertStopped(t, p, FreePort(t))
	p.Stop() // a second stop is harmless
}
