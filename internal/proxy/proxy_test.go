package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

// onlyReader hides Len and friends, so that the client sends the body chunked.
type onlyReader struct{ io.Reader }

// received is what the fake upstream saw of a request.
type received struct {
	method     string
	requestURI string
	host       string
	header     http.Header
	length     int64 // Content-Length, -1 when chunked
	body       []byte
	err        error
}

func TestForwardsBytesUnchanged(t *testing.T) {
	jsonBody := []byte(`{"model":"claude-sonnet-4-6","max_tokens":1024,"stream":false,"messages":[{"role":"user","content":"héllo \u2028"}]}`)
	jsonAnswer := []byte(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`)
	tests := []struct {
		name        string
		method      string
		basePath    string // upstream URL path
		target      string // path and query the client asks for
		wantURI     string // what the upstream must see
		body        []byte
		chunkedReq  bool
		answer      []byte
		chunkedResp bool
		endpoint    wire.Endpoint
	}{
		{name: "GET probe with query", method: http.MethodGet, target: "/v1/models?limit=2&after_id=a%20b&x=%2F", wantURI: "/v1/models?limit=2&after_id=a%20b&x=%2F", answer: []byte(`{"data":[]}`)},
		{name: "POST messages JSON", method: http.MethodPost, target: "/v1/messages?beta=true", wantURI: "/v1/messages?beta=true", body: jsonBody, answer: jsonAnswer, endpoint: wire.EndpointMessages},
		{name: "POST under upstream base path", method: http.MethodPost, basePath: "/anthropic", target: "/v1/messages/count_tokens", wantURI: "/anthropic/v1/messages/count_tokens", body: jsonBody, answer: []byte(`{"input_tokens":42}`), endpoint: wire.EndpointCountTokens},
		{name: "large binary content-length", method: http.MethodPost, target: "/upload", wantURI: "/upload", body: randomBytes(1, 3<<20+7), answer: randomBytes(2, 2<<20+3)},
		{name: "large binary chunked both ways", method: http.MethodPost, target: "/upload?chunked=1", wantURI: "/upload?chunked=1", body: randomBytes(3, 1<<20+11), chunkedReq: true, answer: randomBytes(4, 1<<20+13), chunkedResp: true},
		{name: "PUT", method: http.MethodPut, target: "/v1/things/1", wantURI: "/v1/things/1", body: []byte("put body"), answer: []byte("put answer")},
		{name: "PATCH", method: http.MethodPatch, target: "/v1/things/1", wantURI: "/v1/things/1", body: []byte(`{"a":1}`), answer: []byte(`{"a":2}`)},
		{name: "DELETE", method: http.MethodDelete, target: "/v1/things/1?force=true", wantURI: "/v1/things/1?force=true", answer: []byte(`{"deleted":true}`)},
		{name: "OPTIONS", method: http.MethodOptions, target: "/v1/messages", wantURI: "/v1/messages"},
		{name: "HEAD", method: http.MethodHead, target: "/v1/models", wantURI: "/v1/models"},
		{name: "empty chunked request", method: http.MethodPost, target: "/v1/messages", wantURI: "/v1/messages", chunkedReq: true, answer: []byte("{}"), endpoint: wire.EndpointMessages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan received, 1)
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				got <- received{method: r.Method, requestURI: r.RequestURI, host: r.Host, header: r.Header.Clone(), length: r.ContentLength, body: body, err: err}
				w.Header().Set("Request-Id", "req_011CTestRequestId")
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Header().Set("Connection", "X-Resp-Hop")
				w.Header().Set("X-Resp-Hop", "must not reach the client")
				w.Header().Set("X-Upstream", "kept")
				if !tt.chunkedResp {
					w.Header().Set("Content-Length", fmt.Sprint(len(tt.answer)))
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write(tt.answer)
					return
				}
				w.WriteHeader(http.StatusCreated)
				for rest := tt.answer; len(rest) > 0; {
					part := rest[:min(len(rest), 100<<10)]
					rest = rest[len(part):]
					_, _ = w.Write(part)
					_ = http.NewResponseController(w).Flush()
				}
			})
			up := startUpstream(t, upstream)
			base, err := url.Parse(up + tt.basePath)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarnessTo(t, base)

			var body io.Reader
			if tt.body != nil {
				body = bytes.NewReader(tt.body)
			}
			if tt.chunkedReq {
				body = onlyReader{bytes.NewReader(tt.body)}
			}
			req, err := http.NewRequest(tt.method, h.proxyURL+tt.target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", "sk-ant-api03-"+secretMarker)
			req.Header.Set("Authorization", "Bearer "+secretMarker)
			req.Header.Set("Cookie", "session="+secretMarker)
			req.Header.Set("Proxy-Authorization", "Basic "+secretMarker)
			req.Header.Set("Connection", "X-Hop")
			req.Header.Set("X-Hop", "must not reach the upstream")
			req.Header.Set("Keep-Alive", "timeout=5")
			req.Header.Set("X-Forwarded-For", "10.9.8.7")
			req.Header.Set("X-Claude-Code-Session-Id", "4b9c2b1e-session")
			req.Header.Set("Anthropic-Beta", "claude-code-20250219, interleaved-thinking-2025-05-14")
			req.Header.Set("User-Agent", "claude-cli/2.1.328 (external, cli)")

			res, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer := readAll(t, res.Body)

			// What the upstream saw.
			var up1 received
			select {
			case up1 = <-got:
			case <-time.After(waitTimeout):
				t.Fatal("the upstream got no request")
			}
			if up1.err != nil {
				t.Fatalf("upstream reading the body: %v", up1.err)
			}
			if up1.method != tt.method || up1.requestURI != tt.wantURI {
				t.Errorf("upstream got %s %s, want %s %s", up1.method, up1.requestURI, tt.method, tt.wantURI)
			}
			if up1.host != base.Host {
				t.Errorf("upstream Host = %q, want %q", up1.host, base.Host)
			}
			wantLength := int64(len(tt.body))
			if tt.chunkedReq {
				wantLength = -1
			}
			if up1.length != wantLength {
				t.Errorf("upstream Content-Length %d, want %d", up1.length, wantLength)
			}
			if !bytes.Equal(up1.body, tt.body) {
				t.Errorf("upstream got a %d-byte body that differs from the %d bytes sent", len(up1.body), len(tt.body))
			}
			for name, want := range map[string]string{
				"X-Api-Key":                "sk-ant-api03-" + secretMarker,
				"Authorization":            "Bearer " + secretMarker,
				"Cookie":                   "session=" + secretMarker,
				"X-Claude-Code-Session-Id": "4b9c2b1e-session",
				"Anthropic-Beta":           "claude-code-20250219, interleaved-thinking-2025-05-14",
				"User-Agent":               "claude-cli/2.1.328 (external, cli)",
			} {
				if got := up1.header.Get(name); got != want {
					t.Errorf("upstream header %s = %q, want %q", name, got, want)
				}
			}
			for _, name := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "Accept-Encoding"} {
				if v, ok := up1.header[name]; ok {
					t.Errorf("upstream got header %s: %q, want none", name, v)
				}
			}

			// What the client got.
			if res.StatusCode != http.StatusCreated {
				t.Errorf("status %d, want 201", res.StatusCode)
			}
			wantAnswer := tt.answer
			if tt.method == http.MethodHead {
				wantAnswer = nil
			}
			if !bytes.Equal(answer, wantAnswer) {
				t.Errorf("client got a %d-byte body that differs from the %d bytes the upstream sent", len(answer), len(wantAnswer))
			}
			if v := res.Header.Get("X-Resp-Hop"); v != "" {
				t.Errorf("client got hop-by-hop header X-Resp-Hop: %q", v)
			}
			if v := res.Header.Get("X-Upstream"); v != "kept" {
				t.Errorf("client header X-Upstream = %q, want kept", v)
			}

			// What the Observer got.
			rec := h.rec.next(t)
			if rec.req == nil {
				t.Fatal("RequestRead was not called")
			}
			wantPath, _, _ := strings.Cut(tt.target, "?")
			if rec.req.Method != tt.method || rec.req.Path != wantPath || rec.req.Endpoint != tt.endpoint {
				t.Errorf("observed request %s %s (%v), want %s %s (%v)", rec.req.Method, rec.req.Path, rec.req.Endpoint, tt.method, wantPath, tt.endpoint)
			}
			if rec.req.Headers.SessionID != "4b9c2b1e-session" {
				t.Errorf("observed session id %q", rec.req.Headers.SessionID)
			}
			if rec.req.BodySize != int64(len(tt.body)) || !bytes.Equal(rec.reqBody, tt.body) || rec.req.ParseError != "" {
				t.Errorf("observed request body: %d bytes (size %d, parse error %q), want the %d bytes sent",
					len(rec.reqBody), rec.req.BodySize, rec.req.ParseError, len(tt.body))
			}
			if rec.req.Body != nil {
				t.Error("the proxy decoded the request body; that is the Observer's job")
			}
			resp := rec.resp
			if resp.Status != http.StatusCreated || resp.RequestID != "req_011CTestRequestId" || resp.Streamed || resp.Err != "" || resp.Canceled {
				t.Errorf("observed response %+v", *resp)
			}
			if resp.ExchangeID != rec.req.ExchangeID || resp.ExchangeID == 0 {
				t.Errorf("exchange ids: request %d, response %d", rec.req.ExchangeID, resp.ExchangeID)
			}
			if resp.BodySize != int64(len(wantAnswer)) || !bytes.Equal(rec.respBody, wantAnswer) || resp.ParseError != "" {
				t.Errorf("observed response body: %d bytes (size %d, parse error %q), want %d", len(rec.respBody), resp.BodySize, resp.ParseError, len(wantAnswer))
			}
			if rec.req.Time.IsZero() || resp.HeaderTime.Before(rec.req.Time) || resp.End.Before(resp.HeaderTime) {
				t.Errorf("times out of order: request %v, headers %v, end %v", rec.req.Time, resp.HeaderTime, resp.End)
			}
		})
	}
}

func TestGzipPassesThroughUntouched(t *testing.T) {
	const acceptEncoding = "gzip, deflate, br, zstd"
	sse, err := readTestdata("tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		contentType string
		plain       []byte
	}{
		{name: "JSON message", contentType: "application/json", plain: []byte(`{"id":"msg_01","type":"message","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)},
		{name: "event stream", contentType: "text/event-stream; charset=utf-8", plain: sse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zipped := bytes.NewBuffer(gzipBytes(t, tt.plain))
			gotAE := make(chan string, 1)
			h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAE <- r.Header.Get("Accept-Encoding")
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = w.Write(zipped.Bytes())
			}))
			reqBody := gzipBytes(t, []byte(`{"model":"claude-sonnet-4-6","stream":true}`))
			req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages", bytes.NewReader(reqBody))
			req.Header.Set("Content-Encoding", "gzip")
			req.Header.Set("Accept-Encoding", acceptEncoding)
			res, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res.Body)
			if ae := <-gotAE; ae != acceptEncoding {
				t.Errorf("upstream Accept-Encoding = %q, want %q", ae, acceptEncoding)
			}
			if ce := res.Header.Get("Content-Encoding"); ce != "gzip" {
				t.Errorf("client Content-Encoding = %q, want gzip", ce)
			}
			if !bytes.Equal(body, zipped.Bytes()) {
				t.Errorf("client got %d bytes, want the %d compressed bytes the upstream sent", len(body), zipped.Len())
			}
			rec := h.rec.next(t)
			if rec.req.ContentEncoding != "gzip" || !bytes.Equal(rec.reqBody, reqBody) {
				t.Errorf("observed request encoding %q with %d bytes, want gzip and the %d compressed bytes sent",
					rec.req.ContentEncoding, len(rec.reqBody), len(reqBody))
			}
			if !bytes.Equal(rec.respBody, zipped.Bytes()) {
				t.Errorf("observer got %d bytes, want the %d compressed bytes", len(rec.respBody), zipped.Len())
			}
			if rec.resp.ContentEncoding != "gzip" || rec.resp.ContentType != tt.contentType || rec.resp.BodySize != int64(zipped.Len()) {
				t.Errorf("observed response %+v", *rec.resp)
			}
			if wantStreamed := strings.HasPrefix(tt.contentType, "text/event-stream"); rec.resp.Streamed != wantStreamed {
				t.Errorf("Streamed = %v, want %v", rec.resp.Streamed, wantStreamed)
			}
		})
	}
}

// gzipBytes compresses b.
func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUpstreamDown(t *testing.T) {
	h := newHarnessTo(t, deadUpstream(t))

	reqBody := `{"model":"claude-sonnet-4-6","messages":[]}`
	req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages?beta=true", strings.NewReader(reqBody))
	req.Header.Set("X-Api-Key", secretMarker)
	start := time.Now()
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res.Body)
	if took := time.Since(start); took > waitTimeout {
		t.Errorf("the 502 took %v: an unreachable upstream must be answered at once, not waited for", took)
	}
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", res.StatusCode)
	}
	var apiErr struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &apiErr); err != nil {
		t.Fatalf("502 body %q: %v", body, err)
	}
	if apiErr.Type != "error" || apiErr.Error.Type != "proxy_error" || !strings.HasPrefix(apiErr.Error.Message, "cctrace: upstream unreachable: ") {
		t.Errorf("502 body %q", body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("502 Content-Type %q", ct)
	}

	rec := h.rec.next(t)
	if rec.req == nil || string(rec.reqBody) != reqBody || rec.req.ParseError != "" {
		t.Errorf("observed request body %q (parse error %q), want %q", rec.reqBody, rec.req.ParseError, reqBody)
	}
	if rec.resp.Status != 0 || !strings.HasPrefix(rec.resp.Err, "upstream: ") || rec.resp.Canceled || rec.resp.BodySize != 0 {
		t.Errorf("observed response %+v", *rec.resp)
	}
}

func TestParseLimit(t *testing.T) {
	const limit = 1024
	tests := []struct {
		name       string
		size       int
		chunked    bool
		wantCopies bool
	}{
		{name: "at the limit", size: limit, wantCopies: true},
		{name: "over the limit, content-length", size: 10 * limit},
		{name: "over the limit, chunked", size: 10 * limit, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := randomBytes(uint64(tt.size), tt.size)
			h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Echo, reading first: an HTTP/1 server cannot read a body after answering.
				body, _ := io.ReadAll(r.Body)
				_, _ = w.Write(body)
			}), WithParseLimit(limit))
			var body io.Reader = bytes.NewReader(payload)
			if tt.chunked {
				body = onlyReader{body}
			}
			res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/octet-stream", body)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, res.Body); !bytes.Equal(got, payload) {
				t.Fatalf("echo came back with %d bytes that differ from the %d sent", len(got), len(payload))
			}
			rec := h.rec.next(t)
			if rec.req.BodySize != int64(tt.size) || rec.resp.BodySize != int64(tt.size) {
				t.Errorf("sizes: request %d, response %d, want %d", rec.req.BodySize, rec.resp.BodySize, tt.size)
			}
			if tt.wantCopies {
				if !bytes.Equal(rec.reqBody, payload) || !bytes.Equal(rec.respBody, payload) || rec.req.ParseError != "" || rec.resp.ParseError != "" {
					t.Errorf("copies: request %d bytes (%q), response %d bytes (%q)", len(rec.reqBody), rec.req.ParseError, len(rec.respBody), rec.resp.ParseError)
				}
				return
			}
			if rec.reqBody != nil || !strings.Contains(rec.req.ParseError, "parse limit") {
				t.Errorf("request copy %d bytes, parse error %q; want none and a parse-limit error", len(rec.reqBody), rec.req.ParseError)
			}
			if rec.respBody != nil || !strings.Contains(rec.resp.ParseError, "parse limit") {
				t.Errorf("response copy %d bytes, parse error %q; want none and a parse-limit error", len(rec.respBody), rec.resp.ParseError)
			}
		})
	}
}

func TestConcurrentExchanges(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf(`{"n":%d}`, i)
			res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(want))
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			got, err := io.ReadAll(res.Body)
			if err != nil || string(got) != want {
				errs <- fmt.Errorf("got %q, %v; want %q", got, err, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for range n {
		h.rec.next(t)
	}
	seen := map[uint64]bool{}
	for _, rec := range h.rec.all() {
		if seen[rec.req.ExchangeID] {
			t.Errorf("exchange id %d used twice", rec.req.ExchangeID)
		}
		seen[rec.req.ExchangeID] = true
		if !bytes.Equal(rec.reqBody, rec.respBody) {
			t.Errorf("exchange %d: request copy %q, response copy %q", rec.req.ExchangeID, rec.reqBody, rec.respBody)
		}
	}
	if len(seen) != n {
		t.Errorf("%d exchanges observed, want %d", len(seen), n)
	}
}

func TestNewRejects(t *testing.T) {
	rec := newRecorder()
	tests := []struct {
		name     string
		upstream *url.URL
		obs      Observer
	}{
		{name: "no upstream", obs: rec},
		{name: "relative upstream", upstream: &url.URL{Path: "/v1"}, obs: rec},
		{name: "not http", upstream: &url.URL{Scheme: "ftp", Host: "example.com"}, obs: rec},
		{name: "no host", upstream: &url.URL{Scheme: "https"}, obs: rec},
		{name: "no observer", upstream: &url.URL{Scheme: "https", Host: "api.anthropic.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := New(tt.upstream, tt.obs); err == nil {
				t.Errorf("New returned %v and no error", p)
			}
		})
	}
}

// TestInformationalResponse has the upstream send 103 Early Hints before its answer.
func TestInformationalResponse(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	var hints []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		hints = append(hints, code)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, h.proxyURL+"/v1/models", nil)
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res.Body)
	if res.StatusCode != http.StatusOK || string(body) != `{"ok":true}` || len(hints) != 1 || hints[0] != http.StatusEarlyHints {
		t.Errorf("client got %d %q after informational responses %v", res.StatusCode, body, hints)
	}
	rec := h.rec.next(t)
	if rec.resp.Status != http.StatusOK || string(rec.respBody) != `{"ok":true}` {
		t.Errorf("observed %+v with body %q", *rec.resp, rec.respBody)
	}
}
