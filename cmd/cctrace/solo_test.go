package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/fakeapi"
)

// TestRunSaysNothingOfTheSecret: a private cctrace keeps its fingerprint secret without a word
// (it is a team gateway's concern), where serve says it made one.
func TestRunSaysNothingOfTheSecret(t *testing.T) {
	state := "XDG_STATE_HOME=" + t.TempDir()
	_, stderr, code := cctrace(t, []string{state}, "run", "--upstream", "http://127.0.0.1:9", "--", "true")
	if code != 0 || strings.Contains(stderr, "secret") {
		t.Errorf("run: exit %d, and a word about the secret:\n%s", code, stderr)
	}
	s := startServe(t, []string{"XDG_STATE_HOME=" + t.TempDir()}, "--upstream", "http://127.0.0.1:9")
	waitFor(t, func() bool { return strings.Contains(s.out.String(), "turns page") })
	if !strings.Contains(s.out.String(), "generated the secret credential fingerprints are keyed with") {
		t.Errorf("serve did not say it generated a secret:\n%s", s.out.String())
	}
}

// TestMetricsOfFeaturesOff: /metrics carries no series of a feature that is off, and does once it
// is configured.
func TestMetricsOfFeaturesOff(t *testing.T) {
	off := []string{"cctrace_turns_handed_off_total", "cctrace_budget_refusals_total", "cctrace_label_overflow_total"}
	s := startServe(t, nil, "--upstream", "http://127.0.0.1:9")
	solo := getText(t, "http://"+s.metricsAddr+"/metrics")
	for _, name := range off {
		if strings.Contains(solo, name) {
			t.Errorf("a cctrace on its own exposes %s", name)
		}
	}
	budgets := filepath.Join(t.TempDir(), "budgets.yaml")
	if err := os.WriteFile(budgets, []byte("people:\n  alice: {daily: 20}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, nil, "--upstream", "http://127.0.0.1:9", "--replica", "--budgets", budgets, "--enforce-budgets")
	team := getText(t, "http://"+s.metricsAddr+"/metrics")
	for _, want := range []string{"cctrace_turns_handed_off_total 0", `cctrace_budget_refusals_total{scope="person",window="daily"} 0`} {
		if !strings.Contains(team, want) {
			t.Errorf("a replica enforcing budgets does not expose %s", want)
		}
	}
}

// TestTurnsPageShowsPeopleOnceNamed: a cctrace nobody configured for a team shows no person
// column and no spend, even for requests carrying a key; a request naming its person in the
// identity header brings both.
func TestTurnsPageShowsPeopleOnceNamed(t *testing.T) {
	script, err := fakeapi.Scenario("side_request")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(fakeapi.New(script))
	defer upstream.Close()
	s := startServe(t, nil, "--upstream", upstream.URL)
	send := func(session string, header http.Header) {
		t.Helper()
		body := `{"model":"claude-sonnet-4-6","max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.proxyAddr+"/v1/messages", strings.NewReader(body))
		req.Header = header
		req.Header.Set("X-Claude-Code-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		waitFor(t, func() bool { return strings.Contains(getText(t, "http://"+s.metricsAddr+"/api/turns"), session) })
	}
	page := func() string { return getText(t, "http://"+s.metricsAddr+"/") }

	send("solo-session", http.Header{"X-Api-Key": {"sk-ant-solo-key"}})
	if p := page(); strings.Contains(p, "<th>person</th>") || strings.Contains(p, "Spend") || !strings.Contains(p, "/sessions/solo-session") {
		t.Errorf("one person's sessions page shows people or spend:\n%s", p)
	}
	send("alice-session", http.Header{"X-Api-Key": {"sk-ant-alice-key"}, "X-Cctrace-User": {"alice"}})
	if p := page(); !strings.Contains(p, "<th>person</th>") || !strings.Contains(p, `href="/?user=alice"`) {
		t.Errorf("the sessions page shows no person once a request named alice:\n%s", p)
	}
}
