package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// subscriptionToken is the bearer token a subscription's Claude Code sends in these tests (as
// ANTHROPIC_AUTH_TOKEN); like apiKey, it must appear in no output of cctrace.
const subscriptionToken = "sk-ant-oat01-e2eMARKER-8d0c2e4f6a"

// TestLimitsFromTheWire runs real Claude Code through cctrace against a fake API that reports an
// account's limits on every answer as the Anthropic API does (the ratelimit scenario: one 429
// refusal of the account's limit, which Claude Code waits out, then a Bash call). A subscription
// session (a bearer token) drives the window gauges, the refusal count, the status line and the
// session's share of its windows, on its page and in its status; an API key session drives the
// headroom gauges and has no window on its status line.
func TestLimitsFromTheWire(t *testing.T) {
	claudeBin := harness.Claude(t)
	api, upstream := serveAPI(t)
	cc := startServe(t, upstream, "--state-dir", t.TempDir())
	st := &stack{claudeBin: claudeBin, proxyURL: cc.proxyURL, api: api}
	const prompt = "Print hello with a shell command."

	api.use(t, "ratelimit")
	sub := newSession(t)
	sub.env = []string{"ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=" + subscriptionToken}
	if res := st.claude(t, sub, prompt, "--allowedTools", "Bash"); res.IsError {
		t.Fatalf("claude with a subscription: %s", res.Result)
	}
	waitTurnEnded(t, cc.metricsURL, sub.id)

	// The scenario's windows start at 41% (5h) and 79.5% (7d) and fill with what is served:
	// the weekly one binds, still short of the warning at 80%.
	m := get(t, cc.metricsURL+"/metrics")
	for window, base := range map[string]float64{"5h": 0.41, "7d": 0.795} {
		if v := metricSum(m, "cctrace_ratelimit_utilization", fmt.Sprintf("window=%q", window)); v <= base || v >= 1 {
			t.Errorf("cctrace_ratelimit_utilization{window=%q} = %v, want above %v", window, v, base)
		}
		if v := metricSum(m, "cctrace_ratelimit_reset_timestamp_seconds", fmt.Sprintf("window=%q", window)); v <= 0 {
			t.Errorf("cctrace_ratelimit_reset_timestamp_seconds{window=%q} = %v", window, v)
		}
	}
	if v := metricSum(m, "cctrace_ratelimit_status", `window="7d"`, `status="allowed"`); v != 1 {
		t.Errorf(`cctrace_ratelimit_status{window="7d",status="allowed"} = %v, want 1`, v)
	}
	if v := metricSum(m, "cctrace_upstream_refusals_total", `reason="rate_limit"`); v != 1 {
		t.Errorf(`cctrace_upstream_refusals_total{reason="rate_limit"} = %v, want the one 429`, v)
	}
	if v := metricSum(m, "cctrace_upstream_refusals_total", `reason="overloaded"`); v > 0 {
		t.Errorf(`cctrace_upstream_refusals_total{reason="overloaded"} = %v, want none`, v)
	}
	if v := metricSum(m, "cctrace_ratelimit_growth_total", `window="7d"`, `attributed="true"`); v <= 0 {
		t.Errorf(`cctrace_ratelimit_growth_total{window="7d",attributed="true"} = %v, want the session's rise`, v)
	}

	var status struct {
		Limit *struct {
			Window      string  `json:"window"`
			Utilization float64 `json:"utilization"`
			Status      string  `json:"status"`
			Share       float64 `json:"session_share"`
		} `json:"limit"`
	}
	if err := json.Unmarshal([]byte(get(t, cc.metricsURL+"/api/sessions/"+sub.id+"/status")), &status); err != nil {
		t.Fatal(err)
	}
	if l := status.Limit; l == nil || l.Window != "7d" || l.Utilization <= 0.795 || l.Status != "allowed" || l.Share <= 0 {
		t.Errorf("the session's status has limit %+v, want the 7d window with the session's share", l)
	}
	line := statusLine(t, cc.metricsURL, sub.id)
	if !regexp.MustCompile(` · 7d [0-9.]+% · resets (Mon|Tue|Wed|Thu|Fri|Sat|Sun) [0-9]{2}:[0-9]{2}$`).MatchString(line) {
		t.Errorf("the status line %q lacks the weekly window and its reset", line)
	}
	harness.Eventually(t, "the session's page shows its share of the windows", func() error {
		page := get(t, cc.metricsURL+"/sessions/"+sub.id)
		if !regexp.MustCompile(`id="window-share".*5h [0-9.]+% · 7d [0-9.]+%`).MatchString(page) {
			return fmt.Errorf("no share of 5h and 7d on the page:\n%s", page)
		}
		return nil
	})

	api.use(t, "ratelimit")
	key := newSession(t)
	if res := st.claude(t, key, prompt, "--allowedTools", "Bash"); res.IsError {
		t.Fatalf("claude with an API key: %s", res.Result)
	}
	waitTurnEnded(t, cc.metricsURL, key.id)
	m = get(t, cc.metricsURL+"/metrics")
	if v := metricSum(m, "cctrace_ratelimit_api_limit", `kind="tokens"`); v != 40000 {
		t.Errorf(`cctrace_ratelimit_api_limit{kind="tokens"} = %v, want the fake's 40000`, v)
	}
	if v := metricSum(m, "cctrace_ratelimit_api_remaining", `kind="tokens"`); v < 0 || v >= 40000 {
		t.Errorf(`cctrace_ratelimit_api_remaining{kind="tokens"} = %v, want what the session left of 40000`, v)
	}
	if v := metricSum(m, "cctrace_upstream_refusals_total", `reason="rate_limit"`); v != 2 {
		t.Errorf(`cctrace_upstream_refusals_total{reason="rate_limit"} = %v, want both sessions' 429`, v)
	}
	if line := statusLine(t, cc.metricsURL, key.id); strings.Contains(line, "resets") {
		t.Errorf("an API key's status line %q shows a window", line)
	}
	for what, text := range map[string]string{"metrics": m, "cctrace's output": cc.stop(t)} {
		for _, secret := range []string{subscriptionToken, apiKey} {
			if strings.Contains(text, secret) {
				t.Errorf("a credential appears in %s", what)
			}
		}
	}
}

// statusLine runs `cctrace statusline` as Claude Code's statusLine setting does, for session.
func statusLine(t *testing.T, metricsURL, session string) string {
	t.Helper()
	cmd := exec.Command(cctraceBin, "statusline", "--url", metricsURL)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(fmt.Sprintf(`{"session_id":%q,"context_window":{"context_window_size":200000}}`, session))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cctrace statusline: %v", err)
	}
	return strings.TrimSpace(string(out))
}
