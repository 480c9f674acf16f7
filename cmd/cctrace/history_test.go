package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/fakeapi"
)

// TestHistoryOutlivesServe: sessions a cctrace saw are on the turns page of the next one started
// on the same state directory, and in `cctrace sessions` and `cctrace turns`, as a table and as
// JSON.
func TestHistoryOutlivesServe(t *testing.T) {
	script, err := fakeapi.Scenario("side_request")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(fakeapi.New(script))
	defer upstream.Close()
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state, "CCTRACE_HISTORY="}
	s := startServe(t, env, "--upstream", upstream.URL)
	body := `{"model":"claude-sonnet-4-6","max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.proxyAddr+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Claude-Code-Session-Id", "earlier-session")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool {
		return strings.Contains(getText(t, "http://"+s.metricsAddr+"/api/turns"), "earlier-session")
	})
	s.stop(t)
	if _, err := os.Stat(filepath.Join(state, "cctrace", historyFile)); err != nil {
		t.Fatalf("no history in the state directory: %v", err)
	}

	s = startServe(t, env, "--upstream", upstream.URL)
	if page := getText(t, "http://"+s.metricsAddr+"/"); !strings.Contains(page, "/sessions/earlier-session") {
		t.Errorf("the sessions page of the next cctrace lacks the earlier session:\n%s", page)
	}
	if page := getText(t, "http://"+s.metricsAddr+"/sessions/earlier-session"); !strings.Contains(page, `href="/turns/`) {
		t.Errorf("the earlier session's page lacks its turn:\n%s", page)
	}

	out, stderr, code := cctrace(t, env, "sessions")
	if code != 0 || !strings.Contains(out, "earlier-session") || !strings.HasPrefix(out, "SESSION") {
		t.Errorf("cctrace sessions: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = cctrace(t, env, "turns", "--json", "--session", "earlier-session")
	var turns struct {
		Turns []struct {
			SessionID string  `json:"session_id"`
			Requests  int     `json:"requests"`
			Cost      float64 `json:"cost_usd"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(out), &turns); code != 0 || err != nil || len(turns.Turns) == 0 || turns.Turns[0].SessionID != "earlier-session" || turns.Turns[0].Requests != 1 {
		t.Errorf("cctrace turns --json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	if out, _, code := cctrace(t, env, "sessions", "--per", "day", "--json"); code != 0 || !strings.Contains(out, `"turns": 1`) {
		t.Errorf("cctrace sessions --per day --json: exit %d\n%s", code, out)
	}
	if _, stderr, code := cctrace(t, []string{"XDG_STATE_HOME=" + t.TempDir(), "CCTRACE_HISTORY="}, "sessions"); code != 1 || !strings.Contains(stderr, "no history at") {
		t.Errorf("cctrace sessions without a history: exit %d\n%s", code, stderr)
	}
}

// TestHistoryPasswordNotShown: a PostgreSQL URL in CCTRACE_HISTORY, or a URL with a password in
// another CCTRACE_ setting, is the flags' default, and -h shows defaults: not the password.
func TestHistoryPasswordNotShown(t *testing.T) {
	env := []string{"CCTRACE_HISTORY=postgres://cctrace:s3cret-pw@127.0.0.1:1/history",
		"CCTRACE_BUDGET_SPEND_PROMETHEUS=http://prom:s3cret-pw@127.0.0.1:9090"}
	for _, args := range [][]string{{"serve", "-h"}, {"sessions", "-h"}, {"turns", "-h"}} {
		out, stderr, _ := cctrace(t, env, args...)
		if strings.Contains(out+stderr, "s3cret-pw") {
			t.Errorf("cctrace %v shows the password:\n%s%s", args, out, stderr)
		}
	}
}
