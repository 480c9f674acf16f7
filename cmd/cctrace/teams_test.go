package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/identity"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTeamFileErrors checks that a malformed file, or a flag that cannot work, stops cctrace at
// start with one line naming the file and line.
func TestTeamFileErrors(t *testing.T) {
	dir := t.TempDir()
	badDir := writeFile(t, dir, "directory.yaml", "people:\n  - name: alice\n    identities: alice\n")
	badBudgets := writeFile(t, dir, "budgets.yaml", "people:\n  alice: {daily: -5}\n")
	badAccess := writeFile(t, dir, "access.yaml", "viewers:\n  - name: alice\n    role: boss\n    token_sha256: x\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"directory", []string{"--directory", badDir}, 1, badDir + ":3: identities must be a list"},
		{"budgets", []string{"--budgets", badBudgets}, 1, badBudgets + ":2: daily budget -5 must be above 0"},
		{"access", []string{"--access-file", badAccess}, 1, badAccess + ":4: token_sha256 must be 64 hex digits"},
		{"missing directory", []string{"--directory", filepath.Join(dir, "none.yaml")}, 1, "loading --directory: reading directory file"},
		{"enforce without budgets", []string{"--enforce-budgets"}, 2, "--enforce-budgets needs --budgets FILE"},
		{"metrics token without access control", []string{"--metrics-token-file", badDir}, 2, "--metrics-token-file protects /metrics only with access control on"},
		{"identity order", []string{"--identity-order", "header,email"}, 2, `unknown identity source "email"`},
		{"short secret", []string{"--identity-secret-file", writeFile(t, dir, "secret", "short\n")}, 1, "want at least 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, tt.args...)
			_, stderr, code := cctrace(t, nil, args...)
			if first, _, _ := strings.Cut(stderr, "\n"); code != tt.code || !strings.Contains(first, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and a first line with %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

func TestBudgetsRulesCommand(t *testing.T) {
	dir := t.TempDir()
	budgets := writeFile(t, dir, "budgets.yaml", "people:\n  alice: {daily: 5}\nteams:\n  platform: {monthly: 100}\n")
	stdout, stderr, code := cctrace(t, nil, "budgets", "rules", "--budgets", budgets)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"record: cctrace:person_budget_usd", `user: "alice"`, "expr: vector(100)", "alert: CctraceTeamMonthlyBudgetSpent"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("rules lack %q:\n%s", want, stdout)
		}
	}
	bad := writeFile(t, dir, "bad.yaml", "teams:\n  platform: {weekly: 1}\n")
	if _, stderr, code := cctrace(t, nil, "budgets", "rules", "--budgets", bad); code != 1 || !strings.Contains(stderr, bad+":2: unknown key \"weekly\"") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestFingerprintCommand(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", strings.Repeat("s", 40)+"\n")
	cmd := func(key string) string {
		t.Helper()
		c := execCctrace(t, "fingerprint", "--identity-secret-file", secret)
		c.Stdin = strings.NewReader(key + "\n")
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	a, b := cmd("sk-ant-api03-one"), cmd("sk-ant-api03-two")
	if !strings.HasPrefix(a, "key-") || len(a) != 20 || a == b || cmd("sk-ant-api03-one") != a {
		t.Errorf("fingerprints %q %q", a, b)
	}
}

// TestAccessControl runs cctrace with an access file and checks who gets what on the metrics
// listener and on the separate metrics-only address.
func TestAccessControl(t *testing.T) {
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("admin-token"))
	accessFile := writeFile(t, dir, "access.yaml", "viewers:\n  - name: root\n    role: admin\n    token_sha256: "+hex.EncodeToString(sum[:])+"\n")
	promToken := writeFile(t, dir, "prom-token", "prom-token\n")
	onlyAddr := freeAddr(t)
	s := startServe(t, nil, "--access-file", accessFile, "--metrics-token-file", promToken, "--metrics-only-listen", onlyAddr)
	get := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	base := "http://" + s.metricsAddr
	for _, c := range []struct {
		url, token string
		want       int
	}{
		{base + "/healthz", "", 200},
		{base + "/", "", 401},
		{base + "/api/turns", "", 401},
		{base + "/api/turns", "admin-token", 200},
		{base + "/metrics", "", 401},
		{base + "/metrics", "prom-token", 200},
		{base + "/metrics", "admin-token", 200},
		{"http://" + onlyAddr + "/metrics", "", 200},
		{"http://" + onlyAddr + "/healthz", "", 200},
		{"http://" + onlyAddr + "/api/turns", "", 404},
	} {
		if got := get(c.url, c.token); got != c.want {
			t.Errorf("GET %s (token %q) = %d, want %d", c.url, c.token, got, c.want)
		}
	}
}

// TestOpenBeyondLoopbackWarns checks the loud warning of a metrics listener anyone can reach.
func TestOpenBeyondLoopbackWarns(t *testing.T) {
	s := startServe(t, nil, "--metrics-only-listen", freeAddr(t))
	s.stop(t)
	if strings.Contains(s.out.String(), "are open to anyone") {
		t.Errorf("warned of a loopback listener:\n%s", s.out.String())
	}
	c := execCctrace(t, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0")
	var out harness.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(out.String(), "turns page") })
	_ = c.Process.Signal(os.Interrupt)
	_ = c.Wait()
	if !strings.Contains(out.String(), "the turns page and /api/turns are open to anyone who reaches") {
		t.Errorf("no warning of an open listener beyond loopback:\n%s", out.String())
	}
}

// TestIdentifyIgnoresPlaceholderCredentials checks that in a cloud mode, where cctrace replaces
// the client's credentials, the client's (Claude Code's placeholder, the same for everyone) gives
// no credential identity, while the Anthropic API's keys do.
func TestIdentifyIgnoresPlaceholderCredentials(t *testing.T) {
	fp, err := identity.NewFingerprinter([]byte(strings.Repeat("k", identity.MinSecretBytes)))
	if err != nil {
		t.Fatal(err)
	}
	tm := &teams{opts: teamOptions{identityHeader: identity.DefaultHeader}, fingerprints: fp}
	h := http.Header{"Authorization": {"Bearer skip-foundry-auth"}, "X-Cctrace-User": {"alice"}}
	if id := tm.identify(h, false); id.Credential != "" || id.Header != "alice" {
		t.Errorf("cloud mode: %+v, want the header alone", id)
	}
	if id := tm.identify(h, true); id.Credential == "" {
		t.Errorf("Anthropic API: %+v, want the key's fingerprint", id)
	}
}
