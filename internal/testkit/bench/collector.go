package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Collector is an OTLP gRPC trace receiver that counts spans and drops them: the "no-op
// exporter" end of a cctrace that exports. cctrace still builds, batches, encodes and sends every
// span; only storing them is skipped. The zero value is not usable; call StartCollector.
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	srv  *grpc.Server
	ln   net.Listener
	done chan struct{}

	mu      sync.Mutex
	service map[string]*ServiceSpans // by service.name
}

// ServiceSpans counts what one service (one cctrace variant) exported.
type ServiceSpans struct {
	Spans int64
	// Chat counts chat spans, one per request; Undecoded those whose request body cctrace did
	// not decode because it was over one of its memory budgets (cctrace.request.parse_error
	// wire.NotDecoded).
	Chat, Undecoded int64
}

// StartCollector starts a Collector on a free port of 127.0.0.1.
func StartCollector() (*Collector, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting collector: %w", err)
	}
	c := &Collector{srv: grpc.NewServer(), ln: ln, done: make(chan struct{}), service: make(map[string]*ServiceSpans)}
	coltracepb.RegisterTraceServiceServer(c.srv, c)
	go func() {
		defer close(c.done)
		_ = c.srv.Serve(ln)
	}()
	return c, nil
}

// Export counts the spans of one export request, by service.
func (c *Collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		name := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				name = kv.GetValue().GetStringValue()
			}
		}
		count := c.service[name]
		if count == nil {
			count = &ServiceSpans{}
			c.service[name] = count
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				count.Spans++
				for _, kv := range sp.GetAttributes() {
					switch kv.GetKey() {
					case "gen_ai.operation.name":
						if kv.GetValue().GetStringValue() == "chat" {
							count.Chat++
						}
					case "cctrace.request.parse_error":
						if wire.IsNotDecoded(kv.GetValue().GetStringValue()) {
							count.Undecoded++
						}
					}
				}
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Service returns what service exported so far.
func (c *Collector) Service(service string) ServiceSpans {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.service[service]; s != nil {
		return *s
	}
	return ServiceSpans{}
}

// Endpoint returns the plaintext endpoint, http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) Endpoint() string { return "http://" + c.ln.Addr().String() }

// Close stops the collector.
func (c *Collector) Close() {
	c.srv.Stop()
	<-c.done
}

// getText GETs url and returns its body.
func getText(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("getting %s: %w", url, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("getting %s: %w", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("getting %s: %w", url, err)
	}
	return string(b), nil
}
