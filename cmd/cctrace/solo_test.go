package main

import (
	"strings"
	"testing"
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
