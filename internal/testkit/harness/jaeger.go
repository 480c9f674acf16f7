package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Jaeger is a running Jaeger v2 all-in-one with in-memory storage, every listener on
// 127.0.0.1. The zero value is not usable; get one from StartJaeger or RunJaeger.
type Jaeger struct {
	otlpGRPC  int
	otlpHTTP  int
	queryHTTP int
	health    int
	proc      *Process
}

// StartJaeger starts Jaeger (binary from CCTRACE_JAEGER_BIN, see Require) like RunJaeger, with
// fresh ports if it fails to start; t.Cleanup stops it.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := Require(t, EnvJaeger, "Jaeger v2")
	j := retryStart(t, "jaeger", func(dir string) (*Jaeger, error) { return RunJaeger(context.Background(), bin, dir) })
	j.proc.cleanup(t)
	return j
}

// RunJaeger starts Jaeger (bin) with its config and log in dir and every listener on a free
// port of 127.0.0.1: OTLP gRPC and HTTP receivers, query HTTP and gRPC, health check HTTP and
// gRPC, and its own metrics (Jaeger's defaults listen on all interfaces, on fixed ports).
// Storage is in memory. It returns once the health check and the query API answer; the caller
// stops it.
func RunJaeger(ctx context.Context, bin, dir string) (*Jaeger, error) {
	ports := make([]int, 7)
	for i := range ports {
		p, err := PickFreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	j := &Jaeger{otlpGRPC: ports[0], otlpHTTP: ports[1], queryHTTP: ports[2], health: ports[3]}
	queryGRPC, healthGRPC, metrics := ports[4], ports[5], ports[6]
	cfg := fmt.Sprintf(jaegerConfig, metrics, j.health, healthGRPC, j.queryHTTP, queryGRPC, j.otlpGRPC, j.otlpHTTP)
	cfgPath := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("writing jaeger config: %w", err)
	}
	proc, err := startServer(ctx, "jaeger", dir, nil, j.healthURL(), bin, "--config", cfgPath)
	if err != nil {
		return nil, err
	}
	j.proc = proc
	// The query API is an extension and starts before the pipelines; readiness above covers
	// the receivers, this covers the API the tests read from.
	if err := proc.WaitReady(ctx, j.QueryURL()+"/api/services"); err != nil {
		proc.Stop()
		return nil, fmt.Errorf("%w\n%s", err, proc.LogTail())
	}
	return j, nil
}

// Stop stops Jaeger.
func (j *Jaeger) Stop() { j.proc.Stop() }

// Services returns the names of the services Jaeger holds spans of.
func (j *Jaeger) Services() ([]string, error) {
	body, err := GetBody(j.QueryURL() + "/api/services")
	if err != nil {
		return nil, err
	}
	var services struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(body, &services); err != nil {
		return nil, fmt.Errorf("decoding jaeger services: %w", err)
	}
	return services.Data, nil
}

func (j *Jaeger) healthURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(j.health) + "/status"
}

// OTLPEndpoint returns the plaintext OTLP/gRPC receiver as "http://127.0.0.1:PORT", the form
// OTEL_EXPORTER_OTLP_ENDPOINT and otlptracegrpc.WithEndpointURL take.
func (j *Jaeger) OTLPEndpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(j.otlpGRPC)
}

// OTLPHTTPEndpoint returns the OTLP/HTTP receiver as "http://127.0.0.1:PORT" (traces are
// posted to /v1/traces under it).
func (j *Jaeger) OTLPHTTPEndpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(j.otlpHTTP)
}

// QueryURL returns the base URL of Jaeger's HTTP query API and UI, "http://127.0.0.1:PORT".
func (j *Jaeger) QueryURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(j.queryHTTP)
}

// Trace is one trace as Jaeger's query API returns it. The zero value is an empty trace.
type Trace struct {
	TraceID string // 32 lower-case hex digits
	Spans   []Span // in the order Jaeger returned them
}

// Span is one span of a Trace. The zero value is an empty span.
type Span struct {
	TraceID       string
	SpanID        string // 16 lower-case hex digits
	ParentSpanID  string // from the first CHILD_OF reference; "" for a root span
	OperationName string
	References    []Reference
	// Tags holds span attributes plus the ones Jaeger derives from OTLP fields ("span.kind",
	// "otel.status_code", "otel.status_description", "error", "otel.scope.name", …). Values are
	// string, bool, int64 or float64; OTLP arrays and maps arrive JSON-encoded as strings.
	Tags        map[string]any
	Logs        []Log // span events
	StartTime   time.Time
	Duration    time.Duration // microsecond resolution
	ServiceName string        // the resource's service.name
	// Process holds the other resource attributes of the process that sent the span, such as
	// service.instance.id; values typed as in Tags.
	Process  map[string]any
	Warnings []string // Jaeger's own complaints about the span
}

// Reference links a span to another span.
type Reference struct {
	RefType string // "CHILD_OF" or "FOLLOWS_FROM"
	TraceID string
	SpanID  string
}

// Log is a span event. The event name is the "event" field.
type Log struct {
	Timestamp time.Time
	Fields    map[string]any
}

// Root returns the span without a parent in the trace, and false if there is none.
func (tr Trace) Root() (Span, bool) {
	for _, s := range tr.Spans {
		if s.ParentSpanID == "" {
			return s, true
		}
	}
	return Span{}, false
}

// SpansNamed returns the spans whose operation name is name, in trace order.
func (tr Trace) SpansNamed(name string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent is the span with ID spanID, in trace order.
func (tr Trace) Children(spanID string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.ParentSpanID == spanID {
			out = append(out, s)
		}
	}
	return out
}

// Traces returns the traces of service stored in Jaeger that started within an hour of now, up
// to 1000 of them, in the order Jaeger returns them. It fails the test if the query API errs.
func (j *Jaeger) Traces(t testing.TB, service string) []Trace {
	t.Helper()
	traces, err := j.traces(service)
	if err != nil {
		t.Fatal(err)
	}
	return traces
}

// WaitTraces polls Traces until service has at least n traces, and returns them; it fails the
// test if that has not happened within Patience.
func (j *Jaeger) WaitTraces(t testing.TB, service string, n int) []Trace {
	t.Helper()
	return j.wait(t, service, fmt.Sprintf("%d traces", n), func(traces []Trace) bool {
		return len(traces) >= n
	})
}

// WaitSpans polls Traces until service has at least n spans in all its traces together, and
// returns the traces; it fails the test if that has not happened within Patience. Use it when
// the spans of one trace may arrive in several exports.
func (j *Jaeger) WaitSpans(t testing.TB, service string, n int) []Trace {
	t.Helper()
	return j.wait(t, service, fmt.Sprintf("%d spans", n), func(traces []Trace) bool {
		total := 0
		for _, tr := range traces {
			total += len(tr.Spans)
		}
		return total >= n
	})
}

func (j *Jaeger) wait(t testing.TB, service, what string, done func([]Trace) bool) []Trace {
	t.Helper()
	var traces []Trace
	Eventually(t, fmt.Sprintf("%s of service %q in jaeger", what, service), func() error {
		var err error
		if traces, err = j.traces(service); err != nil {
			return err
		}
		if !done(traces) {
			return fmt.Errorf("have %d traces", len(traces))
		}
		return nil
	})
	return traces
}

func (j *Jaeger) traces(service string) ([]Trace, error) {
	now := time.Now()
	q := url.Values{
		"service": {service},
		"limit":   {"1000"},
		"start":   {strconv.FormatInt(now.Add(-time.Hour).UnixMicro(), 10)},
		"end":     {strconv.FormatInt(now.Add(time.Hour).UnixMicro(), 10)},
	}
	body, err := GetBody(j.QueryURL() + "/api/traces?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("querying jaeger traces: %w", err)
	}
	traces, err := decodeTraces(body)
	if err != nil {
		return nil, fmt.Errorf("decoding jaeger traces of %q: %w", service, err)
	}
	return traces, nil
}

// apiTraces mirrors the JSON of Jaeger's /api/traces (internal/uimodel in Jaeger).
type apiTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			TraceID       string         `json:"traceID"`
			SpanID        string         `json:"spanID"`
			OperationName string         `json:"operationName"`
			References    []apiReference `json:"references"`
			StartTime     int64          `json:"startTime"` // µs since the epoch
			Duration      int64          `json:"duration"`  // µs
			Tags          []apiKeyValue  `json:"tags"`
			Logs          []struct {
				Timestamp int64         `json:"timestamp"`
				Fields    []apiKeyValue `json:"fields"`
			} `json:"logs"`
			ProcessID string   `json:"processID"`
			Warnings  []string `json:"warnings"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string        `json:"serviceName"`
			Tags        []apiKeyValue `json:"tags"`
		} `json:"processes"`
	} `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type apiReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type apiKeyValue struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func decodeTraces(body []byte) ([]Trace, error) {
	var resp apiTraces
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("unmarshalling: %w", err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("jaeger error %d: %s", resp.Errors[0].Code, resp.Errors[0].Msg)
	}
	traces := make([]Trace, 0, len(resp.Data))
	for _, d := range resp.Data {
		tr := Trace{TraceID: d.TraceID}
		processes := make(map[string]map[string]any, len(d.Processes))
		for id, p := range d.Processes {
			tags, err := decodeKeyValues(p.Tags)
			if err != nil {
				return nil, fmt.Errorf("process %s tags: %w", id, err)
			}
			processes[id] = tags
		}
		for _, s := range d.Spans {
			span := Span{
				TraceID:       s.TraceID,
				SpanID:        s.SpanID,
				OperationName: s.OperationName,
				StartTime:     time.UnixMicro(s.StartTime),
				Duration:      time.Duration(s.Duration) * time.Microsecond,
				ServiceName:   d.Processes[s.ProcessID].ServiceName,
				Process:       processes[s.ProcessID],
				Warnings:      s.Warnings,
			}
			for _, r := range s.References {
				span.References = append(span.References, Reference(r))
				if r.RefType == "CHILD_OF" && span.ParentSpanID == "" {
					span.ParentSpanID = r.SpanID
				}
			}
			tags, err := decodeKeyValues(s.Tags)
			if err != nil {
				return nil, fmt.Errorf("span %s tags: %w", s.SpanID, err)
			}
			span.Tags = tags
			for _, l := range s.Logs {
				fields, err := decodeKeyValues(l.Fields)
				if err != nil {
					return nil, fmt.Errorf("span %s log fields: %w", s.SpanID, err)
				}
				span.Logs = append(span.Logs, Log{Timestamp: time.UnixMicro(l.Timestamp), Fields: fields})
			}
			tr.Spans = append(tr.Spans, span)
		}
		traces = append(traces, tr)
	}
	return traces, nil
}

// decodeKeyValues turns Jaeger's typed key-values into a map, keeping 64-bit integers exact.
func decodeKeyValues(kvs []apiKeyValue) (map[string]any, error) {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		var v any
		var err error
		switch kv.Type {
		case "int64":
			var n int64
			err = json.Unmarshal(kv.Value, &n)
			v = n
		case "float64":
			var f float64
			err = json.Unmarshal(kv.Value, &f)
			v = f
		case "bool":
			var b bool
			err = json.Unmarshal(kv.Value, &b)
			v = b
		default: // "string", "binary" (base64 text)
			var s string
			err = json.Unmarshal(kv.Value, &s)
			v = s
		}
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", kv.Key, kv.Type, err)
		}
		out[kv.Key] = v
	}
	return out, nil
}

// jaegerConfig's verbs, in order: metrics port, health HTTP and gRPC ports, query HTTP and gRPC
// ports, OTLP gRPC and HTTP ports.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d
    logs:
      level: info

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%d
      status:
        enabled: true
        path: /status
    grpc:
      endpoint: 127.0.0.1:%d
      transport: tcp

  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000

  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    max_clock_skew_adjust: 0s
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`
