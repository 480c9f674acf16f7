package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestUnreadBodyKeepsConnectionUsable is the regression test for golang/go#68560: with full
// duplex on, an answer that leaves the client's body unread (unreachable upstream, an upstream
// answering before reading, a 413) made the HTTP/1 server start a stray background read, and the
// next request on the same kept-alive connection panicked the server, or the whole process.
func TestUnreadBodyKeepsConnectionUsable(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	dead := deadUpstream(t)

	early := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Read") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "read")
	})
	tests := []struct {
		name     string
		harness  func(t *testing.T) *harness
		wantCode int
	}{
		{"upstream unreachable", func(t *testing.T) *harness { return newHarnessTo(t, dead) }, http.StatusBadGateway},
		{"upstream answers without reading", func(t *testing.T) *harness { return newHarness(t, early) }, http.StatusUnauthorized},
		{"body over the size limit", func(t *testing.T) *harness { return newHarness(t, early, WithMaxRequestBody(10)) }, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.harness(t)
			for i := range 5 {
				for _, chunked := range []bool{true, false} {
					var body io.Reader = strings.NewReader(strings.Repeat("y", 50_000))
					if chunked {
						body = io.MultiReader(body)
					}
					req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages", body)
					req.Header.Set("X-Api-Key", secretMarker)
					res, err := h.client.Do(req)
					if err != nil {
						t.Fatalf("request %d (chunked %v): %v", i, chunked, err)
					}
					readAll(t, res.Body)
					if res.StatusCode != tt.wantCode {
						t.Fatalf("request %d (chunked %v): status %d, want %d", i, chunked, res.StatusCode, tt.wantCode)
					}
					h.rec.next(t)
				}
			}
			if strings.Contains(h.logs.String(), "panic") {
				t.Errorf("the server panicked:\n%s", h.logs.String())
			}
		})
	}
}
