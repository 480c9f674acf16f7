package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// apiError is the Anthropic error shape the proxy answers with.
type apiError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAPIError(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}

// rawRoundTrip writes raw to the proxy on a fresh connection and returns the response.
func rawRoundTrip(t *testing.T, proxyURL, raw string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return res, readAll(t, res.Body)
}

// TestNoOpenProxy checks that no request can steer the proxy to another host: an absolute-form
// request URI, a Host header naming another host, and CONNECT all stay with (or are refused
// before) the configured upstream.
func TestNoOpenProxy(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	otherHost := strings.TrimPrefix(other.URL, "http://")

	var gotHost, gotURI atomic.Value
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost.Store(r.Host)
		gotURI.Store(r.RequestURI)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	upstreamHost := ""
	body := `{"model":"m","messages":[]}`
	tests := []struct {
		name string
		raw  string
	}{
		{"absolute-form URI", fmt.Sprintf("POST http://%s/v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", otherHost, otherHost, len(body), body)},
		{"foreign Host header", fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", otherHost, len(body), body)},
		{"X-Forwarded-Host", fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-Host: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", otherHost, len(body), body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, b := rawRoundTrip(t, h.proxyURL, tt.raw)
			if res.StatusCode != http.StatusOK || string(b) != `{"ok":true}` {
				t.Fatalf("status %d body %q, want the upstream's answer", res.StatusCode, b)
			}
			if upstreamHost == "" {
				upstreamHost = gotHost.Load().(string)
			}
			if got := gotHost.Load().(string); got == otherHost || got != upstreamHost {
				t.Errorf("upstream saw Host %q, want its own %q", got, upstreamHost)
			}
			if uri := gotURI.Load().(string); uri != "/v1/messages" {
				t.Errorf("upstream saw request URI %q, want /v1/messages", uri)
			}
			h.rec.next(t)
		})
	}
	t.Run("CONNECT", func(t *testing.T) {
		res, b := rawRoundTrip(t, h.proxyURL, fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", otherHost, otherHost))
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("CONNECT answered %d %q, want 405", res.StatusCode, b)
		}
		if e := decodeAPIError(t, b); e.Type != "error" || e.Error.Type != "not_found_error" && e.Error.Type != "invalid_request_error" {
			t.Errorf("CONNECT error body %q", b)
		}
	})
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host got %d requests through the proxy", n)
	}
}

// TestUpstreamTLSVerified checks that the default transport verifies the upstream's certificate:
// an untrusted one gives the client a clean 502, and a transport that trusts it works.
func TestUpstreamTLSVerified(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	post := func(t *testing.T, h *harness) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("X-Api-Key", secretMarker)
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res, readAll(t, res.Body)
	}

	t.Run("untrusted", func(t *testing.T) {
		h := newHarnessTo(t, u)
		res, b := post(t, h)
		if res.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d body %q, want 502", res.StatusCode, b)
		}
		if e := decodeAPIError(t, b); e.Error.Type != "proxy_error" || !strings.Contains(e.Error.Message, "certificate") {
			t.Errorf("502 body %q does not say the certificate is the problem", b)
		}
		rec := h.rec.next(t)
		if rec.resp.Status != 0 || !strings.Contains(rec.resp.Err, "certificate") {
			t.Errorf("observed response %+v", *rec.resp)
		}
	})
	t.Run("trusted CA", func(t *testing.T) {
		tr := up.Client().Transport.(*http.Transport).Clone()
		tr.DisableCompression = true
		defer tr.CloseIdleConnections()
		h := newHarnessTo(t, u, WithTransport(tr))
		res, b := post(t, h)
		if res.StatusCode != http.StatusOK || string(b) != `{"ok":true}` {
			t.Fatalf("status %d body %q, want the upstream's answer", res.StatusCode, b)
		}
		h.rec.next(t)
	})
}

// TestMaxRequestBody checks the request size limit: a body over it is answered 413 in the
// Anthropic error shape without reaching the upstream, whether its length is declared or not;
// a body at the limit passes; and the exchange is still reported.
func TestMaxRequestBody(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	const limit = 1000
	var upstreamCalls atomic.Int32
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"read":%d}`, n)
	}), WithMaxRequestBody(limit))

	tests := []struct {
		name     string
		size     int
		chunked  bool
		wantCode int
	}{
		{"at the limit", limit, false, http.StatusOK},
		{"at the limit, chunked", limit, true, http.StatusOK},
		{"declared over", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"chunked over", 50 * limit, true, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := upstreamCalls.Load()
			var body io.Reader = strings.NewReader(strings.Repeat("x", tt.size))
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages", body)
			req.Header.Set("X-Api-Key", secretMarker)
			res, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := readAll(t, res.Body)
			if res.StatusCode != tt.wantCode {
				t.Fatalf("status %d body %q, want %d", res.StatusCode, b, tt.wantCode)
			}
			rec := h.rec.next(t)
			if tt.wantCode == http.StatusOK {
				if string(b) != fmt.Sprintf(`{"read":%d}`, tt.size) {
					t.Errorf("upstream answered %q", b)
				}
				return
			}
			e := decodeAPIError(t, b)
			if e.Type != "error" || e.Error.Type != "request_too_large" || !strings.Contains(e.Error.Message, "1000 bytes") {
				t.Errorf("413 body %q", b)
			}
			if !tt.chunked && upstreamCalls.Load() != before {
				t.Error("a body declared over the limit reached the upstream")
			}
			if rec.resp.Status != http.StatusRequestEntityTooLarge || rec.resp.ErrorType != "request_too_large" || rec.req.ParseError == "" {
				t.Errorf("observed request %+v response %+v", *rec.req, *rec.resp)
			}
		})
	}
	// The proxy keeps serving.
	res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, res.Body); res.StatusCode != http.StatusOK {
		t.Errorf("after the rejections: status %d %q", res.StatusCode, b)
	}
	h.rec.next(t)
}
