package proxy

import (
	"io"
	"net/http"
)

// responseTap wraps the client's ResponseWriter. It counts the bytes forwarded and copies them
// once they were written; an event stream's chunks it flushes to the client first, and notes
// when each was.
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

// Write forwards p to the client, then copies it; an event stream's chunk is flushed before it
// is copied and its time noted, which is when its events reached the client.
func (t *responseTap) Write(p []byte) (int, error) {
	t.wroteHeader = true
	n, err := t.ResponseWriter.Write(p)
	t.written += int64(n)
	if err != nil && t.writeErr == nil {
		t.writeErr = err
	}
	c := t.x.respCopy
	if c == nil || n == 0 {
		return n, err
	}
	if !t.x.resp.Streamed {
		// ReverseProxy flushes it as soon as this returns.
		c.add(p[:n])
		return n, err
	}
	if err == nil {
		if ferr := t.rc.Flush(); ferr != nil && t.writeErr == nil {
			t.writeErr = ferr
		}
	}
	c.add(p[:n])
	c.mark(t.x.p.cfg.now())
	return n, err
}

// Flush sends any buffered data to the client.
func (t *responseTap) Flush() {
	_ = t.FlushError()
}

// FlushError sends any buffered data to the client and reports whether that failed. A failure
// is remembered as a write error: ReverseProxy flushes after each write of a body and ignores
// what its flush returns, and a body's last bytes may only leave here.
func (t *responseTap) FlushError() error {
	err := t.rc.Flush()
	if err != nil && t.writeErr == nil {
		t.writeErr = err
	}
	return err
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (t *responseTap) Unwrap() http.ResponseWriter {
	return t.ResponseWriter
}

// responseBody wraps the upstream's response body: it notes when the body has ended, and
// remembers a read error before that, which means the upstream cut the body short.
type responseBody struct {
	io.ReadCloser
	x      *exchange
	length int64 // the response's Content-Length, or -1
	read   int64
}

// Read reads from the upstream body. A body of known length has ended at its last byte: the read
// that would return io.EOF after it can fail instead, once a client that had the whole answer has
// closed its connection and so canceled the upstream request.
func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	switch {
	case err == io.EOF || (b.length >= 0 && b.read >= b.length):
		b.x.bodyEnded = true
	case err != nil && b.x.readErr == nil && !b.x.bodyEnded:
		b.x.readErr = err
	}
	return n, err
}
