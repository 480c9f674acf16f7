package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// spanErrors returns, for every span the collector received by name, its error.type, or for a
// turn its outcome.
func (c *otlpCollector) spanErrors() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, req := range c.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					errType := ""
					for _, kv := range sp.Attributes {
						if kv.Key == "error.type" || kv.Key == "cctrace.turn.outcome" {
							errType = kv.Value.GetStringValue()
						}
					}
					out[sp.Name] = append(out[sp.Name], errType)
				}
			}
		}
	}
	return out
}

// spanStart returns the start of the first span named name the collector received.
func (c *otlpCollector) spanStart(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					if sp.Name == name {
						return time.Unix(0, int64(sp.StartTimeUnixNano)), true
					}
				}
			}
		}
	}
	return time.Time{}, false
}

// TestShutdownPastGrace sends SIGTERM while a stream that never ends is in flight: cctrace waits
// --shutdown-grace, then cuts it, ends its open spans as "shutdown", exports them, and exits 0.
// It has no state directory, where it would keep the turn for the next process instead
// (TestRestartMidTurn).
func TestShutdownPastGrace(t *testing.T) {
	col, endpoint := startOTLPCollector(t)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, messageStartEvent)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer upstream.Close()
	defer close(release)

	s := startServe(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=50"},
		"--upstream", upstream.URL, "--shutdown-grace", "1s", "--state-dir", "")
	resp, br := openStream(t, s.proxyAddr, "shutdown-past-grace")
	defer resp.Body.Close()

	begin := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(br); err == nil {
		t.Error("the stream past the grace period ended cleanly; want it cut")
	}
	s.stop(t)
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("cctrace took %v to exit with a 1s grace period", d)
	}
	spans := col.spanErrors()
	if got := spans["chat claude-sonnet-4-6"]; len(got) != 1 || got[0] != "shutdown" && got[0] != "canceled" {
		t.Errorf("chat span error types %q, want one ended by the shutdown", got)
	}
	if got := spans["invoke_agent claude-code"]; len(got) != 1 || got[0] != "shutdown" && got[0] != "interrupted" {
		t.Errorf("turn outcomes %q, want one ended by the shutdown", got)
	}
	if !strings.Contains(s.out.String(), "shutdown") {
		t.Errorf("no word of the cut stream in the output:\n%s", s.out.String())
	}
}

// TestRestartMidTurn stops cctrace (SIGTERM) while the turn's tool runs and starts another on the
// same state directory, which gets the tool's result: one root for the turn, exported by the
// second process with the turn's real start, the tool call a success, and the turn and the call
// counted once, by the process that ended them. With --replica the next is another replica,
// already running (a roll), that shares the state directory.
func TestRestartMidTurn(t *testing.T) {
	t.Run("restart", func(t *testing.T) { restartMidTurn(t, false) })
	t.Run("replica", func(t *testing.T) { restartMidTurn(t, true, "--state-dir", t.TempDir()) })
	// Replicas whose history is one PostgreSQL keep their turns in flight there, with no state
	// directory given.
	t.Run("replica-postgres", func(t *testing.T) {
		restartMidTurn(t, true, "--history", harness.StartPostgres(t).Database(t))
	})
}

// restartMidTurn stops a cctrace while a turn's tool runs, and wants the next one (a replica
// beside it, when replica is set, with the store the flags name) to end that turn as one.
func restartMidTurn(t *testing.T, replica bool, store ...string) {
	col, endpoint := startOTLPCollector(t)
	script, err := fakeapi.Scenario("tool_roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(fakeapi.New(script))
	defer upstream.Close()
	// The history store, where the turns in flight are kept, in the state directory the two
	// share (not in memory, as the other tests have it).
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=50", "XDG_STATE_HOME=" + t.TempDir(), "CCTRACE_HISTORY="}
	send := func(s *served, messages string) string {
		t.Helper()
		body := `{"model":"claude-opus-5-5","stream":true,"max_tokens":100,"tools":[{"name":"Bash"}],"messages":[` + messages + `]}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.proxyAddr+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Claude-Code-Session-Id", "restart-mid-turn")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
		}
		return string(b)
	}
	metric := func(s *served, series string) string {
		t.Helper()
		for line := range strings.Lines(getText(t, "http://"+s.metricsAddr+"/metrics")) {
			if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == series {
				return value
			}
		}
		return "absent"
	}

	args := []string{"--upstream", upstream.URL}
	if replica {
		args = append(append(args, "--replica"), store...)
	}
	first := startServe(t, env, args...)
	var second *served
	if replica {
		second = startServe(t, env, args...)
	}
	began := time.Now()
	prompt := `{"role":"user","content":"Run echo hello-from-fakeapi"}`
	answer := send(first, prompt)
	id := regexp.MustCompile(`toolu_[A-Za-z0-9_]+`).FindString(answer)
	if id == "" {
		t.Fatalf("no tool call in %s", answer)
	}
	harness.Eventually(t, "the first cctrace to count the request", func() error {
		if v := metric(first, `cctrace_requests_total{code="200",kind="turn",model="claude-opus-5-5",stop_reason="tool_use"}`); v != "1" {
			return fmt.Errorf("requests %s", v)
		}
		return nil
	})
	stopped := time.Now()
	first.stop(t) // while the tool runs
	if got := col.spanErrors()["invoke_agent claude-code"]; len(got) != 0 {
		t.Errorf("the first cctrace exported the turn (%q) it should have left to the next", got)
	}

	if !replica {
		second = startServe(t, env, args...)
	}
	send(second, prompt+`,{"role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"Bash","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":"hello-from-fakeapi"}]}`)
	harness.Eventually(t, "the second cctrace to end the turn", func() error {
		if v := metric(second, `cctrace_turns_total{outcome="end_turn"}`); v != "1" {
			return fmt.Errorf("turns %s", v)
		}
		return nil
	})
	if v := metric(second, `cctrace_tool_calls_total{outcome="success",tool="Bash"}`); v != "1" {
		t.Errorf("Bash calls counted by the second cctrace: %s, want 1", v)
	}
	second.stop(t)
	if !replica && !strings.Contains(second.out.String(), "resumed turns in flight") {
		t.Errorf("the second cctrace does not say it resumed the turn:\n%s", second.out.String())
	}
	spans := col.spanErrors()
	if got := spans["invoke_agent claude-code"]; len(got) != 1 || got[0] != "end_turn" {
		t.Errorf("turn roots %q, want one that ended end_turn", got)
	}
	if got := spans["execute_tool Bash"]; len(got) != 1 || got[0] != "" {
		t.Errorf("Bash spans' errors %q, want one without", got)
	}
	if start, ok := col.spanStart("invoke_agent claude-code"); !ok || start.Before(began) || !start.Before(stopped) {
		t.Errorf("the turn starts at %v, want its first request's, before the first cctrace stopped", start)
	}
}
