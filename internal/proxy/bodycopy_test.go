package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
)

// sameArray reports whether two slices of non-zero capacity start at the same element.
func sameArray(a, b []byte) bool { return &a[:1][0] == &b[:1][0] }

func TestBoundedCopyBuffers(t *testing.T) {
	t.Run("a known size takes its class and hands the buffer over", func(t *testing.T) {
		c := newBoundedCopy(1<<20, 100<<10, &copyBudget{bufs: &bodybuf.Pool{}})
		if cap(c.buf) != 112<<10 {
			t.Fatalf("buffer capacity %d, want %d", cap(c.buf), 112<<10)
		}
		buf := c.buf
		body := bytes.Repeat([]byte("x"), 100<<10)
		c.add(body[:1000])
		c.add(body[1000:])
		got, err := c.take()
		if err != nil || !bytes.Equal(got, body) || !sameArray(got, buf) {
			t.Fatalf("take() = %d bytes (same buffer %v), %v; want the body in the class buffer", len(got), sameArray(got, buf), err)
		}
		if c.buf != nil {
			t.Error("the copy still holds the buffer it handed over")
		}
	})
	t.Run("an unknown size starts in the smallest class and grows through classes", func(t *testing.T) {
		c := newBoundedCopy(1<<20, -1, &copyBudget{bufs: &bodybuf.Pool{}})
		c.add([]byte("event: message_start\n"))
		if cap(c.buf) != bodybuf.Smallest {
			t.Fatalf("buffer capacity %d after a first event, want the smallest class, %d", cap(c.buf), bodybuf.Smallest)
		}
		c.add(make([]byte, bodybuf.Smallest))
		if p := (&bodybuf.Pool{}); int64(cap(c.buf)) != p.Cap(int64(cap(c.buf))) {
			t.Errorf("buffer capacity %d after growing is not a class's", cap(c.buf))
		}
	})
	t.Run("over the limit lets go of the buffer", func(t *testing.T) {
		c := newBoundedCopy(100<<10, 100<<10, nil)
		c.add(make([]byte, 100<<10))
		c.add([]byte("!"))
		if c.buf != nil {
			t.Error("the copy holds a buffer after going over the limit")
		}
		if got, err := c.take(); got != nil || err != errOverParseLimit {
			t.Errorf("take() = %d bytes, %v; want nil, errOverParseLimit", len(got), err)
		}
	})
	t.Run("without a pool the buffer is the body's size", func(t *testing.T) {
		if c := newBoundedCopy(1<<20, 100<<10, nil); cap(c.buf) != 100<<10 {
			t.Fatalf("buffer capacity %d, want %d", cap(c.buf), 100<<10)
		}
	})
	t.Run("an empty body lets go of the buffer", func(t *testing.T) {
		c := newBoundedCopy(1<<20, 100<<10, nil)
		if got, err := c.take(); got != nil || err != nil || c.buf != nil {
			t.Errorf("take() = %v, %v (buffer held: %v); want nil, nil, none", got, err, c.buf != nil)
		}
	})
}

// recyclingObserver holds each request body until its response is done, while other exchanges
// copy theirs, then checks both bodies against what the client sent and gives them back to the
// pool, as the pipeline does once it has decoded them.
type recyclingObserver struct {
	bufs     *bodybuf.Pool
	mu       sync.Mutex
	requests map[uint64][]byte
	errs     []string
	done     chan struct{}
}

func (o *recyclingObserver) RequestRead(req *wire.Request, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests[req.ExchangeID] = body
}

func (o *recyclingObserver) ResponseDone(resp *wire.Response, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	req := o.requests[resp.ExchangeID]
	delete(o.requests, resp.ExchangeID)
	want := numberedBody(seedOf(req), len(req))
	for _, b := range []struct {
		what string
		body []byte
	}{{"request", req}, {"response", body}} {
		if !bytes.Equal(b.body, want) {
			o.errs = append(o.errs, fmt.Sprintf("exchange %d: the %s body copy (%d bytes) is not what was sent (%d bytes)",
				resp.ExchangeID, b.what, len(b.body), len(want)))
		}
		o.bufs.Put(b.body)
	}
	o.done <- struct{}{}
}

// numberedBody returns a test body of n bytes: its seed in hex, repeated, so that a copy
// overwritten by another exchange's shows.
func numberedBody(seed uint64, n int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "%08x;", seed), n/9+1)[:n]
}

// seedOf returns the seed of a body numberedBody made, or 0.
func seedOf(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	seed, _ := strconv.ParseUint(string(b[:8]), 16, 64)
	return seed
}

// TestRecycledBodiesThroughProxy sends bodies of many sizes through the proxy, concurrently,
// to an upstream that echoes them, with an Observer that recycles every body it is handed: each
// copy must still be exactly what passed, however the buffers are reused.
func TestRecycledBodiesThroughProxy(t *testing.T) {
	obs := &recyclingObserver{bufs: &bodybuf.Pool{}, requests: map[uint64][]byte{}, done: make(chan struct{}, 256)}
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	})))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(up, obs, WithBodyBuffers(obs.bufs))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	defer p.cfg.transport.(*http.Transport).CloseIdleConnections()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	const workers, each = 4, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				// Exchanges in flight at once are of similar sizes, so they share classes:
				// 45 KiB to 360 KiB in all.
				seed := uint64(i*workers + w + 1)
				body := numberedBody(seed, 40<<10+int(seed)*(5<<10))
				res, err := client.Post(front.URL+"/v1/messages", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("seed %d: echo of %d bytes differs from the %d sent (%v)", seed, len(got), len(body), err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for range workers * each {
		select {
		case <-obs.done:
		case <-time.After(waitTimeout):
			t.Fatal("not every exchange was reported")
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, e := range obs.errs {
		t.Error(e)
	}
}
