// Package summary is the sink that needs no backend: it keeps the most recent turns in memory
// (served as JSON at /api/turns), and prints one line per finished turn and a session summary
// when cctrace stops.
package summary

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/wire"
)

// Store is an instrument.Sink that remembers recent turns and their spans. It is safe for
// concurrent use: the tracker writes, HTTP handlers read. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	out      io.Writer
	maxTurns int
	maxSpans int
	turns    []*Turn                       // finished and open turns, oldest first
	byTrace  map[instrument.TraceID]*Turn  // turns still in the ring
	open     map[instrument.SpanID]*Record // spans not ended yet
	sessions map[string]*SessionTotals
}

var _ instrument.Sink = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithOutput sets where per-turn lines go. Default: nowhere (nil writer).
func WithOutput(w io.Writer) Option { return func(s *Store) { s.out = w } }

// WithMaxTurns bounds how many turns are kept. Default 200.
func WithMaxTurns(n int) Option { return func(s *Store) { s.maxTurns = n } }

// WithMaxSpans bounds how many spans one turn keeps. Default 5000; the rest are counted only.
func WithMaxSpans(n int) Option { return func(s *Store) { s.maxSpans = n } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		maxTurns: 200,
		maxSpans: 5000,
		byTrace:  make(map[instrument.TraceID]*Turn),
		open:     make(map[instrument.SpanID]*Record),
		sessions: make(map[string]*SessionTotals),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Turn is one turn as served at /api/turns.
type Turn struct {
	TraceID    string         `json:"trace_id"`
	SessionID  string         `json:"session_id"`
	Index      int            `json:"index"`
	Start      time.Time      `json:"start"`
	End        *time.Time     `json:"end,omitempty"`
	Duration   float64        `json:"duration_seconds"`
	Outcome    string         `json:"outcome,omitempty"`
	Compaction string         `json:"compaction,omitempty"`
	Requests   int            `json:"requests"`
	Retries    int            `json:"retries"`
	ToolCalls  int            `json:"tool_calls"`
	ToolErrors int            `json:"tool_errors"`
	Subagents  int            `json:"subagents"`
	Tools      map[string]int `json:"tools,omitempty"`
	Models     []string       `json:"models,omitempty"`
	Tokens     Tokens         `json:"tokens"`
	Prompt     string         `json:"prompt,omitempty"`
	Spans      []*Record      `json:"spans"`
	// DroppedSpans counts spans beyond the per-turn bound.
	DroppedSpans int `json:"dropped_spans,omitempty"`
}

// Tokens is token usage in the four kinds Anthropic reports.
type Tokens struct {
	Input         int `json:"input"`
	Output        int `json:"output"`
	CacheRead     int `json:"cache_read"`
	CacheCreation int `json:"cache_creation"`
}

// Record is one span of a turn.
type Record struct {
	SpanID     string     `json:"span_id"`
	ParentID   string     `json:"parent_id,omitempty"`
	Kind       string     `json:"kind"`
	Name       string     `json:"name"`
	Start      time.Time  `json:"start"`
	End        *time.Time `json:"end,omitempty"`
	Status     string     `json:"status,omitempty"`
	ErrorType  string     `json:"error_type,omitempty"`
	Agent      string     `json:"agent,omitempty"`
	Model      string     `json:"model,omitempty"`
	Request    string     `json:"request_kind,omitempty"`
	Attempt    int        `json:"attempt,omitempty"`
	StatusCode int        `json:"http_status,omitempty"`
	StopReason string     `json:"stop_reason,omitempty"`
	Tokens     *Tokens    `json:"tokens,omitempty"`
	Compacted  bool       `json:"compacted,omitempty"`
	Tool       string     `json:"tool,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
}

// SessionTotals sums a session's turns for the closing summary.
type SessionTotals struct {
	ID          string
	Turns       int
	Requests    int
	Compactions int
	Tokens      Tokens
	// Blocks counts content blocks by role and type, each counted once when first seen.
	Blocks map[instrument.BlockKey]int
}

// SpanStarted implements instrument.Sink.
func (s *Store) SpanStarted(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.turnFor(sp)
	if t == nil {
		return
	}
	r := &Record{
		SpanID: sp.ID.String(),
		Kind:   kindName(sp.Kind),
		Name:   sp.Name,
		Start:  sp.Start,
		Agent:  sp.Agent,
	}
	if sp.Parent.IsValid() {
		r.ParentID = sp.Parent.String()
	}
	if len(t.Spans) >= s.maxSpans {
		t.DroppedSpans++
		return
	}
	t.Spans = append(t.Spans, r)
	s.open[sp.ID] = r
}

// SpanEnded implements instrument.Sink.
func (s *Store) SpanEnded(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.open[sp.ID]
	delete(s.open, sp.ID)
	if r == nil {
		// Started while its turn was out of the ring, or dropped: only the totals count.
		s.countSession(sp)
		return
	}
	end := sp.End
	r.End = &end
	r.Status = statusName(sp.Status)
	r.ErrorType = sp.ErrorType
	switch {
	case sp.Chat != nil:
		fillChat(r, sp.Chat)
	case sp.Tool != nil:
		r.Tool, r.Outcome = sp.Tool.Name, sp.Tool.Outcome
	}
	s.countSession(sp)
	if sp.Kind == instrument.KindTurn {
		t := s.byTrace[sp.TraceID]
		if t == nil {
			return
		}
		fillTurn(t, sp)
		if s.out != nil {
			fmt.Fprintln(s.out, Line(t))
		}
	}
}

// SessionsActive implements instrument.Sink; the store does not need it.
func (s *Store) SessionsActive(int) {}

// turnFor returns the turn record of sp's trace, creating it for a turn root. Spans of traces
// that are not turns (standalone side requests) get a record of their own.
func (s *Store) turnFor(sp *instrument.Span) *Turn {
	if t := s.byTrace[sp.TraceID]; t != nil {
		return t
	}
	if sp.Parent.IsValid() {
		return nil // its turn already left the ring
	}
	t := &Turn{
		TraceID:   sp.TraceID.String(),
		SessionID: sp.SessionID,
		Index:     sp.TurnIndex,
		Start:     sp.Start,
	}
	s.turns = append(s.turns, t)
	s.byTrace[sp.TraceID] = t
	if len(s.turns) > s.maxTurns {
		old := s.turns[0]
		s.turns = s.turns[1:]
		for id, tr := range s.byTrace {
			if tr == old {
				delete(s.byTrace, id)
			}
		}
		for _, r := range old.Spans {
			for id, o := range s.open {
				if o == r {
					delete(s.open, id)
				}
			}
		}
	}
	return t
}

func (s *Store) countSession(sp *instrument.Span) {
	tot := s.sessions[sp.SessionID]
	if tot == nil {
		tot = &SessionTotals{ID: sp.SessionID, Blocks: make(map[instrument.BlockKey]int)}
		s.sessions[sp.SessionID] = tot
	}
	switch {
	case sp.Kind == instrument.KindTurn:
		tot.Turns++
	case sp.Chat != nil:
		tot.Requests++
		if sp.Chat.Compaction != nil {
			tot.Compactions++
		}
		for k, n := range sp.Chat.NewBlocks {
			tot.Blocks[k] += n
		}
		if r := sp.Chat.Response; r != nil && r.Message != nil {
			addTokens(&tot.Tokens, r.Message.Usage)
		}
	}
}

// Turns returns copies of the kept turns, newest first, optionally only those of one session.
func (s *Store) Turns(session string) []Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Turn, 0, len(s.turns))
	for i := len(s.turns) - 1; i >= 0; i-- {
		t := s.turns[i]
		if session != "" && t.SessionID != session {
			continue
		}
		c := *t
		c.Spans = make([]*Record, len(t.Spans))
		for j, r := range t.Spans {
			rc := *r
			c.Spans[j] = &rc
		}
		if c.End == nil {
			c.Duration = time.Since(c.Start).Seconds()
		}
		out = append(out, c)
	}
	return out
}

// Sessions returns the totals of every session seen, by id.
func (s *Store) Sessions() []SessionTotals {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SessionTotals, 0, len(s.sessions))
	for _, t := range s.sessions {
		c := *t
		c.Blocks = make(map[instrument.BlockKey]int, len(t.Blocks))
		for k, v := range t.Blocks {
			c.Blocks[k] = v
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ServeHTTP serves the kept turns as JSON, newest first; ?session=ID filters one session.
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Turns []Turn `json:"turns"`
	}{s.Turns(r.URL.Query().Get("session"))})
}

// Line renders a finished turn as one terminal line.
func Line(t *Turn) string {
	var b strings.Builder
	sid := t.SessionID
	if len(sid) > 8 {
		sid = sid[:8]
	}
	fmt.Fprintf(&b, "cctrace [%s] turn %d", sid, t.Index)
	if t.Compaction != "" {
		fmt.Fprintf(&b, " (compaction, %s)", t.Compaction)
	}
	fmt.Fprintf(&b, " · %.1fs · %d req", t.Duration, t.Requests)
	if t.Retries > 0 {
		fmt.Fprintf(&b, " (%d retried)", t.Retries)
	}
	if len(t.Tools) > 0 {
		names := make([]string, 0, len(t.Tools))
		for n := range t.Tools {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s×%d", n, t.Tools[n])
		}
		fmt.Fprintf(&b, " · tools %s", strings.Join(parts, " "))
		if t.ToolErrors > 0 {
			fmt.Fprintf(&b, " (%d failed)", t.ToolErrors)
		}
	}
	if t.Subagents > 0 {
		fmt.Fprintf(&b, " · %d subagent(s)", t.Subagents)
	}
	fmt.Fprintf(&b, " · tokens in %d out %d cache read %d write %d", t.Tokens.Input, t.Tokens.Output, t.Tokens.CacheRead, t.Tokens.CacheCreation)
	if t.Outcome != "" {
		fmt.Fprintf(&b, " · %s", t.Outcome)
	}
	if t.Prompt != "" {
		p := strings.Join(strings.Fields(t.Prompt), " ")
		if len(p) > 60 {
			p = p[:60] + "…"
		}
		fmt.Fprintf(&b, " · %q", p)
	}
	return b.String()
}

func fillTurn(t *Turn, sp *instrument.Span) {
	end := sp.End
	t.End = &end
	t.Start = sp.Start
	t.Duration = sp.End.Sub(sp.Start).Seconds()
	tt := sp.Turn
	if tt == nil {
		return
	}
	t.Outcome = tt.Outcome
	t.Compaction = tt.Compaction
	t.Requests, t.Retries = tt.Requests, tt.Retries
	t.ToolCalls, t.ToolErrors, t.Subagents = tt.ToolCalls, tt.ToolErrors, tt.Subagents
	t.Tools = tt.ToolCounts
	t.Models = tt.Models
	t.Prompt = tt.Prompt
	t.Tokens = Tokens{}
	addTokens(&t.Tokens, tt.Usage)
}

func fillChat(r *Record, c *instrument.Chat) {
	r.Request = string(c.Kind)
	r.Attempt = c.Attempt
	r.Compacted = c.Compacted
	if b := c.Request.Body; b != nil {
		r.Model = b.Model
	}
	resp := c.Response
	if resp == nil {
		return
	}
	r.StatusCode = resp.Status
	if m := resp.Message; m != nil {
		if m.Model != "" {
			r.Model = m.Model
		}
		r.StopReason = m.StopReason
		tok := Tokens{}
		addTokens(&tok, m.Usage)
		r.Tokens = &tok
	}
}

func addTokens(t *Tokens, u wire.Usage) {
	t.Input += u.InputTokens
	t.Output += u.OutputTokens
	t.CacheRead += u.CacheReadInputTokens
	t.CacheCreation += u.CacheCreationInputTokens
}

func kindName(k instrument.SpanKind) string {
	switch k {
	case instrument.KindTurn:
		return "turn"
	case instrument.KindChat:
		return "chat"
	case instrument.KindTool:
		return "tool"
	case instrument.KindSubagent:
		return "subagent"
	}
	return "unknown"
}

func statusName(c instrument.StatusCode) string {
	switch c {
	case instrument.StatusOK:
		return "ok"
	case instrument.StatusError:
		return "error"
	}
	return ""
}
