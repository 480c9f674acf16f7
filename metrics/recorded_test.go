package metrics

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
)

// claudeResult is what `claude -p --output-format json|stream-json` reports of its own bill: the
// session's cost and its tokens by model, cumulative over the runs of a resumed session.
type claudeResult struct {
	Type       string  `json:"type"`
	TotalCost  float64 `json:"total_cost_usd"`
	ModelUsage map[string]struct {
		InputTokens              int `json:"inputTokens"`
		OutputTokens             int `json:"outputTokens"`
		CacheReadInputTokens     int `json:"cacheReadInputTokens"`
		CacheCreationInputTokens int `json:"cacheCreationInputTokens"`
	} `json:"modelUsage"`
}

// lastResult reads the last result the CLI reported in dir's cli-N.jsonl files: a resumed
// session's runs report the session's totals so far, so the last holds them all.
func lastResult(t *testing.T, dir string) (claudeResult, bool) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "cli-*.jsonl"))
	var last claudeResult
	found := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r claudeResult
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Type == "result" && r.ModelUsage != nil {
				last, found = r, true
			}
		}
	}
	return last, found
}

// priceDisagreements are the recordings where Claude Code's own price is not the public pricing
// page's, and why; the page wins, and the test checks cctrace's cost against the CLI's times
// the factor.
var priceDisagreements = map[string]struct {
	factor float64
	why    string
}{
	"vertex_tool_roundtrip":  {1.1, "claude-opus-5-5 on Vertex AI's regional endpoint (us-east5) costs 10% more than on the Anthropic API (pricing page, third-party platforms); Claude Code prices it at the Anthropic API's rates"},
	"bedrock_tool_roundtrip": {1.1, "us.anthropic.claude-opus-5-5 is a geographic (regional) Bedrock endpoint, 10% more than the Anthropic API (pricing page, third-party platforms); Claude Code prices it at the Anthropic API's rates"},
}

// TestRecordedBillsMatchClaudeCode holds cctrace's bill of each recorded session to Claude
// Code's own (--output-format json): every session's cost within 1% of total_cost_usd, and its
// tokens by model and type equal to modelUsage, as the metrics count them.
func TestRecordedBillsMatchClaudeCode(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		want, ok := lastResult(t, dir)
		if !ok {
			continue // interactive sessions, and clients other than Claude Code
		}
		n++
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			exchanges, err := replay.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			m, err := New(reg)
			if err != nil {
				t.Fatal(err)
			}
			provider := wire.ProviderAnthropic
			for _, ex := range exchanges {
				if ex.Request.Provider != wire.ProviderAnthropic {
					provider = ex.Request.Provider
				}
			}
			tr := instrument.New(m, instrument.WithPricing(DefaultPrices().ProviderCost(provider, false)))
			replay.Play(tr, exchanges)
			tr.Close(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))

			tokens := map[string]map[string]float64{}
			cost := 0.0
			for _, mf := range mustGather(t, reg) {
				for _, metric := range mf.GetMetric() {
					labels := map[string]string{}
					for _, l := range metric.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					switch mf.GetName() {
					case nameTokens:
						model := Family(labels["model"])
						if tokens[model] == nil {
							tokens[model] = map[string]float64{}
						}
						tokens[model][labels["type"]] += metric.GetCounter().GetValue()
					case nameCost:
						cost += metric.GetCounter().GetValue()
					}
				}
			}
			wantCost := want.TotalCost
			// The CLI leaves out of its bill an attempt whose stream an error event broke before
			// any content and that it sent again; the upstream reported that attempt's input in
			// message_start, and cctrace counts what the upstream reports.
			for model, u := range brokenAttemptsSentAgain(exchanges) {
				c, _ := DefaultPrices().Cost(model, u)
				wantCost += c
				mu := want.ModelUsage[model]
				mu.InputTokens += u.InputTokens
				mu.OutputTokens += u.OutputTokens
				mu.CacheReadInputTokens += u.CacheReadInputTokens
				mu.CacheCreationInputTokens += u.CacheCreationInputTokens
				want.ModelUsage[model] = mu
				t.Logf("an attempt Claude Code sent again after an error event is not in its bill: %+v", u)
			}
			if d, ok := priceDisagreements[name]; ok {
				wantCost *= d.factor
				t.Logf("Claude Code's price differs: %s", d.why)
			}
			if math.Abs(cost-wantCost) > 0.01*wantCost {
				t.Errorf("cost $%.7f, Claude Code's $%.7f", cost, wantCost)
			}
			for model, u := range want.ModelUsage {
				got := tokens[Family(model)]
				for typ, w := range map[string]int{tokenInput: u.InputTokens, tokenOutput: u.OutputTokens,
					tokenCacheRead: u.CacheReadInputTokens, tokenCacheCreation: u.CacheCreationInputTokens} {
					if int(got[typ]) != w {
						t.Errorf("%s %s tokens: %v, Claude Code's %d", model, typ, got[typ], w)
					}
				}
			}
			if len(tokens) != len(want.ModelUsage) {
				t.Errorf("tokens of models %v, Claude Code's %v", tokens, want.ModelUsage)
			}
		})
	}
	if n < 15 {
		t.Fatalf("%d recorded sessions with Claude Code's own bill, want every -p recording", n)
	}
}

// brokenAttemptsSentAgain sums, by model, the usage of the answers an error event broke whose
// request the client sent again with the same messages.
func brokenAttemptsSentAgain(exchanges []*replay.Exchange) map[string]wire.Usage {
	out := map[string]wire.Usage{}
	for i, ex := range exchanges[:len(exchanges)-1] {
		resp, next := ex.Response, exchanges[i+1].Request
		if resp.ErrorType == "" || resp.Message == nil || ex.Request.Body == nil || next.Body == nil ||
			next.Body.HistoryHash != ex.Request.Body.HistoryHash {
			continue
		}
		u := out[resp.Message.Model]
		r := resp.Message.Usage
		u.InputTokens += r.InputTokens
		u.OutputTokens += r.OutputTokens
		u.CacheReadInputTokens += r.CacheReadInputTokens
		u.CacheCreationInputTokens += r.CacheCreationInputTokens
		out[resp.Message.Model] = u
	}
	return out
}

// replayed plays the recorded session name into a fresh Metrics and returns its registry.
func replayed(t *testing.T, name string) *prometheus.Registry {
	t.Helper()
	exchanges, err := replay.Load(filepath.Join("..", "testdata", "claude-code", name))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	tr := instrument.New(m, instrument.WithPricing(DefaultPrices().Cost))
	replay.Play(tr, exchanges)
	tr.Close(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	return reg
}

// TestRecordedServerToolsAndStreamErrors: the server tools answers ran count by tool, and an
// answer an error event cut counts with that error's type, not as a 200 that stopped for no
// reason.
func TestRecordedServerToolsAndStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		scenario, name, want string
	}{
		{"web_search", nameServerTools, `# HELP cctrace_server_tool_requests_total Requests of the API's own tools that answers ran and billed (usage.server_tool_use), by tool: web_search, web_fetch, code_execution.
# TYPE cctrace_server_tool_requests_total counter
cctrace_server_tool_requests_total{tool="code_execution"} 0
cctrace_server_tool_requests_total{tool="web_fetch"} 0
cctrace_server_tool_requests_total{tool="web_search"} 1
`},
		{"billing", nameServerTools, `# HELP cctrace_server_tool_requests_total Requests of the API's own tools that answers ran and billed (usage.server_tool_use), by tool: web_search, web_fetch, code_execution.
# TYPE cctrace_server_tool_requests_total counter
cctrace_server_tool_requests_total{tool="code_execution"} 1
cctrace_server_tool_requests_total{tool="web_fetch"} 1
cctrace_server_tool_requests_total{tool="web_search"} 0
`},
		{"stream_cut", nameRequests, `# HELP cctrace_requests_total API request attempts by model, request kind, HTTP status ("error" when none or the transport failed) and stop reason.
# TYPE cctrace_requests_total counter
cctrace_requests_total{code="200",kind="resumption",model="claude-opus-5-5",stop_reason="tool_use"} 1
cctrace_requests_total{code="200",kind="tool_results",model="claude-opus-5-5",stop_reason="end_turn"} 1
cctrace_requests_total{code="overloaded_error",kind="turn",model="claude-opus-5-5",stop_reason="none"} 1
`},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			if err := testutil.GatherAndCompare(replayed(t, tc.scenario), strings.NewReader(tc.want), tc.name); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRecordedInputByPart replays every recorded session: the input tokens by part add up, per
// cache label, exactly to the tokens counted by type (read to cache_read, write to
// cache_creation, uncached to input), and the recorded cache misses count by their cause.
func TestRecordedInputByPart(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	misses := map[string]float64{}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			reg := replayed(t, filepath.Base(dir))
			byType := map[string]float64{}
			byCache := map[string]float64{}
			for _, mf := range mustGather(t, reg) {
				for _, metric := range mf.GetMetric() {
					labels := map[string]string{}
					for _, l := range metric.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					v := metric.GetCounter().GetValue()
					switch mf.GetName() {
					case nameTokens:
						byType[labels["type"]] += v
					case nameInputByPart:
						byCache[labels["cache"]] += v
					case nameCacheMisses:
						misses[labels["cause"]] += v
					}
				}
			}
			for cache, typ := range map[string]string{cacheRead: tokenCacheRead, cacheWrite: tokenCacheCreation, cacheUncached: tokenInput} {
				// The billing recording's advisor sub-inference (usage.iterations) counts in
				// cctrace_tokens_total and is not part of the request's own input.
				if byCache[cache] > byType[typ] || (filepath.Base(dir) != "billing" && byCache[cache] != byType[typ]) {
					t.Errorf("input by part, %s: %v; tokens %s: %v", cache, byCache[cache], typ, byType[typ])
				}
			}
		})
	}
	t.Logf("cache misses by cause over the recordings: %v", misses)
	if misses["model"] != 1 || misses["tools"] != 1 {
		t.Errorf("cache misses by cause %v, want the model change and the tool list change among them", misses)
	}
}
