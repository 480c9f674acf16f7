package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/metrics"
)

// The two people of TestTeamsThroughCctrace, each with an API key of their own. Neither key may
// appear in any output.
const (
	aliceKey = "sk-ant-api03-e2eALICEKEY-7c41"
	bobKey   = "sk-ant-api03-e2eBOBKEY-93d0"
)

// TestTeamsThroughCctrace runs two people's real Claude Code sessions in parallel through one
// shared cctrace: alice with her key and the X-Cctrace-User header (ANTHROPIC_CUSTOM_HEADERS),
// bob with his key alone. Prometheus must split tokens and cost between them exactly as the fake
// served them; names from a rewritten directory must appear after cctrace rereads it; with
// enforcement on, once alice's budget is spent her next prompt gets the error as Claude Code
// shows it while bob goes on; and neither key may appear anywhere.
func TestTeamsThroughCctrace(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "identity-secret")
	directory := filepath.Join(dir, "directory.yaml")
	budgets := filepath.Join(dir, "budgets.yaml")
	write := func(path, text string) {
		t.Helper()
		// Written aside and renamed over, as an editor saves: cctrace must see the new file.
		if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write(secretFile, strings.Repeat("e2e-secret-", 4)+"\n")
	// At first the directory knows nobody, and nobody has a budget.
	write(directory, "people: []\n")
	write(budgets, "people: {}\n")

	s := startStackArgs(t, "--identity-secret-file", secretFile, "--directory", directory,
		"--budgets", budgets, "--enforce-budgets", "--state-dir", filepath.Join(dir, "state"))
	api := s.api.use(t, "tool_roundtrip")

	aliceFP, bobFP := fingerprint(t, secretFile, aliceKey), fingerprint(t, secretFile, bobKey)
	alice := newSession(t)
	alice.env = []string{"ANTHROPIC_API_KEY=" + aliceKey, "ANTHROPIC_CUSTOM_HEADERS=X-Cctrace-User: alice"}
	bob := newSession(t)
	bob.env = []string{"ANTHROPIC_API_KEY=" + bobKey}

	// Two prompts each, both people at once.
	var wg sync.WaitGroup
	for _, sess := range []*session{alice, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, prompt := range []string{"Run echo hello-from-fakeapi", "Run it again"} {
				if res := s.claude(t, sess, prompt, "--allowedTools", "Bash"); res.IsError {
					t.Errorf("prompt %q: %s", prompt, res.Result)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Before the directory names anyone: alice is her header, bob his key's fingerprint.
	checkSplit(t, s, api.Served(), map[string]string{alice.id: "alice", bob.id: bobFP})
	if n := s.prom.Query(t, fmt.Sprintf(`count(cctrace_tokens_total{user=%q}) or vector(0)`, aliceFP)); n != 0 {
		t.Error("alice is counted by her key, not by her header, which comes first")
	}

	t.Run("directory names appear after a reload", func(t *testing.T) {
		write(directory, fmt.Sprintf("people:\n  - name: alice\n    team: platform\n    identities: [alice]\n"+
			"  - name: bob\n    team: search\n    identities: [%s]\n", bobFP))
		waitLog(t, s, "reloaded the directory file")
		if res := s.claude(t, bob, "Once more", "--allowedTools", "Bash"); res.IsError {
			t.Fatalf("bob: %s", res.Result)
		}
		s.prom.WaitQuery(t, `sum(cctrace_tokens_total{user="bob",team="search"})`, float64(tokensOf(api.Served(), bob.id, true)))
		var turns struct {
			Turns []struct {
				User string `json:"user"`
				Team string `json:"team"`
			} `json:"turns"`
		}
		if err := json.Unmarshal([]byte(get(t, s.metricsURL+"/api/turns?user=bob")), &turns); err != nil {
			t.Fatal(err)
		}
		if len(turns.Turns) != 1 || turns.Turns[0].Team != "search" {
			t.Errorf("/api/turns?user=bob has %+v, want the one turn after the reload, of team search", turns.Turns)
		}
	})

	t.Run("over budget: a new prompt is refused, the other person goes on", func(t *testing.T) {
		write(budgets, "people:\n  alice: {daily: 0.01}\n")
		waitLog(t, s, "reloaded the budgets file")
		before := len(api.Served())
		alice.refusable = true
		res := s.claude(t, alice, "And one more", "--allowedTools", "Bash")
		if !res.IsError || res.APIErrorStatus != 402 ||
			!strings.HasPrefix(res.Result, "API Error: 402 cctrace: alice's daily budget of $0.0100 for the last 24 hours is spent") {
			t.Errorf("alice's prompt over budget: %+v", res)
		}
		for _, sv := range api.Served()[before:] {
			if sv.Header.Get("X-Cctrace-User") == "alice" {
				t.Errorf("a request of alice's reached the upstream: %s %s", sv.Method, sv.Path)
			}
		}
		if res := s.claude(t, bob, "And one more", "--allowedTools", "Bash"); res.IsError {
			t.Errorf("bob, under budget, was refused: %s", res.Result)
		}
		s.prom.WaitQuery(t, `clamp_max(sum(cctrace_budget_refusals_total{scope="person",window="daily"}), 1)`, 1)
	})

	t.Run("the split is exact", func(t *testing.T) {
		// bob's first prompts were counted under his fingerprint, before the directory named him.
		checkSplit(t, s, api.Served(), map[string]string{alice.id: "alice", bob.id: "bob|" + bobFP})
	})

	t.Run("GenAI client metrics", func(t *testing.T) {
		var input int
		for _, sv := range api.Served() {
			if sv.Path == "/v1/messages" {
				input += sv.Usage.InputTokens + sv.Usage.CacheReadInputTokens + sv.Usage.CacheCreationInputTokens
			}
		}
		s.prom.WaitQuery(t, `sum(gen_ai_client_token_usage_sum{gen_ai_token_type="input",gen_ai_provider_name="anthropic",gen_ai_operation_name="chat"})`, float64(input))
		if n := s.prom.Query(t, `sum(gen_ai_client_operation_duration_seconds_count{gen_ai_request_model="claude-opus-5-5"})`); n < 1 {
			t.Errorf("gen_ai_client_operation_duration_seconds_count = %v", n)
		}
	})

	t.Run("no key anywhere", func(t *testing.T) {
		outputs := map[string]string{
			"jaeger":     get(t, s.jaeger.QueryURL()+"/api/traces?service="+service+"&limit=1000"),
			"/metrics":   get(t, s.metricsURL+"/metrics"),
			"/api/turns": get(t, s.metricsURL+"/api/turns"),
			"turns page": get(t, s.metricsURL+"/"),
			"output":     s.cctrace.Output(),
		}
		for _, f := range []string{directory, budgets, secretFile} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outputs[f] = string(b)
		}
		for _, sv := range api.Served() {
			h, _ := json.Marshal(sv.Header)
			outputs["fake's record of headers"] += string(h)
		}
		if !strings.Contains(outputs["jaeger"], `"user.id"`) {
			t.Error("no span carries user.id")
		}
		for name, text := range outputs {
			for _, secret := range []string{aliceKey, bobKey, "ALICEKEY", "BOBKEY"} {
				if strings.Contains(text, secret) {
					t.Errorf("%s contains key material (%q)", name, secret)
				}
			}
		}
	})
}

// fingerprint is what cctrace shows for a key, from its own command.
func fingerprint(t *testing.T, secretFile, key string) string {
	t.Helper()
	cmd := exec.Command(cctraceBin, "fingerprint", "--identity-secret-file", secretFile)
	cmd.Stdin = strings.NewReader(key + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cctrace fingerprint: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// waitLog waits for cctrace to log text.
func waitLog(t *testing.T, s *stack, text string) {
	t.Helper()
	n := strings.Count(s.cctrace.Output(), text)
	harness.Eventually(t, fmt.Sprintf("cctrace to log %q", text), func() error {
		if strings.Count(s.cctrace.Output(), text) == n {
			return fmt.Errorf("it logged:\n%s", s.cctrace.Output())
		}
		return nil
	})
}

// tokensOf sums every token the fake served to one session's Messages requests (all of them, or
// only those after the first two prompts of each session when late is set: the requests made
// once the directory named everyone).
func tokensOf(served []fakeapi.Served, session string, late bool) int {
	total := 0
	prompts := 0
	for _, sv := range served {
		if sv.Path != "/v1/messages" || sv.Header.Get("X-Claude-Code-Session-Id") != session {
			continue
		}
		if sv.Rule == "main" {
			prompts++
		}
		if late && prompts <= 2 {
			continue
		}
		u := sv.Usage
		total += u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	}
	return total
}

// checkSplit checks that Prometheus has, for each session's person (people maps session ids to
// a regular expression of their user label values), exactly the tokens of each type and the cost
// the fake served that session.
func checkSplit(t *testing.T, s *stack, served []fakeapi.Served, people map[string]string) {
	t.Helper()
	type totals struct {
		usage fakeapi.Usage
		cost  float64
	}
	want := map[string]*totals{}
	prices := metrics.DefaultPrices()
	for _, sv := range served {
		person, ok := people[sv.Header.Get("X-Claude-Code-Session-Id")]
		if !ok || sv.Path != "/v1/messages" {
			continue
		}
		w := want[person]
		if w == nil {
			w = &totals{}
			want[person] = w
		}
		w.usage = w.usage.Add(sv.Usage)
		u := sv.Usage
		if cost, ok := prices.Cost(sv.Model, wire.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
			CacheCreation5m: u.CacheCreation5m, CacheCreation1h: u.CacheCreation1h,
		}); ok {
			w.cost += cost
		}
	}
	if len(want) != 2 {
		t.Fatalf("the fake served %d of the two people", len(want))
	}
	for person, w := range want {
		for typ, n := range map[string]int{
			"input": w.usage.InputTokens, "output": w.usage.OutputTokens,
			"cache_read": w.usage.CacheReadInputTokens, "cache_creation": w.usage.CacheCreationInputTokens,
		} {
			s.prom.WaitQuery(t, fmt.Sprintf(`sum(cctrace_tokens_total{user=~%q,type=%q})`, person, typ), float64(n))
		}
		got := s.prom.Query(t, fmt.Sprintf(`sum(cctrace_cost_usd_total{user=~%q})`, person))
		if w.cost <= 0 || math.Abs(got-w.cost) > 1e-9*w.cost {
			t.Errorf("%s: cost %v in Prometheus, the fake served %v", person, got, w.cost)
		}
	}
}
