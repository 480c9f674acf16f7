package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestHistoryAcrossRestart runs a real Claude Code session through cctrace serve, stops it, and
// finds the session on the sessions page of the next cctrace started on the same state
// directory, and in `cctrace sessions` and `cctrace turns`, read while that cctrace writes.
func TestHistoryAcrossRestart(t *testing.T) {
	claudeBin := harness.Claude(t)
	api, upstream := serveAPI(t)
	state := t.TempDir()
	api.use(t, "tool_roundtrip")

	first := startServe(t, upstream, "--state-dir", state)
	earlier := newSession(t)
	st := &stack{claudeBin: claudeBin, proxyURL: first.proxyURL, api: api}
	if res := st.claude(t, earlier, "Run echo hello-from-fakeapi", "--allowedTools", "Bash"); res.IsError {
		t.Fatalf("claude: %s", res.Result)
	}
	waitTurnEnded(t, first.metricsURL, earlier.id)
	first.stop(t)

	second := startServe(t, upstream, "--state-dir", state)
	if page := get(t, second.metricsURL+"/"); !strings.Contains(page, "/sessions/"+earlier.id) {
		t.Errorf("the sessions page after the restart lacks the earlier session %s:\n%s", earlier.id, page)
	}
	if page := get(t, second.metricsURL+"/sessions/"+earlier.id); !strings.Contains(page, `href="/turns/`) {
		t.Errorf("the earlier session's page lacks its turns:\n%s", page)
	}
	// The page's cost by day and week, and the most expensive, come from the history; its
	// filters narrow all of it.
	project := filepath.Base(earlier.dir)
	page := get(t, second.metricsURL+"/?project="+project)
	for _, id := range []string{"cost-days", "cost-weeks", "top-turns", "top-sessions"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("the page filtered by project %s lacks #%s:\n%s", project, id, page)
		}
	}
	if !strings.Contains(page, "/sessions/"+earlier.id) {
		t.Errorf("the page filtered by the session's project lacks it:\n%s", page)
	}
	if page := get(t, second.metricsURL+"/?project=no-such-project"); strings.Contains(page, "/sessions/"+earlier.id) {
		t.Errorf("the page filtered by another project shows the session:\n%s", page)
	}
	// A session of the second cctrace, while it runs: the command reads what it writes.
	later := newSession(t)
	st.proxyURL = second.proxyURL
	if res := st.claude(t, later, "Run echo hello-from-fakeapi", "--allowedTools", "Bash"); res.IsError {
		t.Fatalf("claude: %s", res.Result)
	}
	waitTurnEnded(t, second.metricsURL, later.id)

	var sessions struct {
		Sessions []struct {
			ID        string  `json:"session_id"`
			Turns     int     `json:"turns"`
			Requests  int     `json:"requests"`
			ToolCalls int     `json:"tool_calls"`
			Cost      float64 `json:"cost_usd"`
		} `json:"sessions"`
	}
	harness.Eventually(t, "cctrace sessions lists both sessions", func() error {
		out := cctraceCmd(t, "sessions", "--state-dir", state, "--json")
		if err := json.Unmarshal([]byte(out), &sessions); err != nil {
			return err
		}
		found := 0
		for _, s := range sessions.Sessions {
			if s.ID == earlier.id || s.ID == later.id {
				found++
			}
		}
		if found != 2 {
			return fmt.Errorf("cctrace sessions --json lists %d of the 2 sessions:\n%s", found, out)
		}
		return nil
	})
	for _, s := range sessions.Sessions {
		if s.Turns != 1 || s.Requests < 2 || s.ToolCalls != 1 || s.Cost <= 0 {
			t.Errorf("session %s in the history: %+v, want 1 turn of at least 2 requests, 1 tool call and a cost", s.ID, s)
		}
	}
	table := cctraceCmd(t, "sessions", "--state-dir", state)
	if !strings.HasPrefix(table, "SESSION") || !strings.Contains(table, earlier.id) {
		t.Errorf("cctrace sessions:\n%s", table)
	}
	var turns struct {
		Turns []struct {
			SessionID string `json:"session_id"`
			Requests  int    `json:"requests"`
			Project   string `json:"project"`
		} `json:"turns"`
	}
	out := cctraceCmd(t, "turns", "--state-dir", state, "--session", earlier.id, "--json")
	if err := json.Unmarshal([]byte(out), &turns); err != nil || len(turns.Turns) != 1 || turns.Turns[0].SessionID != earlier.id {
		t.Errorf("cctrace turns --session %s --json: %v\n%s", earlier.id, err, out)
	} else if want := project; turns.Turns[0].Project != want {
		t.Errorf("the turn's project is %q, want the working directory's name %q", turns.Turns[0].Project, want)
	}
}

// TestHistoryBrokenStoreKeepsForwarding: a history file that is not a database leaves cctrace
// with history in memory, said in one log line and cctrace_history_degraded; Claude Code's
// sessions go through, and the page shows them.
func TestHistoryBrokenStoreKeepsForwarding(t *testing.T) {
	claudeBin := harness.Claude(t)
	api, upstream := serveAPI(t)
	api.use(t, "tool_roundtrip")
	broken := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(broken, bytes.Repeat([]byte("not a database\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	cc := startServe(t, upstream, "--history", broken)
	sess := newSession(t)
	st := &stack{claudeBin: claudeBin, proxyURL: cc.proxyURL, api: api}
	if res := st.claude(t, sess, "Run echo hello-from-fakeapi", "--allowedTools", "Bash"); res.IsError {
		t.Fatalf("claude through a cctrace whose history is broken: %s", res.Result)
	}
	waitTurnEnded(t, cc.metricsURL, sess.id)
	if m := get(t, cc.metricsURL+"/metrics"); !strings.Contains(m, `cctrace_history_degraded{store="sqlite"} 1`) {
		t.Errorf("the metrics do not say the history degraded:\n%s", grepLines(m, "cctrace_history_"))
	}
	if page := get(t, cc.metricsURL+"/"); !strings.Contains(page, "/sessions/"+sess.id) {
		t.Errorf("the sessions page lacks the session:\n%s", page)
	}
	log := cc.stop(t)
	if n := strings.Count(log, "keeping history in memory"); n != 1 {
		t.Errorf("cctrace said %d times that it keeps history in memory, want once:\n%s", n, log)
	}
}

// serveAPI serves a switchable fake API on a loopback port for the test's length.
func serveAPI(t *testing.T) (*switchableAPI, string) {
	t.Helper()
	api := &switchableAPI{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })
	return api, "http://" + ln.Addr().String()
}

// waitTurnEnded waits until the cctrace at metricsURL has ended a turn of session: what the
// history keeps.
func waitTurnEnded(t *testing.T, metricsURL, session string) {
	t.Helper()
	harness.Eventually(t, "a turn of "+session+" ended", func() error {
		var got struct {
			Turns []struct {
				SessionID string     `json:"session_id"`
				End       *time.Time `json:"end"`
			} `json:"turns"`
		}
		if err := json.Unmarshal([]byte(get(t, metricsURL+"/api/turns")), &got); err != nil {
			return err
		}
		for _, tu := range got.Turns {
			if tu.SessionID == session && tu.End != nil {
				return nil
			}
		}
		return fmt.Errorf("no ended turn of %s yet", session)
	})
}

// cctraceCmd runs the cctrace binary with args and returns its standard output.
func cctraceCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(cctraceBin, args...)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cctrace %q: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
