package summary

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// Bounds of what a chat record keeps of its request's anatomy: the store keeps many requests,
// and a request can have up to 64 parts (docs/turns.md, "What the turns page keeps").
const (
	maxAnatomyParts = 24 // the largest parts; the rest add up in one "other" part
	maxNewParts     = 12 // the largest parts of what was new
	maxBreakpoints  = 4  // the API's limit of cache_control markers per request
)

// Anatomy is what filled one request's input, as the tracker estimated it (docs/wire.md §9), and
// what was new in it since the previous request of its chain.
type Anatomy struct {
	// Parts are the request's parts in prompt order (tools, system, messages), each with its
	// bytes and estimated tokens; they add up to the request's whole input.
	Parts []AnatomyPart `json:"parts"`
	// ReadTo and WrittenTo are where, in the prompt, the cache read and the cache write ended:
	// "system", "messages[14]"; empty when nothing was.
	ReadTo    string `json:"cache_read_to,omitempty"`
	WrittenTo string `json:"cache_written_to,omitempty"`
	// Breakpoints are the request's cache_control markers, where each lies and its TTL:
	// "system[2] (5m)"; at most maxBreakpoints, as many as the API takes.
	Breakpoints []string `json:"cache_breakpoints,omitempty"`
	// Compared is true when there was a previous request to compare with; New is then what this
	// one carries beyond it, by part (bytes and blocks only), and Changes what changed in what
	// both carry, in plain words.
	Compared bool          `json:"compared,omitempty"`
	New      []AnatomyPart `json:"new,omitempty"`
	Changes  []string      `json:"changes,omitempty"`
	// CacheMiss is the cause of a cache miss ("" for none), with where, the tokens missed and,
	// when priced, their cost beyond a hit.
	CacheMiss       string   `json:"cache_miss,omitempty"`
	CacheMissWhere  string   `json:"cache_miss_where,omitempty"`
	CacheMissTokens int      `json:"cache_miss_tokens,omitempty"`
	CacheMissCost   *float64 `json:"cache_miss_cost_usd,omitempty"`
}

// AnatomyPart is one part of a request's input.
type AnatomyPart struct {
	Kind     string `json:"kind"`
	Name     string `json:"name,omitempty"`
	Bytes    int    `json:"bytes"`
	Blocks   int    `json:"blocks"`
	Read     int    `json:"cache_read,omitempty"`
	Write    int    `json:"cache_write,omitempty"`
	Uncached int    `json:"uncached,omitempty"`
}

// Tokens returns all the part's input tokens.
func (p AnatomyPart) Tokens() int { return p.Read + p.Write + p.Uncached }

// Label names the part in plain words: "the system prompt", "tool results: Read".
func (p AnatomyPart) Label() string { return PartLabel(p.Kind, p.Name) }

// Total returns the request's whole input, as its parts add up.
func (a *Anatomy) Total() int {
	n := 0
	for _, p := range a.Parts {
		n += p.Tokens()
	}
	return n
}

// anatomyOf makes what a chat record keeps of c's context, change and cache miss; nil when the
// tracker estimated none.
func anatomyOf(c *instrument.Chat) *Anatomy {
	if c.Context == nil {
		return nil
	}
	a := &Anatomy{}
	parts := make([]AnatomyPart, len(c.Context.Parts))
	for i, p := range c.Context.Parts {
		parts[i] = AnatomyPart{Kind: string(p.Kind), Name: p.Name, Bytes: p.Bytes, Blocks: p.Blocks,
			Read: p.CacheRead, Write: p.CacheWrite, Uncached: p.Uncached}
	}
	a.Parts = largest(parts, maxAnatomyParts, func(p AnatomyPart) int { return p.Tokens() })
	if p := c.Context.ReadTo; p != nil {
		a.ReadTo = p.String()
	}
	if p := c.Context.WrittenTo; p != nil {
		a.WrittenTo = p.String()
	}
	if b := c.Request.Body; b != nil {
		for _, bp := range b.Anatomy.Breakpoints[:min(len(b.Anatomy.Breakpoints), maxBreakpoints)] {
			a.Breakpoints = append(a.Breakpoints, bp.At.String()+" ("+bp.TTL+")")
		}
	}
	if ch := c.Change; ch != nil {
		a.Compared = true
		news := make([]AnatomyPart, len(ch.New))
		for i, p := range ch.New {
			news[i] = AnatomyPart{Kind: string(p.Kind), Name: p.Name, Bytes: p.Bytes, Blocks: p.Blocks}
		}
		a.New = largest(news, maxNewParts, func(p AnatomyPart) int { return p.Bytes })
		model := ""
		if b := c.Request.Body; b != nil {
			model = b.Model
		}
		a.Changes = changeWords(ch, model)
	}
	if m := c.CacheMiss; m != nil {
		a.CacheMiss, a.CacheMissWhere, a.CacheMissTokens = string(m.Cause), m.Where, m.Missed
		if m.Priced {
			cost := m.Cost
			a.CacheMissCost = &cost
		}
	}
	return a
}

// largest keeps the n parts of ps that weigh most, in their order, and adds the rest up in one
// part of kind "other" at the end.
func largest(ps []AnatomyPart, n int, weight func(AnatomyPart) int) []AnatomyPart {
	if len(ps) <= n {
		return ps
	}
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(weight(ps[b]), weight(ps[a])) })
	keep := make([]bool, len(ps))
	for _, i := range order[:n-1] {
		keep[i] = true
	}
	out := make([]AnatomyPart, 0, n)
	rest := AnatomyPart{Kind: string(wire.PartOther), Name: "more parts"}
	for i, p := range ps {
		if keep[i] {
			out = append(out, p)
			continue
		}
		rest.Bytes += p.Bytes
		rest.Blocks += p.Blocks
		rest.Read += p.Read
		rest.Write += p.Write
		rest.Uncached += p.Uncached
	}
	return append(out, rest)
}

// changeWords says what changed in ch, in a few plain sentences.
func changeWords(ch *instrument.Change, model string) []string {
	var out []string
	if ch.Model != "" {
		out = append(out, fmt.Sprintf("The model changed from %s to %s.", ch.Model, cmp.Or(model, "another")))
	}
	for _, s := range ch.System {
		out = append(out, fmt.Sprintf("System block %d (%s) %s.", s.Index, PartLabel(string(s.Part), ""), s.What))
	}
	if len(ch.ToolsAdded) > 0 {
		out = append(out, "Tool definitions added: "+strings.Join(ch.ToolsAdded, ", ")+".")
	}
	if len(ch.ToolsRemoved) > 0 {
		out = append(out, "Tool definitions removed: "+strings.Join(ch.ToolsRemoved, ", ")+".")
	}
	if len(ch.ToolsChanged) > 0 {
		out = append(out, "Tool definitions changed: "+strings.Join(ch.ToolsChanged, ", ")+".")
	}
	if ch.ToolsReordered {
		out = append(out, "The same tool definitions came in another order.")
	}
	if ch.EditedAt >= 0 {
		out = append(out, fmt.Sprintf("Message %d of the previous request (of %d) was changed or dropped: everything from there was sent anew.", ch.EditedAt, ch.PreviousMessages))
	}
	return out
}

// partLabels name the kinds of parts in plain words.
var partLabels = map[string]string{
	string(wire.PartBillingHeader):  "billing header",
	string(wire.PartIdentity):       "identity line",
	string(wire.PartSystemPrompt):   "system prompt",
	string(wire.PartAppendedPrompt): "appended system prompt",
	string(wire.PartBuiltinTools):   "built-in tool definitions",
	string(wire.PartMCPTools):       "MCP tool definitions",
	string(wire.PartDeferredTools):  "deferred tool definitions",
	string(wire.PartHuman):          "typed by a person",
	string(wire.PartClient):         "written by Claude Code",
	string(wire.PartAssistantText):  "earlier answers' text",
	string(wire.PartThinking):       "earlier answers' thinking",
	string(wire.PartToolUse):        "tool calls",
	string(wire.PartToolResult):     "tool results",
	string(wire.PartImage):          "images",
	string(wire.PartDocument):       "documents",
	string(wire.PartSystemMessage):  "system messages",
	string(wire.PartOther):          "other",
}

// PartLabel names a part of a request in plain words, its name after a colon: "tool results:
// Read", "MCP tool definitions: github", "written by Claude Code: claude_md".
func PartLabel(kind, name string) string {
	l := cmp.Or(partLabels[kind], kind)
	if name != "" {
		l += ": " + name
	}
	return l
}

// maxTitle bounds a session's title, in bytes.
const maxTitle = 120

// sessionTitle returns the title in the answer to c when c is Claude Code's title side request
// (a side request whose prompt is the title request's, docs/wire.md §4, answered with JSON text
// {"title": "…"}); "" otherwise.
func sessionTitle(c *instrument.Chat) string {
	if c.Kind != instrument.RequestAuxiliary || c.Context == nil || c.Response == nil || c.Response.Message == nil {
		return ""
	}
	asked := false
	for _, p := range c.Context.Parts {
		asked = asked || p.Kind == wire.PartClient && p.Name == wire.ClientTitle
	}
	var answer struct {
		Title string `json:"title"`
	}
	if !asked || json.Unmarshal([]byte(c.Response.Message.Text), &answer) != nil {
		return ""
	}
	t := strings.TrimSpace(strings.ToValidUTF8(answer.Title, ""))
	if len(t) > maxTitle {
		t = strings.ToValidUTF8(t[:maxTitle], "") + "…"
	}
	return t
}
