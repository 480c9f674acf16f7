package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestReplicasShareOneHistory runs two cctrace replicas on one real PostgreSQL: real Claude Code
// sessions through either replica, and one session through both, are on both replicas' pages
// and in `cctrace sessions`, the moved session once, with the turns of both replicas. When the
// server goes away, a replica says so once and in cctrace_history_degraded, and goes on
// forwarding.
func TestReplicasShareOneHistory(t *testing.T) {
	claudeBin := harness.Claude(t)
	pg := harness.StartPostgres(t)
	dsn := pg.Database(t)
	api, upstream := serveAPI(t)
	api.use(t, "tool_roundtrip")
	replicas := []*cctraceProc{
		startServe(t, upstream, "--replica", "--history", dsn),
		startServe(t, upstream, "--replica", "--history", dsn),
	}
	st := &stack{claudeBin: claudeBin, api: api}
	prompt := func(r int, sess *session) {
		t.Helper()
		st.proxyURL = replicas[r].proxyURL
		if res := st.claude(t, sess, "Run echo hello-from-fakeapi", "--allowedTools", "Bash"); res.IsError {
			t.Fatalf("claude through replica %d: %s", r, res.Result)
		}
		waitTurnEnded(t, replicas[r].metricsURL, sess.id)
	}
	first, second, moved := newSession(t), newSession(t), newSession(t)
	prompt(0, first)
	prompt(1, second)
	prompt(0, moved)
	prompt(1, moved) // the load balancer moved the session: its next turn is the other replica's

	for i, r := range replicas {
		harness.Eventually(t, fmt.Sprintf("replica %d's page shows every session", i), func() error {
			page := get(t, r.metricsURL+"/")
			for _, sess := range []*session{first, second, moved} {
				if !strings.Contains(page, "/sessions/"+sess.id) {
					return fmt.Errorf("replica %d's page lacks session %s", i, sess.id)
				}
			}
			return nil
		})
	}
	var got struct {
		Sessions []struct {
			ID    string `json:"session_id"`
			Turns int    `json:"turns"`
		} `json:"sessions"`
	}
	out := cctraceCmd(t, "sessions", "--history", dsn, "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("cctrace sessions --json: %v\n%s", err, out)
	}
	turns := map[string]int{}
	for _, s := range got.Sessions {
		if _, dup := turns[s.ID]; dup {
			t.Errorf("session %s is listed twice", s.ID)
		}
		turns[s.ID] = s.Turns
	}
	want := map[string]int{first.id: 1, second.id: 1, moved.id: 2}
	if fmt.Sprint(turns) != fmt.Sprint(want) {
		t.Errorf("cctrace sessions: turns by session %v, want %v\n%s", turns, want, out)
	}

	// The server goes away: replica 0 goes on forwarding, with history in memory.
	pg.Stop()
	late := newSession(t)
	prompt(0, late)
	harness.Eventually(t, "replica 0 says its history degraded", func() error {
		if m := get(t, replicas[0].metricsURL+"/metrics"); !strings.Contains(m, `cctrace_history_degraded{store="postgres"} 1`) {
			return fmt.Errorf("cctrace_history_degraded is not 1:\n%s", grepLines(m, "cctrace_history_"))
		}
		return nil
	})
	if page := get(t, replicas[0].metricsURL+"/"); !strings.Contains(page, "/sessions/"+late.id) {
		t.Errorf("replica 0's page lacks the session it saw after the server went:\n%s", page)
	}
	log := replicas[0].stop(t)
	if n := strings.Count(log, "keeping history in memory"); n != 1 {
		t.Errorf("replica 0 said %d times that it keeps history in memory, want once:\n%s", n, log)
	}
}
