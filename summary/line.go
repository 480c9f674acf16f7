package summary

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
)

// appendLine appends a finished turn as one compact terminal line to b:
//
//	cctrace 1a2b3c4d turn 3 · 12.4s · 5 req (1 retried) · Bash×2 Read×1 (failed Bash×1) · 1 subagent · input 48.4k (1.2k uncached + 45.1k cache read + 2.0k cache write) · output 340 · hit 94% · $0.0123 · end_turn · compacted (auto)
//
// The store renders each finished turn into a buffer it reuses, so that printing a line does
// not allocate.
func appendLine(b []byte, t *Turn) []byte {
	b = append(b, "cctrace "...)
	b = append(b, ShortID(t.SessionID)...)
	b = append(b, " turn "...)
	b = strconv.AppendInt(b, int64(t.Index), 10)
	if t.Compaction != "" {
		b = append(b, " (/compact "...)
		b = append(b, t.Compaction...)
		b = append(b, ')')
	}
	b = append(b, sep...)
	b = appendSeconds(b, t.Duration)
	b = append(b, sep...)
	b = strconv.AppendInt(b, int64(t.Requests), 10)
	b = append(b, " req"...)
	if t.Retries > 0 {
		b = append(b, " ("...)
		b = strconv.AppendInt(b, int64(t.Retries), 10)
		b = append(b, " retried)"...)
	}
	if anyCounted(t.ToolCounts) {
		b = append(b, sep...)
		b = appendToolList(b, t.ToolCounts)
		if anyCounted(t.ToolFailures) {
			b = append(b, " (failed "...)
			b = appendToolList(b, t.ToolFailures)
			b = append(b, ')')
		} else if t.ToolErrors > 0 {
			b = append(b, " ("...)
			b = strconv.AppendInt(b, int64(t.ToolErrors), 10)
			b = append(b, " failed)"...)
		}
	}
	switch {
	case t.Subagents == 1:
		b = append(b, " · 1 subagent"...)
	case t.Subagents > 1:
		b = append(b, sep...)
		b = strconv.AppendInt(b, int64(t.Subagents), 10)
		b = append(b, " subagents"...)
	}
	b = append(b, sep...)
	b = appendTokenText(b, t.Usage)
	if r, ok := CacheHitRatio(t.Usage); ok {
		b = append(b, " · hit "...)
		b = appendPercent(b, r)
	}
	b = append(b, sep...)
	b = appendCostText(b, t.Cost, t.Unpriced)
	if t.Outcome != "" {
		b = append(b, sep...)
		b = append(b, t.Outcome...)
	}
	if t.Compacted != "" {
		b = append(b, " · compacted ("...)
		b = append(b, t.Compacted...)
		b = append(b, ')')
	}
	if t.Prompt != "" {
		p := strings.Join(strings.Fields(t.Prompt), " ")
		if r := []rune(p); len(r) > 60 {
			p = string(r[:60]) + "…"
		}
		b = append(b, sep...)
		b = strconv.AppendQuote(b, p)
	}
	return b
}

// sep separates the parts of a line.
const sep = " · "

// WriteSummary writes the closing summary of every session that made requests: its totals and
// cost, then what its messages were made of. With more than one such session a grand total
// follows.
//
//	cctrace session 1a2b3c4d: 3 turns · 12 req (1 retried) · 1 compaction · 9 tool calls (1 failed) · 1 subagent · input 129k (1.2k uncached + 120k cache read + 8.0k cache write) · output 3.4k · hit 93% · $0.1234
//	cctrace session 1a2b3c4d: 3 prompts, 6 rounds of tool results · answers: 2 with text, 5 with tool calls, 1 with text and tool calls · 2 side requests (titles, token counts)
func (s *Store) WriteSummary(w io.Writer) error {
	var all SessionTotals
	n := 0
	sessions := s.Sessions()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].First.Before(sessions[j].First) })
	for _, st := range sessions {
		if st.Requests == 0 || (st.Turns == 0 && st.Usage == (wire.Usage{})) {
			continue // nothing but free probes, e.g. count_tokens outside any session
		}
		n++
		id := ShortID(st.ID)
		if _, err := fmt.Fprintf(w, "cctrace session %s: %s\n", id, totalsText(st)); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
		if _, err := fmt.Fprintf(w, "cctrace session %s: %s\n", id, MessagesText(st.Messages)); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
		all.Turns += st.Turns
		all.Compactions += st.Compactions
		all.Merge(&st.Totals)
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
	fmt.Fprintf(&b, " · %s", TokenText(st.Usage))
	if r, ok := CacheHitRatio(st.Usage); ok {
		fmt.Fprintf(&b, " · hit %s", Percent(r))
	}
	fmt.Fprintf(&b, " · %s", CostText(st.Cost, st.Unpriced))
	return b.String()
}

// MessagesText says in words what a session's messages were, leaving out what it had none of:
// "3 prompts, 6 rounds of tool results · answers: 2 with text, 5 with tool calls, 1 with text
// and tool calls · 2 side requests (titles, token counts)".
func MessagesText(m Messages) string {
	var sent, answers []string
	if m.HumanText > 0 {
		sent = append(sent, plural(m.HumanText, "prompt"))
	}
	if m.ToolResults > 0 {
		sent = append(sent, plural(m.ToolResults, "round")+" of tool results")
	}
	for _, a := range []struct {
		n    int
		with string
	}{{m.AssistantText, "with text"}, {m.ToolCalls, "with tool calls"}, {m.TextAndToolCalls, "with text and tool calls"}} {
		if a.n > 0 {
			answers = append(answers, strconv.Itoa(a.n)+" "+a.with)
		}
	}
	var parts []string
	if len(sent) > 0 {
		parts = append(parts, strings.Join(sent, ", "))
	}
	if len(answers) > 0 {
		parts = append(parts, "answers: "+strings.Join(answers, ", "))
	}
	if m.SideRequests > 0 {
		parts = append(parts, plural(m.SideRequests, "side request")+" (titles, token counts)")
	}
	if len(parts) == 0 {
		return "no messages"
	}
	return strings.Join(parts, " · ")
}

// TokenText renders token usage: "input 48.4k (1.2k uncached + 45.1k cache read + 2.0k cache
// write) · output 340". Input is every input token, as on the status line and in the spans'
// gen_ai.usage.input_tokens; the parts name what was not read from the cache as "uncached".
func TokenText(u wire.Usage) string { return string(appendTokenText(nil, u)) }

// InputOutputText is the short form of TokenText where space is scarce (the status line, a
// waterfall row): "input 48.4k · output 340".
func InputOutputText(u wire.Usage) string {
	return "input " + Count(u.TotalInput()) + " · output " + Count(u.OutputTokens)
}

func appendTokenText(b []byte, u wire.Usage) []byte {
	b = append(b, "input "...)
	b = appendCount(b, u.TotalInput())
	if u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
		b = append(b, " ("...)
		b = appendCount(b, u.InputTokens)
		b = append(b, " uncached + "...)
		b = appendCount(b, u.CacheReadInputTokens)
		b = append(b, " cache read + "...)
		b = appendCount(b, u.CacheCreationInputTokens)
		b = append(b, " cache write)"...)
	}
	b = append(b, " · output "...)
	return appendCount(b, u.OutputTokens)
}

// CostText renders an estimated cost: "$0.0123", with "+N unpriced" when some requests used a
// model the price table does not know, and "cost ?" when none could be priced.
func CostText(usd float64, unpriced int) string { return string(appendCostText(nil, usd, unpriced)) }

func appendCostText(b []byte, usd float64, unpriced int) []byte {
	if unpriced > 0 && usd == 0 {
		return append(b, "cost ?"...)
	}
	b = appendDollars(b, usd)
	if unpriced > 0 {
		b = append(b, " +"...)
		b = strconv.AppendInt(b, int64(unpriced), 10)
		b = append(b, " unpriced"...)
	}
	return b
}

// Dollars formats a USD amount with four decimals below $10 and two above.
func Dollars(usd float64) string { return string(appendDollars(nil, usd)) }

func appendDollars(b []byte, usd float64) []byte {
	b = append(b, '$')
	if usd >= 10 {
		return strconv.AppendFloat(b, usd, 'f', 2, 64)
	}
	return strconv.AppendFloat(b, usd, 'f', 4, 64)
}

// Count formats a token count: exact below 1000, then 1.2k, 45.1k, 120k, 1.5M.
func Count(n int) string { return string(appendCount(nil, n)) }

func appendCount(b []byte, n int) []byte {
	switch {
	case n < 1000:
		return strconv.AppendInt(b, int64(n), 10)
	case n < 100_000:
		return append(strconv.AppendFloat(b, float64(n)/1e3, 'f', 1, 64), 'k')
	case n < 1_000_000:
		return append(strconv.AppendFloat(b, float64(n)/1e3, 'f', 0, 64), 'k')
	default:
		return append(strconv.AppendFloat(b, float64(n)/1e6, 'f', 1, 64), 'M')
	}
}

// Percent formats a ratio in [0,1] as a whole percentage.
func Percent(r float64) string { return string(appendPercent(nil, r)) }

func appendPercent(b []byte, r float64) []byte {
	return append(strconv.AppendFloat(b, r*100, 'f', 0, 64), '%')
}

// Seconds formats a duration in seconds: "0.4s", "12.4s", "3m05s".
func Seconds(s float64) string { return string(appendSeconds(nil, s)) }

func appendSeconds(b []byte, s float64) []byte {
	if s < 60 {
		return append(strconv.AppendFloat(b, s, 'f', 1, 64), 's')
	}
	m := int(s) / 60
	b = strconv.AppendInt(b, int64(m), 10)
	b = append(b, 'm')
	sec := int(s) - m*60
	if sec >= 0 && sec < 10 {
		b = append(b, '0') // as %02d pads
	}
	b = strconv.AppendInt(b, int64(sec), 10)
	return append(b, 's')
}

// ToolList renders tool counts sorted by name: "Bash×2 Read×1".
func ToolList(counts map[string]int) string { return string(appendToolList(nil, counts)) }

// anyCounted reports whether ToolList(counts) is not empty.
func anyCounted(counts map[string]int) bool {
	for _, c := range counts {
		if c > 0 {
			return true
		}
	}
	return false
}

func appendToolList(b []byte, counts map[string]int) []byte {
	var few [16]string // a turn's tools usually fit: no allocation for the names
	names := few[:0]
	for n, c := range counts {
		if c > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for i, n := range names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, n...)
		b = append(b, "×"...)
		b = strconv.AppendInt(b, int64(counts[n]), 10)
	}
	return b
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ShortID is how a session or trace ID is shown to a person: its first 8 characters, enough to
// tell the sessions of a machine apart, or "-" when there is none.
func ShortID(id string) string {
	if id == "" {
		return "-"
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
