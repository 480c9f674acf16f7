package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
)

// The rate-limit headers the proxy copies reach the tracker's spans decoded.
func TestRateLimitDecoded(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Anthropic-Ratelimit-Unified-Status", "allowed")
		w.Header().Set("Anthropic-Ratelimit-Unified-5h-Utilization", "0.25")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	defer upstream.Close()
	rec := &spans{}
	pipe := pipeline.New(instrument.New(rec), pipeline.WithTickInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-pipe.Done() }()
	go pipe.Run(ctx)
	u, _ := url.Parse(upstream.URL)
	p, err := proxy.New(u, pipe)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/messages",
		strings.NewReader(`{"model":"claude-opus-5-5","max_tokens":10,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Claude-Code-Session-Id", "s-ratelimit")
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec.waitChat(t, 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, sp := range rec.ended {
		if sp.Chat == nil {
			continue
		}
		rl := sp.Chat.Response.RateLimit
		if w, ok := rl.Window("5h"); rl == nil || rl.Status != "allowed" || !ok || w.Utilization != 0.25 {
			t.Errorf("chat span's rate limit %+v", rl)
		}
	}
}
