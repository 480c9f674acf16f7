// Package stack assembles what cctrace runs between its listener and its sinks: the proxy, and
// the pipeline that decodes what the proxy observed and feeds the tracker. cctrace serve and run
// and the benchmarks build it here alike, so that the benchmarks measure what users run.
package stack

import (
	"log/slog"
	"net/url"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
)

// New returns a proxy forwarding to upstream and the pipeline it reports to, which feeds tr.
// Both log to log, and share one pool of body buffers: the proxy copies bodies into them, the
// pipeline gives them back once decoded. resolve, when not nil, attributes each request to a
// person (pipeline.WithResolve). opts are further options of the proxy. The caller serves the
// proxy and runs the pipeline (pipeline.Run).
func New(upstream *url.URL, tr *instrument.Tracker, log *slog.Logger, resolve func(*wire.Request), opts ...proxy.Option) (*proxy.Proxy, *pipeline.Pipeline, error) {
	bufs := &bodybuf.Pool{}
	pipe := pipeline.New(tr, pipeline.WithLogger(log), pipeline.WithBodyBuffers(bufs), pipeline.WithResolve(resolve))
	opts = append([]proxy.Option{proxy.WithLogger(log), proxy.WithBodyBuffers(bufs)}, opts...)
	p, err := proxy.New(upstream, pipe, opts...)
	if err != nil {
		return nil, nil, err
	}
	return p, pipe, nil
}
