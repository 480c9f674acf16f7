package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// readSizes is a client body that remembers the largest buffer it was asked to fill.
type readSizes struct {
	io.ReadCloser
	mu      sync.Mutex
	largest int
}

func (r *readSizes) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.largest = max(r.largest, len(p))
	r.mu.Unlock()
	return r.ReadCloser.Read(p)
}

// TestSendBodyThroughProxy sends bodies of many sizes through the proxy to a plain-HTTP
// upstream: each must arrive byte for byte, and the Observer must get the same bytes. For the
// bodies over the transport's 32 KiB the proxy must have read the client's body itself, in
// chunks larger than the transport's own loop asks for (sendbody.go): that is how it shows that
// the transport still hands the body to upstreamConn.ReadFrom.
func TestSendBodyThroughProxy(t *testing.T) {
	var mu sync.Mutex
	received := map[string]uint32{}
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		received[r.URL.Query().Get("n")] = crc32.ChecksumIEEE(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"type":"message","id":"msg_%d"}`, len(b))
	})))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p, err := New(up, rec)
	if err != nil {
		t.Fatal(err)
	}
	var reads []*readSizes
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs := &readSizes{ReadCloser: r.Body}
		mu.Lock()
		reads = append(reads, rs)
		mu.Unlock()
		r.Body = rs
		p.ServeHTTP(w, r)
	}))
	defer front.Close()
	defer p.cfg.transport.(*http.Transport).CloseIdleConnections()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	sizes := []int{1, 100, 32<<10 + 1, sendChunk - 1, sendChunk, sendChunk + 1, 1<<20 + 3, 3 << 20}
	for i, n := range sizes {
		body := numberedBody(uint64(i+1), n)
		res, err := client.Post(fmt.Sprintf("%s/v1/messages?n=%d", front.URL, n), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got := readAll(t, res.Body)
		if want := fmt.Sprintf(`{"type":"message","id":"msg_%d"}`, n); string(got) != want {
			t.Errorf("%d bytes: the upstream answered %q, want %q", n, got, want)
		}
		ex := rec.next(t)
		mu.Lock()
		crc, largest := received[fmt.Sprint(n)], reads[len(reads)-1].largest
		mu.Unlock()
		if crc != crc32.ChecksumIEEE(body) {
			t.Errorf("%d bytes: the upstream did not receive the body that was sent", n)
		}
		if !bytes.Equal(ex.reqBody, body) || ex.req.BodySize != int64(n) || ex.req.ParseError != "" {
			t.Errorf("%d bytes: the Observer got %d bytes (equal: %v), size %d, parse error %q", n,
				len(ex.reqBody), bytes.Equal(ex.reqBody, body), ex.req.BodySize, ex.req.ParseError)
		}
		if n > 64<<10 && largest <= 32<<10 {
			t.Errorf("%d bytes: the client's body was read at most %d bytes at a time: not by sendTo", n, largest)
		}
	}
}

// gatedReader is a client body whose reads wait until the test lets them through, one at a
// time; reads says when each has begun.
type gatedReader struct {
	r     io.Reader
	reads chan struct{}
	gate  chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.reads <- struct{}{}
	<-g.gate
	return g.r.Read(p)
}

func (g *gatedReader) Close() error { return nil }

// gatedWriter is an upstream whose writes wait until the test lets them through; writes says
// when each has begun. It keeps what it was given only once let through, so that bytes changed
// while a write waits show.
type gatedWriter struct {
	got    bytes.Buffer
	writes chan struct{}
	gate   chan struct{}
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.writes <- struct{}{}
	<-g.gate
	return g.got.Write(p)
}

// waitFor receives from c or fails the test.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(waitTimeout):
		t.Fatalf("%s did not happen", what)
	}
}

// TestSendToWhileFinished covers finish running while sendTo has a chunk of the copy's buffer
// in hand, which happens when the upstream answers before the body has reached it: the buffer
// must neither go back to the pool (another exchange would fill it while the chunk is read into
// it or written from it) nor be shared with the Observer.
func TestSendToWhileFinished(t *testing.T) {
	body := numberedBody(7, 200<<10) // takes a pooled class
	t.Run("during a read", func(t *testing.T) {
		src := &gatedReader{r: bytes.NewReader(body), reads: make(chan struct{}), gate: make(chan struct{})}
		tap := newRequestTap(src, int64(len(body)), 1<<20, 0, nil, func() {})
		w := &bytes.Buffer{}
		b := &outBody{tap: tap}
		done := make(chan error, 1)
		go func() {
			_, err := b.sendTo(w, &io.LimitedReader{R: b, N: int64(len(body))})
			done <- err
		}()
		waitFor(t, src.reads, "the first read")
		got, size, parseErr := tap.finish()
		if got != nil || size != 0 || !strings.Contains(parseErr, "not read to its end") {
			t.Errorf("finish = %d bytes, size %d, %q; want no body, not read to its end", len(got), size, parseErr)
		}
		tap.mu.Lock()
		lent := tap.lent
		tap.mu.Unlock()
		if cap(lent) == 0 {
			t.Error("finish let go of the buffer a read was filling")
		}
		close(src.gate)
		go func() {
			for range src.reads {
			}
		}()
		if err := <-done; err != nil {
			t.Fatalf("sendTo: %v", err)
		}
		close(src.reads)
		if !bytes.Equal(w.Bytes(), body) {
			t.Errorf("forwarded %d bytes that differ from the %d of the body", w.Len(), len(body))
		}
		if tap.lent != nil || tap.sending {
			t.Error("the buffer was not given back once the chunk was sent")
		}
	})
	t.Run("during the last write", func(t *testing.T) {
		tap := newRequestTap(io.NopCloser(bytes.NewReader(body)), int64(len(body)), 1<<20, 0, nil, func() {})
		w := &gatedWriter{writes: make(chan struct{}), gate: make(chan struct{})}
		b := &outBody{tap: tap}
		done := make(chan error, 1)
		go func() {
			_, err := b.sendTo(w, &io.LimitedReader{R: b, N: int64(len(body))})
			done <- err
		}()
		waitFor(t, w.writes, "the write")
		got, size, parseErr := tap.finish()
		if !bytes.Equal(got, body) || size != int64(len(body)) || parseErr != "" {
			t.Fatalf("finish = %d bytes (equal: %v), size %d, %q; want the whole body", len(got), bytes.Equal(got, body), size, parseErr)
		}
		// The Observer owns its copy: it may give it back to the pool, and another exchange
		// overwrite it, before the write from the tap's buffer is done.
		for i := range got {
			got[i] = '!'
		}
		close(w.gate)
		if err := <-done; err != nil {
			t.Fatalf("sendTo: %v", err)
		}
		if !bytes.Equal(w.got.Bytes(), body) {
			t.Error("the bytes written to the upstream changed with the Observer's copy")
		}
		if tap.lent != nil || tap.sending {
			t.Error("the buffer was not given back once the chunk was sent")
		}
	})
}

// TestSendToFallsBack checks the bodies sendTo cannot read into the copy (over the parse limit,
// over the copy budget) and a closed outBody: the bytes still go through Read, in full, and the
// Observer is told why it has no copy.
func TestSendToFallsBack(t *testing.T) {
	body := numberedBody(3, 100<<10)
	for _, tc := range []struct {
		name    string
		limit   int64
		budget  int64
		wantErr string
	}{
		{"over the parse limit", 64 << 10, 0, "parse limit"},
		{"over the copy budget", 1 << 20, 128 << 10, "copy budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var budget *copyBudget
			if tc.budget > 0 {
				budget = &copyBudget{limit: tc.budget, small: smallCopy, log: slog.New(slog.DiscardHandler)}
				budget.reserved.Store(64 << 10) // another copy's
			}
			ends := 0
			tap := newRequestTap(io.NopCloser(bytes.NewReader(body)), int64(len(body)), tc.limit, 0, budget, func() { ends++ })
			b := &outBody{tap: tap}
			var w bytes.Buffer
			n, err := b.sendTo(&w, &io.LimitedReader{R: b, N: int64(len(body))})
			if err != nil || n != int64(len(body)) || !bytes.Equal(w.Bytes(), body) {
				t.Fatalf("sendTo = %d, %v (equal: %v); want the whole body", n, err, bytes.Equal(w.Bytes(), body))
			}
			if tap.direct != 0 {
				t.Errorf("%d bytes read into a copy that was not being made", tap.direct)
			}
			if ends != 1 {
				t.Errorf("onEnd called %d times, want 1", ends)
			}
			got, size, parseErr := tap.finish()
			if got != nil || size != int64(len(body)) || !strings.Contains(parseErr, tc.wantErr) {
				t.Errorf("finish = %d bytes, size %d, %q; want none, %d, one containing %q", len(got), size, parseErr, len(body), tc.wantErr)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		tap := newRequestTap(io.NopCloser(bytes.NewReader(body)), int64(len(body)), 1<<20, 0, nil, func() {})
		b := &outBody{tap: tap}
		_ = b.Close()
		if _, err := b.sendTo(io.Discard, &io.LimitedReader{R: b, N: int64(len(body))}); !errors.Is(err, errOutBodyClosed) {
			t.Errorf("sendTo after Close: %v, want errOutBodyClosed", err)
		}
		if _, err := b.Read(make([]byte, 10)); !errors.Is(err, errOutBodyClosed) {
			t.Errorf("Read after Close: %v, want errOutBodyClosed", err)
		}
	})
}

// slowLastWrite is an upstream connection whose write of the body's last bytes (the write
// that ends with tail) reaches the upstream at once but returns only when release is closed, as
// when the kernel has the bytes and the writing goroutine waits for a CPU; returned is set then.
type slowLastWrite struct {
	net.Conn
	tail     []byte
	release  <-chan struct{}
	returned *atomic.Bool
}

func (c *slowLastWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if bytes.HasSuffix(p, c.tail) {
		select {
		case <-c.release:
		case <-time.After(waitTimeout):
		}
		c.returned.Store(true)
	}
	return n, err
}

// handOver is an Observer that notes whether the body's last write had returned when it
// heard of the request.
type handOver struct {
	returned      *atomic.Bool
	heard         chan struct{}
	afterReturn   bool
	body          []byte
	responseAfter bool
	done          chan struct{}
}

func (h *handOver) RequestRead(_ *wire.Request, body []byte) {
	h.afterReturn, h.body = h.returned.Load(), body
	close(h.heard)
}

func (h *handOver) ResponseDone(*wire.Response, []byte) {
	select {
	case <-h.heard:
		h.responseAfter = true
	default:
	}
	close(h.done)
}

// TestLastChunkHandedOverAfterItsWrite has the upstream answer while the body's last chunk is
// still being written from the copy (its bytes arrived, the write has not returned). The
// Observer must then get the copy itself once the write returns, not a clone made while the
// answer is on its way to the client (sendingLast), and still before ResponseDone.
func TestLastChunkHandedOverAfterItsWrite(t *testing.T) {
	// Into a pooled copy, with room for every chunk; its last bytes appear nowhere else.
	body := append(numberedBody(9, 100<<10-16), "[the body ends]."...)
	release := make(chan struct{})
	var returned atomic.Bool
	obs := &handOver{returned: &returned, heard: make(chan struct{}), done: make(chan struct{})}
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
		http.NewResponseController(w).Flush()
		// End the stream only once the Observer has heard of the request, so that
		// ResponseDone cannot be what reports it.
		select {
		case <-obs.heard:
		case <-time.After(waitTimeout):
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	tr := defaultTransport()
	dialer := &net.Dialer{}
	tr.DialContext = dialUpstream(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowLastWrite{Conn: c, tail: body[len(body)-16:], release: release, returned: &returned}, nil
	})
	defer tr.CloseIdleConnections()
	p, err := New(up, obs, WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	res, err := client.Post(front.URL+"/v1/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// The answer's headers reached the client while the last write had not returned.
	close(release)
	readAll(t, res.Body)
	waitFor(t, obs.heard, "RequestRead")
	if !obs.afterReturn {
		t.Error("the Observer heard of the request before the body's last write returned: finish cloned the copy on the way to the first byte")
	}
	if !bytes.Equal(obs.body, body) {
		t.Errorf("the Observer got %d bytes, not the %d of the body", len(obs.body), len(body))
	}
	waitFor(t, obs.done, "ResponseDone")
	if !obs.responseAfter {
		t.Error("ResponseDone came before RequestRead")
	}
}
