package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestDemo runs `cctrace demo` as a newcomer would: it replays the recorded sessions, prints a
// line per turn and where to look, serves the turns page and /metrics until interrupted, exports
// the traces where OTEL_EXPORTER_OTLP_ENDPOINT says, and prints the session summaries at the end.
func TestDemo(t *testing.T) {
	col, endpoint := startOTLPCollector(t)
	cmd := exec.Command(bin, "demo")
	// The user's own CCTRACE_* settings (a busy --listen, say) are not the demo's.
	cmd.Env = append(baseEnv(), "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "CCTRACE_LISTEN=127.0.0.1:1", "CCTRACE_METRICS_LISTEN=127.0.0.1:1")
	var out harness.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("cctrace demo printed:\n%s", out.String())
		}
	})
	harness.Eventually(t, "the demo to replay its sessions", func() error {
		select {
		case err := <-exited:
			return fmt.Errorf("the demo exited early (%v)", err)
		default:
		}
		if !strings.Contains(out.String(), "Press Ctrl-C to stop") {
			return errors.New("not yet")
		}
		return nil
	})
	printed := out.String()
	page := regexp.MustCompile(`turns page  (http://127\.0\.0\.1:\d+)/\n`).FindStringSubmatch(printed)
	if page == nil {
		t.Fatalf("the demo names no turns page")
	}
	base := page[1]
	if !strings.Contains(printed, "Watch them arrive on the turns page:\n  "+base+"/\n") {
		t.Errorf("the turns page is not named before the sessions are replayed")
	}
	if !strings.Contains(printed, "traces      exported over OTLP to "+endpoint) {
		t.Errorf("the demo does not say where the traces go")
	}
	// One line per turn, each recording's point in it.
	turnLines := regexp.MustCompile(`(?m)^cctrace [0-9a-f]{8} turn \d .*$`).FindAllString(printed, -1)
	if len(turnLines) != 5 {
		t.Errorf("%d turn lines, want 5:\n%s", len(turnLines), strings.Join(turnLines, "\n"))
	}
	for _, want := range []string{"(failed Read×1)", "Agent×1 Bash×1 · 1 subagent", "3 req (2 retried)", "compacted (auto)"} {
		if !strings.Contains(strings.Join(turnLines, "\n"), want) {
			t.Errorf("no turn line says %q", want)
		}
	}

	var turns struct {
		Turns []struct {
			Session string `json:"session_id"`
			Outcome string `json:"outcome"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(getText(t, base+"/api/turns")), &turns); err != nil {
		t.Fatal(err)
	}
	sessions := map[string]bool{}
	for _, tr := range turns.Turns {
		sessions[tr.Session] = true
		if tr.Outcome != "end_turn" {
			t.Errorf("turn of %s ended %q", tr.Session, tr.Outcome)
		}
	}
	if len(turns.Turns) != 5 || len(sessions) != 4 {
		t.Errorf("/api/turns: %d turns of %d sessions, want 5 of 4", len(turns.Turns), len(sessions))
	}
	if html := getText(t, base+"/"); !strings.Contains(html, "/sessions/") {
		t.Errorf("the sessions page links no session")
	}
	metrics := getText(t, base+"/metrics")
	for _, want := range []string{`cctrace_turns_total{`, `cctrace_subagents_total{`, `cctrace_compactions_total{`, `code="529"`, `cctrace_build_info{`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("the demo exited with %v after SIGINT", err)
	}
	if n := strings.Count(out.String(), "cctrace session "); n < 4 {
		t.Errorf("%d session summary lines after SIGINT, want one or more for each of 4 sessions", n)
	}
	names := map[string]int{}
	col.mu.Lock()
	for _, req := range col.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names[sp.Name]++
				}
			}
		}
	}
	col.mu.Unlock()
	for _, want := range []string{"invoke_agent claude-code", "invoke_agent general-purpose", "execute_tool Agent", "execute_tool Read", "chat claude-opus-5-5"} {
		if names[want] == 0 {
			t.Errorf("no %q span exported; got %v", want, names)
		}
	}
	if names["invoke_agent claude-code"] != 5 {
		t.Errorf("%d turn spans exported, want 5", names["invoke_agent claude-code"])
	}
}
