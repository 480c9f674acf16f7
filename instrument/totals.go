package instrument

import (
	"iter"
	"slices"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Totals adds up what ran under a turn or a subagent, or in a session. The tracker sums turns'
// and subagents' once, as spans start and end, and every view reads them; a sink may sum a
// session's spans with Add too. The zero value is nothing.
type Totals struct {
	Requests   int `json:"requests"` // API request attempts
	Retries    int `json:"retries"`  // attempts after a call's first
	ToolCalls  int `json:"tool_calls"`
	ToolErrors int `json:"tool_errors"` // tool results with is_error set (not interrupted or abandoned calls)
	Subagents  int `json:"subagents"`
	// ToolCounts and ToolFailures count ToolCalls and ToolErrors by tool name; nil before the
	// first.
	ToolCounts   map[string]int `json:"tools,omitempty"`
	ToolFailures map[string]int `json:"tool_failures,omitempty"`
	// Usage sums the answers' usage; Cost prices them, and Unpriced counts those with usage
	// that the price table could not price (see WithPricing).
	Usage    wire.Usage `json:"tokens"`
	Cost     float64    `json:"cost_usd"`
	Unpriced int        `json:"unpriced_requests,omitempty"`
	// Models lists the models that answered (else those requested), in order of first use.
	Models []string `json:"models,omitempty"`
}

// Add counts what s adds at the moment it is handed to a sink, started or ended: a subagent as
// it starts; a tool call as it starts, and once more as failed when it ends with an error
// result; a request attempt, with its answer's usage, cost and model, as it ends.
func (t *Totals) Add(s *Span) {
	started := s.End.IsZero()
	switch {
	case s.Subagent != nil && started:
		t.Subagents++
	case s.Tool != nil && started:
		t.ToolCalls++
		t.ToolCounts = addCount(t.ToolCounts, s.Tool.Name, 1)
	case s.Tool != nil && s.Tool.Outcome == ToolError:
		t.ToolErrors++
		t.ToolFailures = addCount(t.ToolFailures, s.Tool.Name, 1)
	case s.Chat != nil && !started:
		c := s.Chat
		t.Requests++
		if c.Attempt > 0 {
			t.Retries++
		}
		switch {
		case c.Priced:
			t.Cost += c.Cost
		case c.Unpriced:
			t.Unpriced++
		}
		model := ""
		if c.Response != nil && c.Response.Message != nil {
			t.Usage = addUsage(t.Usage, c.Response.Message.Usage)
			model = c.Response.Message.Model
		}
		if model == "" && c.Request.Body != nil {
			model = c.Request.Body.Model
		}
		if model != "" && !slices.Contains(t.Models, model) {
			t.Models = append(t.Models, model)
		}
	}
}

// Merge adds o to t: the totals of several sessions.
func (t *Totals) Merge(o *Totals) {
	t.Requests += o.Requests
	t.Retries += o.Retries
	t.ToolCalls += o.ToolCalls
	t.ToolErrors += o.ToolErrors
	t.Subagents += o.Subagents
	for name, n := range o.ToolCounts {
		t.ToolCounts = addCount(t.ToolCounts, name, n)
	}
	for name, n := range o.ToolFailures {
		t.ToolFailures = addCount(t.ToolFailures, name, n)
	}
	t.Usage = addUsage(t.Usage, o.Usage)
	t.Cost += o.Cost
	t.Unpriced += o.Unpriced
	for _, m := range o.Models {
		if !slices.Contains(t.Models, m) {
			t.Models = append(t.Models, m)
		}
	}
}

func addCount(m map[string]int, name string, n int) map[string]int {
	if m == nil {
		m = make(map[string]int)
	}
	m[name] += n
	return m
}

func addUsage(a, b wire.Usage) wire.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadInputTokens += b.CacheReadInputTokens
	a.CacheCreationInputTokens += b.CacheCreationInputTokens
	a.CacheCreation5m += b.CacheCreation5m
	a.CacheCreation1h += b.CacheCreation1h
	a.ServerToolUse.WebSearch += b.ServerToolUse.WebSearch
	a.ServerToolUse.WebFetch += b.ServerToolUse.WebFetch
	a.ServerToolUse.CodeExecution += b.ServerToolUse.CodeExecution
	return a
}

// counts yields the totals a span of turn tr and subagent run sub counts into: the turn's while
// it is open, and those of sub and of the runs that started it whose spans have not ended (an
// ended span is out already, with the totals it had). Either may be nil.
func counts(tr *turn, sub *subagentRun) iter.Seq[*Totals] {
	return func(yield func(*Totals) bool) {
		if tr != nil && !tr.ended && !yield(&tr.totals.Totals) {
			return
		}
		for run := sub; run != nil; run = run.parent {
			if !run.ended && !yield(&run.totals.Totals) {
				return
			}
		}
	}
}

// turnTotals is what a span of turn tr carries as Span.TurnTotals: the turn's running totals
// while it is open, else nil.
func turnTotals(tr *turn) *Totals {
	if tr == nil || tr.ended {
		return nil
	}
	return &tr.totals.Totals
}

// price sets the cost of chat's answer (see WithPricing): its usage, and the sub-inferences its
// usage reports beside it (wire.Iteration), each at its own model's rates.
func (t *Tracker) price(chat *Chat) {
	if t.cfg.price == nil || chat.Response == nil || chat.Response.Message == nil {
		return
	}
	msg := chat.Response.Message
	cost, ok := t.priceAnswer(chat, msg.Usage)
	for _, it := range msg.Iterations {
		u := it.Usage
		u.InferenceGeo = msg.Usage.InferenceGeo // where the request ran, the sub-inference ran
		var usd float64
		var priced bool
		if it.Model != "" {
			usd, priced = t.cfg.price(it.Model, u)
		} else {
			usd, priced = t.priceAnswer(chat, u)
		}
		cost, ok = cost+usd, ok && priced
	}
	if ok {
		chat.Cost, chat.Priced = cost, true
	}
	chat.Unpriced = !ok
}

// priceAnswer prices u by the model requested or, when the price table does not know it (an
// alias a gateway maps), by the model that answered.
func (t *Tracker) priceAnswer(chat *Chat, u wire.Usage) (float64, bool) {
	if b := chat.Request.Body; b != nil && b.Model != "" {
		if usd, ok := t.cfg.price(b.Model, u); ok {
			return usd, true
		}
	}
	if m := chat.Response.Message.Model; m != "" {
		return t.cfg.price(m, u)
	}
	return 0, false
}
