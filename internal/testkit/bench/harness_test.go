package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is an upstream with the in-process variants in front of it.
type fixture struct {
	up    *Upstream
	rec   *traffic.Recording
	stack *Stack
}

func newFixture(t testing.TB, events int) *fixture {
	t.Helper()
	rec, err := traffic.FindRecording()
	if err != nil {
		t.Fatal(err)
	}
	up, err := StartUpstream(traffic.NewStream(events))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	return &fixture{up: up, rec: rec}
}

// serve starts h on a test server and returns it as a variant.
func serve(t testing.TB, name string, h http.Handler) *Variant {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Variant{Name: name, URL: srv.URL}
}

func (f *fixture) upstreamURL(t testing.TB) *url.URL {
	u, err := url.Parse(f.up.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// bare returns the bare proxy as a variant, closing its idle upstream connections at cleanup.
func (f *fixture) bare(t testing.TB) *Variant {
	rp := NewBareProxy(f.upstreamURL(t)).(*bareProxy)
	v := serve(t, "bare", rp)
	t.Cleanup(rp.CloseIdleConnections)
	return v
}

// goRaw returns go-raw as a variant, closing every connection it holds at cleanup.
func (f *fixture) goRaw(t testing.TB) *Variant {
	g, err := NewGoRaw(f.up.URL())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	t.Cleanup(func() {
		_ = ln.Close()
		g.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &Variant{Name: "go-raw", URL: "http://" + ln.Addr().String()}
}

// cctrace returns cctrace assembled in process as a variant.
func (f *fixture) cctrace(t testing.TB) *Variant {
	s, err := NewStack(f.upstreamURL(t))
	if err != nil {
		t.Fatal(err)
	}
	f.stack = s
	v := serve(t, "cctrace", s.Proxy)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return v
}

// TestShortRun is the harness's short mode in process: every cell kind through direct, the bare
// proxy, go-raw and cctrace, checking that each stream and body arrived byte for byte and that cctrace's
// pipeline turned every request into a finished turn. It asserts no timings.
func TestShortRun(t *testing.T) {
	f := newFixture(t, 60)
	variants := []*Variant{Direct(f.up), f.bare(t), f.goRaw(t), f.cctrace(t)}
	cells := []Cell{
		{BodySize: 10 << 10, Concurrency: 1, Duration: 50 * time.Millisecond, MaxRequests: 5},
		{BodySize: 1 << 20, Concurrency: 4, Duration: 50 * time.Millisecond, MaxRequests: 8},
		{BodySize: 200 << 10, Concurrency: 3, Pace: time.Millisecond, Duration: time.Millisecond, MaxRequests: 3},
	}
	samples := Execute(context.Background(), f.up, f.rec, Plan{Reps: 2, Cells: cells, Variants: variants, Logf: t.Logf})
	if want := 2 * len(cells) * len(variants); len(samples) != want {
		t.Fatalf("%d samples, want %d", len(samples), want)
	}
	sent := 0 // requests cctrace forwarded, warm-ups included
	for _, s := range samples {
		if s.Failed > 0 || s.Requests == 0 {
			t.Errorf("%s %s: %d done, %d failed: %v", s.Variant, s.Cell.Name(), s.Requests, s.Failed, s.Failures)
		}
		if len(s.TTFB) != s.Requests || len(s.Total) != s.Requests {
			t.Errorf("%s %s: %d TTFB and %d total samples for %d requests", s.Variant, s.Cell.Name(), len(s.TTFB), len(s.Total), s.Requests)
		}
		if len(s.Outbound) != s.Requests || len(s.Back) != s.Requests {
			t.Errorf("%s %s: %d outbound and %d back samples for %d requests", s.Variant, s.Cell.Name(), len(s.Outbound), len(s.Back), s.Requests)
		}
		for i := range min(len(s.TTFB), len(s.Outbound), len(s.Back)) {
			// Both parts lie inside the time to first byte, one before the upstream's first
			// event and one after, on one clock.
			if s.Outbound[i] <= 0 || s.Back[i] <= 0 || s.Outbound[i]+s.Back[i] > s.TTFB[i] {
				t.Errorf("%s %s request %d: outbound %v + back %v against TTFB %v", s.Variant, s.Cell.Name(), i, s.Outbound[i], s.Back[i], s.TTFB[i])
				break
			}
		}
		if paced := s.Cell.Pace > 0; paced != (len(s.EventDelay) == s.Requests*60) {
			t.Errorf("%s %s: %d event delays for %d requests of 60 events", s.Variant, s.Cell.Name(), len(s.EventDelay), s.Requests)
		}
		if s.Variant == "cctrace" {
			sent += s.Requests + s.Cell.Concurrency
		}
	}
	if err := f.stack.Close(); err != nil {
		t.Fatal(err)
	}
	// Under load (this test runs beside others, often with -race) the pipeline may fall behind
	// and leave a body undecoded, by design; such a request cannot start a turn of its own. All
	// the others must have, and nearly all bodies must have been decoded.
	undecoded := f.stack.Undecoded()
	if got, want := f.stack.Outcomes()["end_turn/prompt"], sent-int(undecoded); got != want || undecoded > int64(sent/4) {
		t.Errorf("cctrace ended %d turns with end_turn on a prompt, want one per request with its body decoded: %d of %d (%d undecoded); outcomes %v",
			got, want, sent, undecoded, f.stack.Outcomes())
	}
	if undecoded > 0 {
		t.Logf("%d of %d request bodies not decoded (over a memory budget)", undecoded, sent)
	}
	sums := Summarise(samples)
	var table strings.Builder
	WriteTables(&table, sums, "bare")
	WriteLegs(&table, sums, "bare")
	for _, want := range []string{"| 10KB c1 unpaced | cctrace |", "| 200KB c3 paced 1ms | direct |", "| outbound p50 ms | ×bare |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("report lacks a row starting %q:\n%s", want, table.String())
		}
	}
}

// tamper is a proxy in front of next that changes one byte of the request body or of the
// response body, the breakage the harness must catch.
type tamper struct {
	next     http.Handler
	request  bool
	response bool
}

func (p tamper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.request {
		b, _ := io.ReadAll(r.Body)
		if len(b) > 100 {
			b[100] ^= 1
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	if p.response {
		w = &flipWriter{ResponseWriter: w}
	}
	p.next.ServeHTTP(w, r)
}

// flipWriter changes the 50th byte of the body.
type flipWriter struct {
	http.ResponseWriter
	n int
}

func (w *flipWriter) Write(b []byte) (int, error) {
	if i := 50 - w.n; i >= 0 && i < len(b) {
		b = bytes.Clone(b)
		b[i] ^= 1
	}
	w.n += len(b)
	return w.ResponseWriter.Write(b)
}

func (w *flipWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func TestHarnessCatchesAlteredBytes(t *testing.T) {
	f := newFixture(t, 20)
	bare := NewBareProxy(f.upstreamURL(t)).(*bareProxy)
	t.Cleanup(bare.CloseIdleConnections)
	for _, tc := range []struct {
		name string
		p    tamper
		want string
	}{
		{"request body", tamper{next: bare, request: true}, "request body changed on the way"},
		{"response body", tamper{next: bare, response: true}, "stream differs from the upstream's at or after byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := serve(t, "tamper", tc.p)
			var ids atomic.Uint64
			c := NewClient(f.up, f.rec.Body(10<<10), 1, &ids)
			defer c.Close()
			res := c.Run(context.Background(), v.URL, Cell{BodySize: 10 << 10, Concurrency: 1, MaxRequests: 1})
			if res.Failed != 1 || res.Requests != 0 {
				t.Fatalf("%d done, %d failed, want the one request to fail", res.Requests, res.Failed)
			}
			if !strings.Contains(res.Failures[0], tc.want) {
				t.Errorf("failure %q, want it to contain %q", res.Failures[0], tc.want)
			}
		})
	}
}

func TestEndAtLength(t *testing.T) {
	// The reader under it would fail if read past the length, like a closed server body.
	under := io.MultiReader(strings.NewReader("0123456789"), iotest.ErrReader(errors.New("read past the end")))
	b := &endAtLength{ReadCloser: io.NopCloser(under), left: 10}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "0123456789" {
		t.Fatalf("read %q, %v; want the 10 bytes and no error", got, err)
	}
	if n, err := b.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("read after the end = %d, %v; want 0, EOF", n, err)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {0, 1}, {10, 1}, {90, 9}} {
		if got := Percentile(ds, tc.p); got != tc.want {
			t.Errorf("Percentile(p%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

func TestProcReadings(t *testing.T) {
	pids := []int{1}
	if m, err := ReadMemory(Tree(1)[:1]); err != nil || m.RSS <= 0 || m.HWM < m.RSS {
		t.Errorf("ReadMemory(init) = %+v, %v; want positive RSS not above HWM", m, err)
	}
	if _, err := ReadCPU(pids); err != nil {
		t.Errorf("ReadCPU(init): %v", err)
	}
	if _, err := ReadMemory([]int{-1}); err == nil {
		t.Error("ReadMemory(-1) succeeded")
	}
}

// BenchmarkStack sends Claude-Code-shaped requests one at a time through the bare proxy and
// through cctrace assembled in process; the difference in allocs/op and B/op is what cctrace's
// taps, pipeline, tracker and sinks allocate per request (client and upstream allocate the same
// in both).
func BenchmarkStack(b *testing.B) {
	f := newFixture(b, 500)
	for _, size := range []int{10 << 10, 200 << 10, 1 << 20} {
		body := f.rec.Body(size)
		for _, name := range []string{"bare", "cctrace"} {
			b.Run(sizeName(size)+"/"+name, func(b *testing.B) {
				var v *Variant
				if name == "bare" {
					v = f.bare(b)
				} else {
					v = f.cctrace(b)
				}
				var ids atomic.Uint64
				c := NewClient(f.up, body, 1, &ids)
				defer c.Close()
				cell := Cell{BodySize: size, Concurrency: 1, MaxRequests: 1}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if res := c.Run(context.Background(), v.URL, cell); res.Failed > 0 {
						b.Fatal(res.Failures[0])
					}
				}
			})
		}
	}
}
