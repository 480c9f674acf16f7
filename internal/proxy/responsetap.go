package proxy

import (
	"io"
	"net/http"
)

// responseTap wraps the client's ResponseWriter. It counts the bytes forwarded and, for event
// streams, flushes each chunk to the client before handing it to the stream decoder, so decoding
// never delays a byte.
//
// It keeps every optional interface of the writer it wraps reachable: Flush and FlushError
// directly, the rest (Hijack, deadlines, …) through Unwrap and http.ResponseController.
type responseTap struct {
	http.ResponseWriter
	rc *http.ResponseController
	x  *exchange

	wroteHeader bool
	written     int64
	writeErr    error // the first error writing to the client
}

var (
	_ http.Flusher = (*responseTap)(nil)
	_ io.Writer    = (*responseTap)(nil)
)

func newResponseTap(w http.ResponseWriter, x *exchange) *responseTap {
	return &responseTap{ResponseWriter: w, rc: http.NewResponseController(w), x: x}
}

// WriteHeader passes the status on; informational (1xx) headers do not count as the response's.
func (t *responseTap) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		t.wroteHeader = true
	}
	t.ResponseWriter.WriteHeader(code)
}

// Write forwards p to the client; for an event stream it then flushes and only then decodes.
// The first byte forwarded ends the exchange's wait for its answer (Proxy.Waiting).
func (t *responseTap) Write(p []byte) (int, error) {
	t.wroteHeader = true
	n, err := t.ResponseWriter.Write(p)
	t.written += int64(n)
	if err != nil && t.writeErr == nil {
		t.writeErr = err
	}
	if d := t.x.decoder; d != nil && n > 0 {
		if err == nil {
			if ferr := t.rc.Flush(); ferr != nil && t.writeErr == nil {
				t.writeErr = ferr
			}
		}
		t.x.answering()
		d.Write(p[:n], t.x.p.cfg.now())
	} else if n > 0 {
		// ReverseProxy flushes other bodies as soon as this returns.
		t.x.answering()
	}
	return n, err
}

// Flush sends any buffered data to the client.
func (t *responseTap) Flush() {
	_ = t.rc.Flush()
}

// FlushError sends any buffered data to the client and reports whether that failed.
func (t *responseTap) FlushError() error {
	return t.rc.Flush()
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (t *responseTap) Unwrap() http.ResponseWriter {
	return t.ResponseWriter
}

// responseBody wraps the upstream's response body: it copies non-stream bodies (up to the parse
// limit) and remembers a read error, which means the upstream cut the body short.
type responseBody struct {
	io.ReadCloser
	x *exchange
}

// Read reads from the upstream body.
func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if c := b.x.respCopy; c != nil {
		c.add(p[:n])
	}
	if err != nil && err != io.EOF && b.x.readErr == nil {
		b.x.readErr = err
	}
	return n, err
}
