package e2e

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/metrics"
)

// Claude Code's own bill is the oracle of cctrace's: `claude -p --output-format json` reports
// the session's cost (total_cost_usd) and its tokens by model (modelUsage), and cctrace's metrics
// must say the same of the same traffic.

// cliBill is what `claude -p --output-format json` reports of its own bill: for a resumed
// session (--resume, --continue), the session's totals so far.
type cliBill struct {
	TotalCost  float64                  `json:"total_cost_usd"`
	ModelUsage map[string]cliModelUsage `json:"modelUsage"`
}

type cliModelUsage struct {
	InputTokens              int `json:"inputTokens"`
	OutputTokens             int `json:"outputTokens"`
	CacheReadInputTokens     int `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int `json:"cacheCreationInputTokens"`
}

// bill is cost and tokens by model family and token type, as cctrace's metrics count them.
type bill struct {
	cost   float64
	tokens map[string]map[string]float64 // family, type
}

// metricLine is one sample of the Prometheus text format: name, labels, value.
var metricLine = regexp.MustCompile(`^([a-z_]+)\{([^}]*)\} (\S+)`)

var metricLabel = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)

// cctraceBill reads cctrace's bill so far off its /metrics.
func cctraceBill(t *testing.T, metricsURL string) bill {
	t.Helper()
	b := bill{tokens: map[string]map[string]float64{}}
	for line := range strings.Lines(get(t, metricsURL+"/metrics")) {
		m := metricLine.FindStringSubmatch(line)
		if m == nil || (m[1] != "cctrace_cost_usd_total" && m[1] != "cctrace_tokens_total") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		labels := map[string]string{}
		for _, l := range metricLabel.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		if m[1] == "cctrace_cost_usd_total" {
			b.cost += v
			continue
		}
		family := metrics.Family(labels["model"])
		if b.tokens[family] == nil {
			b.tokens[family] = map[string]float64{}
		}
		b.tokens[family][labels["type"]] += v
	}
	return b
}

// minus returns what b counts beyond before.
func (b bill) minus(before bill) bill {
	out := bill{cost: b.cost - before.cost, tokens: map[string]map[string]float64{}}
	for family, types := range b.tokens {
		for typ, v := range types {
			if d := v - before.tokens[family][typ]; d != 0 {
				if out.tokens[family] == nil {
					out.tokens[family] = map[string]float64{}
				}
				out.tokens[family][typ] = d
			}
		}
	}
	return out
}

func (b bill) String() string {
	var parts []string
	for family, types := range b.tokens {
		parts = append(parts, fmt.Sprintf("%s %v", family, types))
	}
	sort.Strings(parts)
	return fmt.Sprintf("$%.7f %s", b.cost, strings.Join(parts, "; "))
}

// expected turns the CLI's bill into cctrace's terms, with what cctrace counts and the CLI does
// not: an attempt that an error event broke after the upstream reported its usage, and that the
// CLI sent again with the same messages (served shows it so), is billed by the upstream and
// counted by cctrace, and left out of the CLI's modelUsage and total_cost_usd. factor scales the
// CLI's cost where its price is not the pricing page's (a cloud's regional premium, see
// providerCase.premium).
func expected(t *testing.T, cli cliBill, served []fakeapi.Served, factor float64) bill {
	t.Helper()
	want := bill{cost: cli.TotalCost * factor, tokens: map[string]map[string]float64{}}
	add := func(model string, u fakeapi.Usage) {
		family := metrics.Family(model)
		if want.tokens[family] == nil {
			want.tokens[family] = map[string]float64{}
		}
		for typ, n := range map[string]int{"input": u.InputTokens, "output": u.OutputTokens,
			"cache_read": u.CacheReadInputTokens, "cache_creation": u.CacheCreationInputTokens} {
			if n != 0 {
				want.tokens[family][typ] += float64(n)
			}
		}
	}
	for model, u := range cli.ModelUsage {
		add(model, fakeapi.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens})
	}
	for i, sv := range served {
		if sv.Status != 200 || sv.ErrorType == "" || sv.Path != "/v1/messages" {
			continue
		}
		for _, next := range served[i+1:] {
			if next.Path != "/v1/messages" || next.Header.Get("X-Claude-Code-Session-Id") != sv.Header.Get("X-Claude-Code-Session-Id") ||
				next.Header.Get("X-Claude-Code-Agent-Id") != sv.Header.Get("X-Claude-Code-Agent-Id") {
				continue
			}
			if next.Messages == sv.Messages {
				add(sv.Model, sv.Usage)
				c, _ := metrics.DefaultPrices().Cost(sv.Model, toWire(sv.Usage))
				want.cost += c
				t.Logf("an attempt an error event broke and Claude Code sent again is not in its bill: %+v", sv.Usage)
			}
			break
		}
	}
	return want
}

// checkBill waits until cctrace's bill of what ran since before (read off metricsURL) is the
// CLI's: the cost within 1%, the tokens by model and type exactly.
func checkBill(t *testing.T, metricsURL string, before bill, want bill) {
	t.Helper()
	checkBillOf(t, func() bill { return cctraceBill(t, metricsURL).minus(before) }, want)
}

// checkBillOf is checkBill of the bill that read returns.
func checkBillOf(t *testing.T, read func() bill, want bill) {
	t.Helper()
	var got bill
	harness.Eventually(t, "cctrace's bill to be Claude Code's", func() error {
		got = read()
		if math.Abs(got.cost-want.cost) > 0.01*want.cost {
			return fmt.Errorf("cctrace's bill %v, Claude Code's %v", got, want)
		}
		if !maps.EqualFunc(got.tokens, want.tokens, maps.Equal) {
			return fmt.Errorf("tokens: cctrace's bill %v, Claude Code's %v", got, want)
		}
		return nil
	})
}

// plus returns what b and o count together.
func (b bill) plus(o bill) bill {
	out := bill{cost: b.cost + o.cost, tokens: map[string]map[string]float64{}}
	for _, x := range []bill{b, o} {
		for family, types := range x.tokens {
			if out.tokens[family] == nil {
				out.tokens[family] = map[string]float64{}
			}
			for typ, v := range types {
				out.tokens[family][typ] += v
			}
		}
	}
	return out
}

// sample sums the samples of the metric name on metricsURL whose labels include match.
func sample(t *testing.T, metricsURL, name string, match map[string]string) float64 {
	t.Helper()
	var sum float64
	for line := range strings.Lines(get(t, metricsURL+"/metrics")) {
		m := metricLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, l := range metricLabel.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if v, err := strconv.ParseFloat(m[3], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}

func toWire(u fakeapi.Usage) wire.Usage {
	return wire.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens, CacheCreation5m: u.CacheCreation5m, CacheCreation1h: u.CacheCreation1h}
}
