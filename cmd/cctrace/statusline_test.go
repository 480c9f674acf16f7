package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/summary"
)

// statusInputJSON is what Claude Code passes a status line command, trimmed to a few fields.
const statusInputJSON = `{"session_id":"0b8f3c1e-aaaa","transcript_path":"/tmp/t.jsonl","cwd":"/work",
"model":{"id":"claude-opus-5-5","display_name":"Opus"},
"context_window":{"total_input_tokens":5000,"context_window_size":1000000,"used_percentage":1}}`

func TestStatusline(t *testing.T) {
	status := summary.SessionStatus{
		SessionID: "0b8f3c1e-aaaa",
		Turn: &summary.TurnStatus{Index: 3, Running: true, Duration: 12.4, Requests: 5, ToolCalls: 7,
			Tokens: wire.Usage{InputTokens: 200, OutputTokens: 1200, CacheReadInputTokens: 45000, CacheCreationInputTokens: 3000}, Cost: 0.0123},
		Context: &summary.Context{Tokens: 48_200, Window: 200_000, Model: "claude-opus-5-5"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sessions/{id}/status", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "0b8f3c1e-aaaa":
			_ = json.NewEncoder(w).Encode(status)
		case "limited":
			st := status
			st.Limit = &limits.Window{Name: "5h", Utilization: 0.42}
			_ = json.NewEncoder(w).Encode(st)
		case "no-turn":
			_ = json.NewEncoder(w).Encode(summary.SessionStatus{SessionID: "no-turn"})
		case "slow":
			// Never answers: the status line must give up on its own.
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	closed := httptest.NewServer(mux)
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	tests := []struct {
		name  string
		url   string
		stdin string
		want  string
	}{
		{"running turn, Claude Code's window", srv.URL, statusInputJSON,
			"cctrace turn 3 · 12.4s · 5 req · 7 tools · input 48.2k · output 1.2k · hit 93% · $0.0123 · ctx 5% of 1.0M"},
		{"cctrace's window", srv.URL + "/", `{"session_id":"0b8f3c1e-aaaa"}`,
			"cctrace turn 3 · 12.4s · 5 req · 7 tools · input 48.2k · output 1.2k · hit 93% · $0.0123 · ctx 24% of 200k"},
		{"with the account's window", srv.URL, `{"session_id":"limited"}`,
			"cctrace turn 3 · 12.4s · 5 req · 7 tools · input 48.2k · output 1.2k · hit 93% · $0.0123 · ctx 24% of 200k · 5h 42%"},
		{"session not seen", srv.URL, `{"session_id":"new-one"}`, "cctrace: no turn yet"},
		{"session without a turn", srv.URL, `{"session_id":"no-turn"}`, "cctrace: no turn yet"},
		{"no session on stdin", srv.URL, "", "cctrace: no session"},
		{"not JSON", srv.URL, "hello", "cctrace: no session"},
		{"nothing listening", closed.URL, statusInputJSON, "cctrace: not running"},
		{"not answering", "http://" + silent.Addr().String(), statusInputJSON, "cctrace: not running"},
		{"answering late", srv.URL, `{"session_id":"slow"}`, "cctrace: not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := make(chan int, 1)
			go func() {
				exit <- statusline([]string{"--url", tt.url}, strings.NewReader(tt.stdin), &stdout, &stderr)
			}()
			var code int
			select {
			case code = <-exit:
			case <-time.After(harness.Patience):
				t.Fatalf("no answer after %v: the status line waits on a cctrace that does not answer", harness.Patience)
			}
			if code != 0 || stderr.Len() != 0 {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
			}
			if got := strings.TrimSuffix(stdout.String(), "\n"); got != tt.want {
				t.Errorf("\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	// cctrace run tells the command where it is in CCTRACE_URL.
	t.Setenv("CCTRACE_URL", srv.URL)
	var stdout bytes.Buffer
	statusline(nil, strings.NewReader(statusInputJSON), &stdout, &bytes.Buffer{})
	if !strings.HasPrefix(stdout.String(), "cctrace turn 3 ") {
		t.Errorf("with CCTRACE_URL: %q", stdout.String())
	}
}

func TestStatuslineUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := statusline([]string{"--frobnicate"}, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "frobnicate") {
		t.Errorf("bad flag: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := statusline([]string{"-h"}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-url") {
		t.Errorf("-h: exit %d, stderr %q", code, stderr.String())
	}
}

func TestLimitText(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		w    limits.Window
		want string
	}{
		{limits.Window{Name: "5h", Utilization: 0.42, Reset: now.Add(5 * time.Hour)}, "5h 42% · resets 20:00"},
		{limits.Window{Name: "7d", Utilization: 0.9, Status: "allowed_warning", Reset: now.Add(72 * time.Hour)}, "7d 90% · resets Mon 15:00"},
		{limits.Window{Name: "5h", Utilization: 1, Status: "rejected", Reset: now.Add(time.Hour)}, "5h limit reached · resets 16:00"},
		{limits.Window{Name: "5h", Utilization: 0.07}, "5h 7%"},
	} {
		if got := limitText(tc.w, now, time.UTC); got != tc.want {
			t.Errorf("limitText(%+v) = %q, want %q", tc.w, got, tc.want)
		}
	}
}
