package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// personChat is a priced chat span of one person.
func personChat(trace byte, user, team string, in, out int) *instrument.Span {
	s := chatSpec{trace: trace, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 1000,
		status: 200, stop: "end_turn", usage: &wire.Usage{InputTokens: in, OutputTokens: out}}.span()
	s.User, s.Team = user, team
	return s
}

// TestPeopleAndTeams checks that tokens and cost are split by person and team, that both labels
// are capped with the rest counted as "other" and in cctrace_label_overflow_total, and that a
// request from nobody known is "unknown" with team "none", which take no place under the caps.
func TestPeopleAndTeams(t *testing.T) {
	m, reg := newMetrics(t, WithMaxUsers(2), WithMaxTeams(1))
	feed(m,
		personChat(1, "alice", "platform", 1000, 100),
		personChat(2, "bob", "search", 2000, 200),
		personChat(3, "key-0123456789abcdef", "", 3000, 300),
		personChat(4, "", "", 4000, 400),
		personChat(5, "alice", "platform", 1000, 100),
	)
	// Sonnet 4.5: $3 input, $15 output per million tokens.
	want := `# HELP cctrace_cost_usd_total Estimated cost in US dollars from the price table, by model, person and team.
# TYPE cctrace_cost_usd_total counter
cctrace_cost_usd_total{model="claude-sonnet-4-5-20250929",team="none",user="other"} 0.0135
cctrace_cost_usd_total{model="claude-sonnet-4-5-20250929",team="none",user="unknown"} 0.018
cctrace_cost_usd_total{model="claude-sonnet-4-5-20250929",team="other",user="bob"} 0.009
cctrace_cost_usd_total{model="claude-sonnet-4-5-20250929",team="platform",user="alice"} 0.009
# HELP cctrace_label_overflow_total Observations whose label value was past its label's cap and counted as "other", by label.
# TYPE cctrace_label_overflow_total counter
cctrace_label_overflow_total{label="team"} 1
cctrace_label_overflow_total{label="user"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameCost, nameLabelOverflow); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues(sonnet, tokenInput, "alice", "platform")); got != 2000 {
		t.Errorf("alice's input tokens = %v, want 2000", got)
	}
}

// TestUnknownPerson checks the labels of a request from nobody known.
func TestUnknownPerson(t *testing.T) {
	m, _ := newMetrics(t)
	feed(m, personChat(1, "", "", 10, 1))
	if got := testutil.ToFloat64(m.tokens.WithLabelValues(sonnet, tokenInput, "unknown", "none")); got != 10 {
		t.Errorf("input tokens of nobody known = %v, want 10", got)
	}
}

// TestTurnCost checks the turn cost histogram and that its buckets carry the turns' trace ids.
func TestTurnCost(t *testing.T) {
	m, reg := newMetrics(t)
	cheap, costly := turnSpan(1, "end_turn", 0, 1000), turnSpan(2, "end_turn", 0, 1000)
	cheap.Turn.Cost, costly.Turn.Cost = 0.02, 3
	feed(m, cheap, costly)
	var found []string
	for _, mf := range mustGather(t, reg) {
		if mf.GetName() != nameTurnCost {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 3.02 {
			t.Errorf("count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
		}
		for _, b := range h.GetBucket() {
			if ex := b.GetExemplar(); ex != nil {
				found = append(found, ex.GetLabel()[0].GetValue())
			}
		}
	}
	if !slices.Equal(found, []string{traceID(1).String(), traceID(2).String()}) {
		t.Errorf("exemplars %v, want the two turns' traces", found)
	}
}

// TestGenAIClientMetrics checks the OpenTelemetry GenAI client metrics: their Prometheus names,
// attributes and the conventions' buckets.
func TestGenAIClientMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	failed := chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 500, status: 529, errorType: "overloaded_error"}.span()
	failed.Status, failed.ErrorType = instrument.StatusError, "overloaded_error"
	feed(m,
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 1500, status: 200, stop: "end_turn",
			usage: &wire.Usage{InputTokens: 10, CacheReadInputTokens: 1000, CacheCreationInputTokens: 90, OutputTokens: 20}}.span(),
		failed,
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestCountTokens, start: 0, end: 100, status: 200, inputTokens: 5}.span(),
	)
	seen := map[string]bool{}
	for _, mf := range mustGather(t, reg) {
		switch mf.GetName() {
		case nameGenAITokenUsage:
			seen[mf.GetName()] = true
			sums := map[string]float64{}
			for _, met := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range met.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["gen_ai_operation_name"] != "chat" || labels["gen_ai_provider_name"] != "anthropic" || labels["gen_ai_request_model"] != sonnet {
					t.Errorf("token usage labels %v", labels)
				}
				sums[labels["gen_ai_token_type"]] = met.GetHistogram().GetSampleSum()
				if n := len(met.GetHistogram().GetBucket()); n != len(genAITokenBuckets) {
					t.Errorf("%d buckets, want the conventions' %d", n, len(genAITokenBuckets))
				}
			}
			if sums["input"] != 1100 || sums["output"] != 20 {
				t.Errorf("token sums %v, want input 1100 (cache included) and output 20", sums)
			}
		case nameGenAIOperationDuration:
			seen[mf.GetName()] = true
			var count uint64
			errored := false
			for _, met := range mf.GetMetric() {
				count += met.GetHistogram().GetSampleCount()
				for _, l := range met.GetLabel() {
					errored = errored || (l.GetName() == "error_type" && l.GetValue() == "overloaded_error")
				}
			}
			if count != 2 || !errored {
				t.Errorf("durations %d (want 2: count_tokens is no operation), error.type seen %v", count, errored)
			}
		}
	}
	if !seen[nameGenAITokenUsage] || !seen[nameGenAIOperationDuration] {
		t.Errorf("GenAI families gathered: %v", seen)
	}
}

// TestGenAIProviderName: gen_ai.provider.name on the metrics is the provider that answered, as on
// the spans.
func TestGenAIProviderName(t *testing.T) {
	m, reg := newMetrics(t)
	sp := chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 100, status: 200, stop: "end_turn",
		usage: &wire.Usage{InputTokens: 1, OutputTokens: 1}}.span()
	sp.Chat.Request.Provider = wire.ProviderBedrock
	feed(m, sp)
	for _, mf := range mustGather(t, reg) {
		if mf.GetName() != nameGenAIOperationDuration {
			continue
		}
		for _, met := range mf.GetMetric() {
			for _, l := range met.GetLabel() {
				if l.GetName() == "gen_ai_provider_name" && l.GetValue() != "aws.bedrock" {
					t.Errorf("gen_ai_provider_name %q, want aws.bedrock", l.GetValue())
				}
			}
		}
		return
	}
	t.Error("no operation duration gathered")
}

func TestConfigLoadedAndBudgetRefused(t *testing.T) {
	m, reg := newMetrics(t)
	m.ConfigLoaded("directory", nil)
	m.ConfigLoaded("directory", errors.New("directory.yaml:3: unknown key"))
	m.BudgetRefused("team", "monthly")
	want := `# HELP cctrace_config_last_reload_successful Whether the last load of each file cctrace rereads succeeded (1) or was refused (0).
# TYPE cctrace_config_last_reload_successful gauge
cctrace_config_last_reload_successful{file="directory"} 0
# HELP cctrace_config_reloads_total Loads of the files cctrace rereads while running (directory, budgets, access), by file and result (success, failure: the previous one stays in force).
# TYPE cctrace_config_reloads_total counter
cctrace_config_reloads_total{file="directory",result="failure"} 1
cctrace_config_reloads_total{file="directory",result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameReloads, nameReloadOK); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.budgetRefusals.WithLabelValues("team", "monthly")); got != 1 {
		t.Errorf("refusals = %v", got)
	}
}

// TestGenAIErrorTypeCapped checks that error.type, which the upstream chooses, is cleaned and
// capped, so that neither the series nor the attribute sets kept grow without bound.
func TestGenAIErrorTypeCapped(t *testing.T) {
	m, _ := newMetrics(t)
	for i := range defaultLabelCap + 20 {
		s := chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 500, status: 500}.span()
		s.Status, s.ErrorType = instrument.StatusError, fmt.Sprintf("invented_error_%d_%s", i, strings.Repeat("x", 300))
		feed(m, s)
	}
	m.genAI.mu.Lock()
	n := len(m.genAI.attrs)
	for k := range m.genAI.attrs {
		if len(k.errorType) > maxLabelBytes {
			t.Errorf("error type of %d bytes kept", len(k.errorType))
		}
	}
	m.genAI.mu.Unlock()
	if n > defaultLabelCap+1 {
		t.Errorf("%d attribute sets, want at most the cap and other", n)
	}
}
