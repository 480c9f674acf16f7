package summary

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Line renders a finished turn as one compact terminal line:
//
//	cctrace 1a2b3c4d turn 3 · 12.4s · 5 req (1 retried) · Bash×2 Read×1 (Bash 1 failed) · 1 subagent · in 1.2k out 340 cache r 45.1k w 2.0k · hit 94% · $0.0123 · end_turn · compacted (auto)
func Line(t *Turn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cctrace %s turn %d", shortID(t.SessionID), t.Index)
	if t.Compaction != "" {
		fmt.Fprintf(&b, " (/compact %s)", t.Compaction)
	}
	fmt.Fprintf(&b, " · %s · %d req", Seconds(t.Duration), t.Requests)
	if t.Retries > 0 {
		fmt.Fprintf(&b, " (%d retried)", t.Retries)
	}
	if tools := ToolList(t.Tools); tools != "" {
		fmt.Fprintf(&b, " · %s", tools)
		if f := ToolList(t.ToolFailures); f != "" {
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
	fmt.Fprintf(&b, " · %s", TokenText(t.Tokens))
	if r, ok := t.Tokens.CacheHitRatio(); ok {
		fmt.Fprintf(&b, " · hit %s", Percent(r))
	}
	fmt.Fprintf(&b, " · %s", CostText(t.Cost, t.Unpriced))
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

// WriteSummary writes the closing summary of every session that made requests: its totals and
// cost, then what its messages were made of. With more than one such session a grand total
// follows.
//
//	cctrace session 1a2b3c4d: 3 turns · 12 req (1 retried) · 1 compaction · 9 tool calls (1 failed) · 1 subagent · in 1.2k out 3.4k cache r 120k w 8.0k · hit 93% · $0.1234
//	cctrace session 1a2b3c4d: messages · 3 human text, 6 tool results, 2 assistant text, 5 tool calls, 1 text+tool calls · 2 side requests
func (s *Store) WriteSummary(w io.Writer) error {
	var all SessionTotals
	n := 0
	sessions := s.Sessions()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].First.Before(sessions[j].First) })
	for _, st := range sessions {
		if st.Requests == 0 || (st.Turns == 0 && st.Tokens == (Tokens{})) {
			continue // nothing but free probes, e.g. count_tokens outside any session
		}
		n++
		id := shortID(st.ID)
		if _, err := fmt.Fprintf(w, "cctrace session %s: %s\n", id, totalsText(st)); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
		if _, err := fmt.Fprintf(w, "cctrace session %s: messages · %s\n", id, MessagesText(st.Messages)); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
		all.Turns += st.Turns
		all.Requests += st.Requests
		all.Retries += st.Retries
		all.Compactions += st.Compactions
		all.ToolCalls += st.ToolCalls
		all.ToolErrors += st.ToolErrors
		all.Subagents += st.Subagents
		all.Tokens.add(st.Tokens)
		all.Cost += st.Cost
		all.Unpriced += st.Unpriced
	}
	if n > 1 {
		if _, err := fmt.Fprintf(w, "cctrace total of %d sessions: %s\n", n, totalsText(all)); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
	}
	return nil
}

func totalsText(st SessionTotals) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %d req", plural(st.Turns, "turn"), st.Requests)
	if st.Retries > 0 {
		fmt.Fprintf(&b, " (%d retried)", st.Retries)
	}
	if st.Compactions > 0 {
		fmt.Fprintf(&b, " · %s", plural(st.Compactions, "compaction"))
	}
	if st.ToolCalls > 0 {
		fmt.Fprintf(&b, " · %s", plural(st.ToolCalls, "tool call"))
		if st.ToolErrors > 0 {
			fmt.Fprintf(&b, " (%d failed)", st.ToolErrors)
		}
	}
	if st.Subagents > 0 {
		fmt.Fprintf(&b, " · %s", plural(st.Subagents, "subagent"))
	}
	fmt.Fprintf(&b, " · %s", TokenText(st.Tokens))
	if r, ok := st.Tokens.CacheHitRatio(); ok {
		fmt.Fprintf(&b, " · hit %s", Percent(r))
	}
	fmt.Fprintf(&b, " · %s", CostText(st.Cost, st.Unpriced))
	return b.String()
}

// MessagesText renders the dissection of a session's messages, e.g.
// "3 human text, 6 tool results, 2 assistant text, 5 tool calls, 1 text+tool calls · 2 side requests".
func MessagesText(m Messages) string {
	s := fmt.Sprintf("%d human text, %d tool results, %d assistant text, %d tool calls, %d text+tool calls",
		m.HumanText, m.ToolResults, m.AssistantText, m.ToolCalls, m.TextAndToolCalls)
	if m.SideRequests > 0 {
		s += fmt.Sprintf(" · %s", plural(m.SideRequests, "side request"))
	}
	return s
}

// TokenText renders token usage compactly: "in 1.2k out 340 cache r 45.1k w 2.0k".
func TokenText(t Tokens) string {
	return fmt.Sprintf("in %s out %s cache r %s w %s", Count(t.Input), Count(t.Output), Count(t.CacheRead), Count(t.CacheCreation))
}

// CostText renders an estimated cost: "$0.0123", with "+N unpriced" when some requests used a
// model the price table does not know, and "cost ?" when none could be priced.
func CostText(usd float64, unpriced int) string {
	if unpriced > 0 && usd == 0 {
		return "cost ?"
	}
	s := Dollars(usd)
	if unpriced > 0 {
		s += fmt.Sprintf(" +%d unpriced", unpriced)
	}
	return s
}

// Dollars formats a USD amount with four decimals below $10 and two above.
func Dollars(usd float64) string {
	if usd >= 10 {
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}

// Count formats a token count: exact below 1000, then 1.2k, 45.1k, 120k, 1.5M.
func Count(n int) string {
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

// Percent formats a ratio in [0,1] as a whole percentage.
func Percent(r float64) string { return fmt.Sprintf("%.0f%%", r*100) }

// Seconds formats a duration in seconds: "0.4s", "12.4s", "3m05s".
func Seconds(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.1fs", s)
	}
	m := int(s) / 60
	return fmt.Sprintf("%dm%02ds", m, int(s)-m*60)
}

// ToolList renders tool counts sorted by name: "Bash×2 Read×1".
func ToolList(counts map[string]int) string {
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

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func shortID(id string) string {
	if id == "" {
		return "-"
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
