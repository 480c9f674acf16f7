package fakeapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordedDir holds the traffic of the real Claude Code CLI against the scenarios.
const recordedDir = "../../testdata/claude-code"

// recordedExchange is the part of a recorded NNN.json the replay needs.
type recordedExchange struct {
	Seq      int             `json:"seq"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Query    string          `json:"query"`
	Headers  http.Header     `json:"headers"`
	Body     json.RawMessage `json:"body"`
	BodyText *string         `json:"body_text"`
	Rule     string          `json:"rule"`
	Status   int             `json:"status"`
}

// TestRecordedTraffic replays every request the real CLI sent through a fresh copy of its
// scenario: each must be answered by the same rule with the same status, so the scripts and the
// recordings cannot drift apart unnoticed.
func TestRecordedTraffic(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(recordedDir, "*", "001.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < len(ScenarioNames()) {
		t.Fatalf("found recordings for %d scenarios, want %d", len(dirs), len(ScenarioNames()))
	}
	for _, first := range dirs {
		dir := filepath.Dir(first)
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			scenario, provider := RecordedScenario(name)
			script, err := Scenario(scenario)
			if err != nil {
				t.Fatal(err)
			}
			files, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9][0-9].json"))
			if err != nil {
				t.Fatal(err)
			}
			srv := New(script, WithProvider(provider, Auth{}))
			for _, f := range files {
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var ex recordedExchange
				if err := json.Unmarshal(raw, &ex); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, k := range secretHeaders {
					if ex.Headers.Get(k) != "" {
						t.Errorf("%s records the %s header", f, k)
					}
				}
				body := []byte(ex.Body)
				if ex.BodyText != nil {
					body = []byte(*ex.BodyText)
				}
				target := ex.Path
				if ex.Query != "" {
					target += "?" + ex.Query
				}
				req := httptest.NewRequest(ex.Method, target, bytes.NewReader(body))
				for k, v := range ex.Headers {
					if k != "Content-Length" && k != "Connection" {
						req.Header[k] = v
					}
				}
				srv.ServeHTTP(httptest.NewRecorder(), req)
				served := srv.Served()
				sv := served[len(served)-1]
				if sv.Rule != ex.Rule || sv.Status != ex.Status {
					t.Errorf("%s: rule %s status %d, recorded %s %d", filepath.Base(f), sv.Rule, sv.Status, ex.Rule, ex.Status)
				}
				if strings.Contains(string(raw), "sk-ant-") {
					t.Errorf("%s contains an API key", f)
				}
			}
		})
	}
}
