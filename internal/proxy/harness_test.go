package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/instrument/wire"
	testharness "github.com/cctrace/cctrace/internal/testkit/harness"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// secretMarker is put in every credential header the tests send; it must never show up in what
// the Observer receives or in the logs.
const secretMarker = "SECRETMARKER7f3a"

// waitTimeout bounds every wait in these tests: generous, so that a loaded machine never fails
// a test that only waits for something to happen.
const waitTimeout = testharness.Patience

// exchangeRecord is what the Observer received for one exchange.
type exchangeRecord struct {
	req      *wire.Request
	reqBody  []byte
	resp     *wire.Response
	respBody []byte
}

// decoded returns the response decoded from its body copy, as the pipeline decodes it.
func (rec *exchangeRecord) decoded() *wire.Response {
	resp := *rec.resp
	if rec.respBody != nil {
		wire.DecodeResponse(&resp, rec.req.Endpoint, rec.respBody)
	}
	return &resp
}

// recorder is an Observer that keeps everything and checks the call order contract.
type recorder struct {
	mu         sync.Mutex
	byID       map[uint64]*exchangeRecord
	violations []string
	done       chan uint64
}

var _ Observer = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{byID: map[uint64]*exchangeRecord{}, done: make(chan uint64, 256)}
}

func (r *recorder) RequestRead(req *wire.Request, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[req.ExchangeID]; ok {
		r.violations = append(r.violations, fmt.Sprintf("exchange %d: RequestRead after another call", req.ExchangeID))
		return
	}
	r.byID[req.ExchangeID] = &exchangeRecord{req: req, reqBody: body}
}

func (r *recorder) ResponseDone(resp *wire.Response, body []byte) {
	r.mu.Lock()
	rec, ok := r.byID[resp.ExchangeID]
	switch {
	case !ok:
		r.violations = append(r.violations, fmt.Sprintf("exchange %d: ResponseDone before RequestRead", resp.ExchangeID))
		rec = &exchangeRecord{}
		r.byID[resp.ExchangeID] = rec
	case rec.resp != nil:
		r.violations = append(r.violations, fmt.Sprintf("exchange %d: ResponseDone twice", resp.ExchangeID))
	}
	rec.resp, rec.respBody = resp, body
	r.mu.Unlock()
	r.done <- resp.ExchangeID
}

// next waits for the next ResponseDone and returns that exchange.
func (r *recorder) next(t *testing.T) *exchangeRecord {
	t.Helper()
	select {
	case id := <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.byID[id]
	case <-time.After(waitTimeout):
		t.Fatal("ResponseDone was not called")
		return nil
	}
}

// all returns every exchange seen so far.
func (r *recorder) all() []*exchangeRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*exchangeRecord, 0, len(r.byID))
	for _, rec := range r.byID {
		out = append(out, rec)
	}
	return out
}

// check fails the test on any contract violation or any credential in what was observed.
func (r *recorder) check(t *testing.T, logs string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Error(v)
	}
	for id, rec := range r.byID {
		if dump := dumpRecord(rec); strings.Contains(dump, secretMarker) {
			t.Errorf("exchange %d: a credential reached the Observer: %s", id, dump)
		}
		if bytes.Contains(rec.reqBody, []byte(secretMarker)) || bytes.Contains(rec.respBody, []byte(secretMarker)) {
			t.Errorf("exchange %d: a credential reached the Observer in a body copy", id)
		}
	}
	if strings.Contains(logs, secretMarker) {
		t.Errorf("a credential reached the logs:\n%s", logs)
	}
}

// dumpRecord prints everything an Observer received but the body copies, following pointers.
func dumpRecord(rec *exchangeRecord) string {
	var b strings.Builder
	if rec.req != nil {
		fmt.Fprintf(&b, "%+v\n", *rec.req)
		if rec.req.Body != nil {
			fmt.Fprintf(&b, "%+v\n", *rec.req.Body)
		}
	}
	if rec.resp != nil {
		fmt.Fprintf(&b, "%+v\n", *rec.resp)
		if rec.resp.Message != nil {
			fmt.Fprintf(&b, "%+v\n", *rec.resp.Message)
		}
	}
	return b.String()
}

// harness is a client talking through a real Proxy, served by httptest, to an upstream.
type harness struct {
	proxy    *Proxy
	proxyURL string
	client   *http.Client
	rec      *recorder
	logs     *testharness.Buffer
}

// startUpstream starts a fake upstream, stopped when the test ends, and returns its URL.
func startUpstream(t *testing.T, h http.Handler) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up.URL
}

// deadUpstream returns an http URL on 127.0.0.1 where nothing listens (a port that was free a
// moment ago): an upstream that cannot be reached.
func deadUpstream(t *testing.T) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return &url.URL{Scheme: "http", Host: addr}
}

// newHarness starts upstream and a proxy in front of it.
func newHarness(t *testing.T, upstream http.Handler, opts ...Option) *harness {
	t.Helper()
	u, err := url.Parse(startUpstream(t, upstream))
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessTo(t, u, opts...)
}

// readTestdata reads a file under testdata/.
func readTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name))
}

// newHarnessTo starts a proxy to the given upstream URL.
func newHarnessTo(t *testing.T, upstream *url.URL, opts ...Option) *harness {
	t.Helper()
	h := &harness{rec: newRecorder(), logs: &testharness.Buffer{}}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := New(upstream, h.rec, append([]Option{WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		if c, ok := p.cfg.transport.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
		h.rec.check(t, h.logs.String())
		if t.Failed() {
			t.Logf("proxy logs:\n%s", h.logs.String())
			for _, rec := range h.rec.all() {
				t.Logf("observed:\n%s", dumpRecord(rec))
			}
		}
	})
	h.proxyURL = srv.URL
	// The test client sends exactly the headers a test sets: no Accept-Encoding of its own.
	ct := &http.Transport{DisableCompression: true}
	t.Cleanup(ct.CloseIdleConnections)
	h.client = &http.Client{Transport: ct}
	return h
}

// readAll reads and closes a response body.
func readAll(t *testing.T, rc io.ReadCloser) []byte {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	return b
}
