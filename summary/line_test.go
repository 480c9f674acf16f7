package summary

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// The fmt forms below are how a turn's line was rendered before it was built with strconv and
// append; the line must not change by a byte.

func fmtLine(t *Turn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cctrace %s turn %d", ShortID(t.SessionID), t.Index)
	if t.Compaction != "" {
		fmt.Fprintf(&b, " (/compact %s)", t.Compaction)
	}
	fmt.Fprintf(&b, " · %s · %d req", fmtSeconds(t.Duration), t.Requests)
	if t.Retries > 0 {
		fmt.Fprintf(&b, " (%d retried)", t.Retries)
	}
	if tools := fmtToolList(t.ToolCounts); tools != "" {
		fmt.Fprintf(&b, " · %s", tools)
		if f := fmtToolList(t.ToolFailures); f != "" {
			fmt.Fprintf(&b, " (failed %s)", f)
		} else if t.ToolErrors > 0 {
			fmt.Fprintf(&b, " (%d failed)", t.ToolErrors)
		}
	}
	switch {
	case t.Subagents == 1:
		b.WriteString(" · 1 subagent")
	case t.Subagents > 1:
		fmt.Fprintf(&b, " · %d subagents", t.Subagents)
	}
	fmt.Fprintf(&b, " · %s", fmtTokenText(t.Usage))
	if r, ok := CacheHitRatio(t.Usage); ok {
		fmt.Fprintf(&b, " · hit %s", fmtPercent(r))
	}
	fmt.Fprintf(&b, " · %s", fmtCostText(t.Cost, t.Unpriced))
	if t.Outcome != "" {
		fmt.Fprintf(&b, " · %s", t.Outcome)
	}
	if t.Compacted != "" {
		fmt.Fprintf(&b, " · compacted (%s)", t.Compacted)
	}
	if t.Prompt != "" {
		p := strings.Join(strings.Fields(t.Prompt), " ")
		if r := []rune(p); len(r) > 60 {
			p = string(r[:60]) + "…"
		}
		fmt.Fprintf(&b, " · %q", p)
	}
	return b.String()
}

func fmtTokenText(t wire.Usage) string {
	parts := ""
	if t.CacheReadInputTokens > 0 || t.CacheCreationInputTokens > 0 {
		parts = fmt.Sprintf(" (%s uncached + %s cache read + %s cache write)", fmtCount(t.InputTokens), fmtCount(t.CacheReadInputTokens), fmtCount(t.CacheCreationInputTokens))
	}
	return fmt.Sprintf("input %s%s · output %s", fmtCount(t.TotalInput()), parts, fmtCount(t.OutputTokens))
}

func fmtCostText(usd float64, unpriced int) string {
	if unpriced > 0 && usd == 0 {
		return "cost ?"
	}
	s := fmtDollars(usd)
	if unpriced > 0 {
		s += fmt.Sprintf(" +%d unpriced", unpriced)
	}
	return s
}

func fmtDollars(usd float64) string {
	if usd >= 10 {
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}

func fmtCount(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 100_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}

func fmtPercent(r float64) string { return fmt.Sprintf("%.0f%%", r*100) }

func fmtSeconds(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.1fs", s)
	}
	m := int(s) / 60
	return fmt.Sprintf("%dm%02ds", m, int(s)-m*60)
}

func fmtToolList(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for n, c := range counts {
		if c > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s×%d", n, counts[n])
	}
	return strings.Join(parts, " ")
}

// odd are numbers at and around the edges of every format.
var odd = []float64{
	0, math.Copysign(0, -1), 0.04, 0.05, 0.95, 9.99995, 10, 59.94, 59.95, 59.99, 60, 61, 119.5, 3599.9,
	1e9, 1e19, -0.04, -1, -61, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, math.SmallestNonzeroFloat64,
}

var oddInts = []int{0, 1, -1, 9, 10, 999, 1000, 1049, 1050, 99_949, 99_950, 99_999, 100_000, 999_499, 999_500,
	999_999, 1_000_000, 1_049_999, 1_050_000, math.MaxInt, math.MinInt}

func TestFormatsMatchFmt(t *testing.T) {
	for _, f := range odd {
		if got, want := Seconds(f), fmtSeconds(f); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", f, got, want)
		}
		if got, want := Dollars(f), fmtDollars(f); got != want {
			t.Errorf("Dollars(%v) = %q, want %q", f, got, want)
		}
		if got, want := Percent(f), fmtPercent(f); got != want {
			t.Errorf("Percent(%v) = %q, want %q", f, got, want)
		}
		for _, n := range oddInts {
			if got, want := CostText(f, n), fmtCostText(f, n); got != want {
				t.Errorf("CostText(%v, %d) = %q, want %q", f, n, got, want)
			}
		}
	}
	for _, n := range oddInts {
		if got, want := Count(n), fmtCount(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	for _, c := range []map[string]int{nil, {}, {"a": 0}, {"b": 1, "a": 2, "z": 0, "Ä": -1}, {"x\xff": 3}, manyTools(40)} {
		if got, want := ToolList(c), fmtToolList(c); got != want {
			t.Errorf("ToolList(%v) = %q, want %q", c, got, want)
		}
	}
}

func manyTools(n int) map[string]int {
	m := make(map[string]int, n)
	for i := range n {
		m[fmt.Sprintf("mcp__server__tool_%02d", i)] = i
	}
	return m
}

func TestLineMatchesFmt(t *testing.T) {
	end := t0
	turns := []Turn{
		{},
		{SessionID: "0123456789ab", Index: 2, End: &end, Duration: 1.25, Outcome: "end_turn", Totals: instrument.Totals{Requests: 1,
			Usage: usage(12, 3400, 120_000, 1_500_000), Cost: 12.345}},
		{SessionID: "s", Index: 7, Duration: 125, Totals: instrument.Totals{Requests: 9, Retries: 2, ToolCounts: map[string]int{"Read": 1, "Agent": 2, "Bash": 3},
			ToolFailures: map[string]int{"Bash": 1, "Read": 0}, ToolErrors: 1, Subagents: 1, Usage: usage(5, 0, 0, 0),
			Cost: 0.5, Unpriced: 3}, Outcome: "max_tokens", Compacted: "auto", Compaction: "manual"},
		{Index: -3, Duration: math.NaN(), Totals: instrument.Totals{Requests: -1, Retries: 1, ToolCounts: map[string]int{"Read": 0}, ToolErrors: 4,
			Subagents: 5, Usage: usage(-5, 0, 10, 0), Cost: math.Inf(1), Unpriced: 1},
			Prompt: "  say \"hi\"\n\tto\x00 the ünïcode   world " + strings.Repeat("é", 70)},
		{SessionID: "ÿÿÿÿÿ", Duration: 3599.99, Totals: instrument.Totals{ToolCounts: manyTools(20), ToolFailures: manyTools(3), Usage: usage(0, 0, 0, 1)},
			Prompt: "\xff\xfe broken utf-8"},
	}
	for i := range turns {
		if got, want := string(appendLine(nil, &turns[i])), fmtLine(&turns[i]); got != want {
			t.Errorf("turn %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzLineMatchesFmt(f *testing.F) {
	f.Add("0123456789ab", 2, 1.25, 1, 0, "Bash", 2, 1, 0, 12, 3400, 120_000, 1_500_000, 12.345, 0, "end_turn", "", "", "explain")
	f.Add("", -1, 125.0, 9, 2, "", 0, 0, 3, 0, 0, 0, 0, 0.0, 1, "", "manual", "auto", "")
	f.Fuzz(func(t *testing.T, session string, index int, duration float64, requests, retries int, tool string,
		calls, failures, subagents, in, out, read, write int, cost float64, unpriced int, outcome, compaction, compacted, prompt string) {
		turn := Turn{
			SessionID: session, Index: index, Duration: duration, Totals: instrument.Totals{Requests: requests, Retries: retries,
				ToolCounts: map[string]int{tool: calls, tool + "2": calls - 1}, ToolFailures: map[string]int{tool: failures},
				ToolErrors: failures, Subagents: subagents, Usage: usage(in, out, read, write),
				Cost: cost, Unpriced: unpriced}, Outcome: outcome, Compaction: compaction, Compacted: compacted, Prompt: prompt,
		}
		if got, want := string(appendLine(nil, &turn)), fmtLine(&turn); got != want {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
	})
}

func TestLineDoesNotAllocate(t *testing.T) {
	turn := Turn{SessionID: "0123456789ab", Index: 2, Duration: 1.25, Totals: instrument.Totals{Requests: 3, Retries: 1,
		ToolCounts: map[string]int{"Read": 1, "Bash": 2}, ToolFailures: map[string]int{"Bash": 1}, Subagents: 2,
		Usage: usage(12, 3400, 120_000, 1_500_000), Cost: 0.5}, Outcome: "end_turn"}
	buf := appendLine(nil, &turn)
	if a := testing.AllocsPerRun(100, func() { buf = appendLine(buf[:0], &turn) }); a != 0 {
		t.Errorf("appendLine into a large enough buffer allocates %v times, want 0", a)
	}
}

// usage is wire.Usage of input, output, cache read and cache write tokens.
func usage(in, out, read, write int) wire.Usage {
	return wire.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: read, CacheCreationInputTokens: write}
}
