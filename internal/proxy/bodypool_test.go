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
)

func TestBodyClasses(t *testing.T) {
	for _, tt := range []struct {
		n       int64
		wantCap int64 // capacity of the buffer getBody returns
		pooled  bool
	}{
		{1, 1, false},
		{32 << 10, 32 << 10, false},
		{32<<10 + 1, 64 << 10, true},
		{64 << 10, 64 << 10, true},
		{64<<10 + 1, 80 << 10, true},
		{80 << 10, 80 << 10, true},
		{100 << 10, 112 << 10, true},
		{112<<10 + 1, 128 << 10, true},
		{200 << 10, 224 << 10, true},
		{1 << 20, 1 << 20, true},
		{1<<20 + 1, 1280 << 10, true},
		{3 << 20, 3 << 20, true},
		{28<<20 + 1, 32 << 20, true},
		{32 << 20, 32 << 20, true},
		{32<<20 + 1, 32<<20 + 1, false},
	} {
		t.Run(strconv.FormatInt(tt.n, 10), func(t *testing.T) {
			class, pooled := bodyClass(tt.n)
			if pooled != tt.pooled {
				t.Fatalf("bodyClass(%d) pooled = %v, want %v", tt.n, pooled, tt.pooled)
			}
			if pooled {
				if got := bodyClassSize(class); got != tt.wantCap {
					t.Errorf("bodyClass(%d) = class of %d bytes, want %d", tt.n, got, tt.wantCap)
				}
			}
			if got := bodyCap(tt.n); got != tt.wantCap {
				t.Errorf("bodyCap(%d) = %d, want %d", tt.n, got, tt.wantCap)
			}
			if tt.n > 2<<20 {
				return // the class is checked; spare the test a large buffer
			}
			b := getBody(tt.n)
			if len(b) != 0 || int64(cap(b)) != tt.wantCap {
				t.Errorf("getBody(%d): len %d cap %d, want len 0 cap %d", tt.n, len(b), cap(b), tt.wantCap)
			}
		})
	}
}

// TestBodyClassSizes checks every class: four per power of two from 64 KiB to 32 MiB, each the
// smallest that holds the sizes above the one below it, and none wasting a quarter of a body
// above 64 KiB.
func TestBodyClassSizes(t *testing.T) {
	var want []int64
	for s := minBodyClassShift; s < maxBodyClassShift; s++ {
		for q := int64(4); q < 8; q++ {
			want = append(want, q<<(s-2))
		}
	}
	want = append(want, maxBodyClass)
	if len(want) != numBodyClasses {
		t.Fatalf("%d class sizes, want numBodyClasses = %d", len(want), numBodyClasses)
	}
	for i, size := range want {
		if got := bodyClassSize(i); got != size {
			t.Fatalf("bodyClassSize(%d) = %d, want %d", i, got, size)
		}
		if c, ok := classOfSize(size); !ok || c != i {
			t.Errorf("classOfSize(%d) = %d, %v; want %d, true", size, c, ok, i)
		}
		for _, c := range []int64{size - 1, size + 1, size + size/8} {
			if got, ok := classOfSize(c); ok {
				t.Errorf("classOfSize(%d) = %d, true; want no class", c, got)
			}
		}
		for _, n := range []int64{size - 1, size} {
			if c, ok := bodyClass(n); !ok || c != i {
				t.Errorf("bodyClass(%d) = %d, %v; want %d, true", n, c, ok, i)
			}
		}
		if i+1 < len(want) {
			if c, ok := bodyClass(size + 1); !ok || c != i+1 {
				t.Errorf("bodyClass(%d) = %d, %v; want %d, true", size+1, c, ok, i+1)
			}
		}
		if i > 0 {
			// The largest waste is for a body one byte over the class below.
			if n := want[i-1] + 1; 4*(size-n) >= n {
				t.Errorf("a body of %d bytes takes %d: a quarter of it or more unused", n, size)
			}
		}
	}
}

// sameArray reports whether two non-empty-capacity slices start at the same element.
func sameArray(a, b []byte) bool { return &a[:1][0] == &b[:1][0] }

func TestRecycleBody(t *testing.T) {
	t.Run("a buffer of a class size is reused", func(t *testing.T) {
		b := append(getBody(100<<10), "body"...)
		RecycleBody(b)
		got := getBody(97 << 10)
		if !sameArray(got, b) {
			t.Fatal("a recycled buffer did not come back")
		}
		if len(got) != 0 || cap(got) != 112<<10 {
			t.Fatalf("reused buffer has len %d cap %d, want 0 and %d", len(got), cap(got), 112<<10)
		}
	})
	t.Run("the pool keeps at most maxPooledBodyBytes", func(t *testing.T) {
		ReleasePooledBodies() // start from an empty pool, whatever earlier tests gave back
		const size = 1 << 20
		var given [][]byte
		for range 2 * maxPooledBodyBytes / size {
			given = append(given, getBody(size))
		}
		for _, b := range given {
			RecycleBody(b)
		}
		bodyPool.mu.Lock()
		pooled := bodyPool.bytes
		bodyPool.mu.Unlock()
		if pooled > maxPooledBodyBytes {
			t.Fatalf("pool holds %d bytes, more than %d", pooled, maxPooledBodyBytes)
		}
		reused := 0
		for range given {
			b := getBody(size)
			for _, g := range given {
				if sameArray(b, g) {
					reused++
				}
			}
		}
		if want := int(maxPooledBodyBytes / size); reused != want {
			t.Errorf("%d buffers came back, want the %d the pool has room for", reused, want)
		}
	})
	t.Run("buffers given back long ago make room for a new one", func(t *testing.T) {
		ReleasePooledBodies()
		const small = 256 << 10
		var smalls [][]byte
		for range maxPooledBodyBytes / small {
			smalls = append(smalls, getBody(small))
		}
		for _, b := range smalls {
			RecycleBody(b)
		}
		big := getBody(1 << 20)
		RecycleBody(big)
		if got := getBody(1 << 20); !sameArray(got, big) {
			t.Error("a full pool of 256 KiB buffers refused a 1 MiB one")
		}
		if n := ReleasePooledBodies(); n != maxPooledBodyBytes-1<<20 {
			t.Errorf("pool held %d bytes, want the %d of the 256 KiB buffers that stayed", n, maxPooledBodyBytes-1<<20)
		}
		if n := ReleasePooledBodies(); n != 0 {
			t.Errorf("pool holds %d bytes after being emptied", n)
		}
	})
	t.Run("other buffers are ignored", func(t *testing.T) {
		class := getBody(64 << 10)
		for _, b := range [][]byte{
			nil,
			make([]byte, 10),
			make([]byte, 0, 64<<10-1),
			make([]byte, 0, 64<<10+1),
			make([]byte, 0, 72<<10),  // between 64 and 80 KiB
			make([]byte, 0, 88<<10),  // between 80 and 96 KiB
			make([]byte, 0, 136<<10), // between 128 and 160 KiB
			make([]byte, 0, 32<<20+8<<20),
			class[1:1], // a subslice of a class buffer: its capacity is one short
		} {
			RecycleBody(b)
		}
		for _, n := range []int64{64 << 10, 80 << 10, 96 << 10, 128 << 10, 160 << 10} {
			for range 20 {
				got := getBody(n)
				if len(got) != 0 || int64(cap(got)) != n {
					t.Fatalf("getBody(%d) returned len %d cap %d after recycling odd buffers", n, len(got), cap(got))
				}
			}
		}
	})
}

func TestBoundedCopyBuffers(t *testing.T) {
	t.Run("a known size takes its class and hands the buffer over", func(t *testing.T) {
		c := newBoundedCopy(1<<20, 100<<10, nil)
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
	t.Run("an empty body lets go of the buffer", func(t *testing.T) {
		c := newBoundedCopy(1<<20, 100<<10, nil)
		if got, err := c.take(); got != nil || err != nil || c.buf != nil {
			t.Errorf("take() = %v, %v (buffer held: %v); want nil, nil, none", got, err, c.buf != nil)
		}
	})
}

// recyclingObserver holds each request body until its response is done, while other exchanges
// copy theirs, then checks both bodies against what the client sent and gives them back to the
// pools, as the pipeline does once it has decoded them.
type recyclingObserver struct {
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
		RecycleBody(b.body)
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
	obs := &recyclingObserver{requests: map[uint64][]byte{}, done: make(chan struct{}, 256)}
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	})))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(up, obs)
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
