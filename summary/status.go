package summary

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/limits"
)

// SessionStatus is what a status line shows of one session: its newest turn, live, and how full
// the main agent's context is. The zero value is a session with nothing to show.
type SessionStatus struct {
	SessionID string `json:"session_id"`
	// Turn is the session's newest turn: the running one, or the last that ended; nil before
	// the first.
	Turn *TurnStatus `json:"turn,omitempty"`
	// Context is the main agent's context as of its last answered request; nil before the first.
	Context *Context `json:"context,omitempty"`
	// Limit is the subscription window that binds the session's account now, with the
	// session's share of its growth; nil when the account reports none (see WithLimits).
	Limit *limits.Window `json:"limit,omitempty"`
}

// TurnStatus is a turn's figures without its spans. While the turn runs they are running sums,
// as in Turn. The zero value is an empty turn.
type TurnStatus struct {
	TraceID    string     `json:"trace_id"`
	Index      int        `json:"index"`
	Running    bool       `json:"running"`
	Duration   float64    `json:"duration_seconds"`
	Requests   int        `json:"requests"`
	Retries    int        `json:"retries"`
	ToolCalls  int        `json:"tool_calls"`
	ToolErrors int        `json:"tool_errors"`
	Subagents  int        `json:"subagents"`
	Tokens     wire.Usage `json:"tokens"`
	Cost       float64    `json:"cost_usd"`
	Unpriced   int        `json:"unpriced_requests,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
}

// Context is the size of the main agent's context: every input token of its last answered
// request (uncached, cache reads and cache writes), against the model's context window. Claude
// Code compacts the conversation automatically as it nears the window. The zero value is an
// empty context of unknown size.
type Context struct {
	Tokens int    `json:"tokens"`
	Window int    `json:"window"`
	Model  string `json:"model,omitempty"`
}

// Default context windows: what ContextWindow answers.
const (
	DefaultContextWindow = 200_000
	LongContextWindow    = 1_000_000
)

// ContextWindow is the context window of a request to model with the given anthropic-beta
// values: 1M tokens for a model id with Claude Code's "[1m]" suffix or a request that asks for
// the long context beta ("context-1m-…"), else 200k. Claude Code knows its models' windows
// better (its status line input carries context_window_size); this is for when nothing else
// says.
func ContextWindow(model string, betas []string) int {
	if strings.HasSuffix(strings.ToLower(model), "[1m]") {
		return LongContextWindow
	}
	for _, b := range betas {
		if strings.HasPrefix(b, "context-1m-") {
			return LongContextWindow
		}
	}
	return DefaultContextWindow
}

// noteContext keeps the context size of a finished request of the main agent's chain. A
// compaction's summarisation carries the history it replaces: the request after it shows the
// context that remains. Side requests and subagents have contexts of their own.
func (tot *SessionTotals) noteContext(c *instrument.Chat) {
	switch c.Kind {
	case instrument.RequestTurn, instrument.RequestToolResults, instrument.RequestResumption:
	default:
		return
	}
	u := chatUsage(c)
	if u == nil || u.TotalInput() == 0 {
		return
	}
	model := c.Response.Message.Model
	if b := c.Request.Body; b != nil && b.Model != "" {
		model = b.Model
	}
	tot.Context = Context{Tokens: u.TotalInput(), Window: ContextWindow(model, c.Request.Headers.Beta), Model: model}
}

// Status returns the status of one session, and false when the store has not seen it or scope
// may not see it.
func (s *Store) Status(session string, scope Scope) (SessionStatus, bool) {
	limit := s.sessionLimit(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	tot, ok := s.sessions[session]
	if !ok || !scope.Allows(tot.User, tot.Team) {
		return SessionStatus{}, false
	}
	st := SessionStatus{SessionID: session, Limit: limit}
	if tot.Context.Tokens > 0 {
		c := tot.Context
		st.Context = &c
	}
	for i := len(s.turns) - 1; i >= 0; i-- {
		t := s.turns[i]
		if t.SessionID != session || t.Root != "turn" {
			continue
		}
		ts := TurnStatus{
			TraceID: t.TraceID, Index: t.Index, Running: t.Running(), Duration: t.Duration,
			Requests: t.Requests, Retries: t.Retries, ToolCalls: t.ToolCalls, ToolErrors: t.ToolErrors,
			Subagents: t.Subagents, Tokens: t.Usage, Cost: t.Cost, Unpriced: t.Unpriced, Outcome: t.Outcome,
		}
		if ts.Running {
			ts.Duration = s.now().Sub(t.Start).Seconds()
		}
		st.Turn = &ts
		break
	}
	return st, true
}

// ServeStatus serves the status of the session named by the request's {id} path value as JSON
// (mount it at /api/sessions/{id}/status); 404 when the store has not seen that session, or the
// viewer (ScopeFrom the request's context) may not see it, as on the session pages.
func (s *Store) ServeStatus(w http.ResponseWriter, r *http.Request) {
	st, ok := s.Status(r.PathValue("id"), ScopeFrom(r.Context()))
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		st.SessionID = r.PathValue("id")
	}
	_ = json.NewEncoder(w).Encode(st)
}
