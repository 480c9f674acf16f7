package proxy

import (
	"net/http"
	"strings"
	"testing"
)

// The rate-limit headers of an answer reach the Observer as sent, and the client gets them too.
func TestRateLimitHeadersObserved(t *testing.T) {
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Anthropic-Ratelimit-Unified-5h-Utilization", "0.42")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "49")
		w.Header().Set("Retry-After", "3")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"limit"}}`))
	}))
	resp, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp.Body)
	if resp.Header.Get("Anthropic-Ratelimit-Unified-5h-Utilization") != "0.42" {
		t.Error("the client did not get the rate-limit headers")
	}
	rec := h.rec.next(t)
	got := rec.resp.RateLimitHeader
	if len(got) != 3 || got.Get("Anthropic-Ratelimit-Requests-Remaining") != "49" || got.Get("Retry-After") != "3" {
		t.Errorf("observed rate-limit headers %v", got)
	}
}
