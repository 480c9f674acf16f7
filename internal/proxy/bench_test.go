package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

// discard is an Observer that drops everything.
type discard struct{}

func (discard) RequestRead(*wire.Request, []byte)   {}
func (discard) ResponseDone(*wire.Response, []byte) {}

// BenchmarkProxySSE streams testdata/tool_use.sse, one flush per event, through a bare
// httputil.ReverseProxy and through cctrace's proxy, to show what the taps cost.
func BenchmarkProxySSE(b *testing.B) {
	sse, err := readTestdata("tool_use.sse")
	if err != nil {
		b.Fatal(err)
	}
	events := strings.SplitAfter(string(sse), "\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			_ = rc.Flush()
		}
	}))
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}

	cctrace, err := New(target, discard{})
	if err != nil {
		b.Fatal(err)
	}
	defer cctrace.cfg.transport.(*http.Transport).CloseIdleConnections()
	bareTransport := defaultTransport()
	defer bareTransport.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     bareTransport,
		FlushInterval: -1,
	}
	// As bench.NewBareProxy does, the bare proxy's request bodies end at their Content-Length.
	// Without that the transport reads once more after the body to see its EOF, finds the body
	// closed by the server once the response headers went out, and drops the upstream connection
	// mid-stream: the benchmark then failed now and then with "unexpected EOF".
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 0 {
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.LimitReader(r.Body, r.ContentLength), r.Body}
		}
		rp.ServeHTTP(w, r)
	})

	const reqBody = `{"model":"claude-sonnet-4-6","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, bc := range []struct {
		name    string
		handler http.Handler
	}{
		{"bare", bare},
		{"cctrace", cctrace},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.handler)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer client.CloseIdleConnections()
			b.SetBytes(int64(len(sse)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := client.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(reqBody))
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if err != nil || n != int64(len(sse)) {
					b.Fatalf("read %d bytes, %v", n, err)
				}
			}
		})
	}
}
