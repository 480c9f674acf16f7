package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// Collector is an OTLP gRPC trace receiver that counts spans and drops them: the "no-op
// exporter" end of a cctrace that exports. cctrace still builds, batches, encodes and sends every
// span; only storing them is skipped. The zero value is not usable; call StartCollector.
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	srv   *grpc.Server
	ln    net.Listener
	done  chan struct{}
	spans atomic.Int64
}

// StartCollector starts a Collector on a free port of 127.0.0.1.
func StartCollector() (*Collector, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting collector: %w", err)
	}
	c := &Collector{srv: grpc.NewServer(), ln: ln, done: make(chan struct{})}
	coltracepb.RegisterTraceServiceServer(c.srv, c)
	go func() {
		defer close(c.done)
		_ = c.srv.Serve(ln)
	}()
	return c, nil
}

// Export counts the spans of one export request.
func (c *Collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	var n int64
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	c.spans.Add(n)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Endpoint returns the plaintext endpoint, http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) Endpoint() string { return "http://" + c.ln.Addr().String() }

// Spans returns how many spans arrived so far.
func (c *Collector) Spans() int64 { return c.spans.Load() }

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
