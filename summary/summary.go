// Package summary is the sink that needs no backend: it keeps the most recent turns in memory
// (served as JSON at /api/turns and rendered by internal/ui), prints one line per finished turn,
// and writes a session summary when cctrace stops.
package summary

import (
	"cmp"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/limits"
)

// Store is an instrument.Sink that remembers recent turns and their spans. It is safe for
// concurrent use: the tracker writes, HTTP handlers read. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	out      io.Writer
	now      func() time.Time
	maxTurns int
	maxSpans int
	turns    []*Turn                       // finished and open turns, oldest first
	byTrace  map[instrument.TraceID]*Turn  // turns still in the ring
	open     map[instrument.SpanID]*record // spans not ended yet
	sessions map[string]*SessionTotals
	// line is the buffer each finished turn's line is rendered into before it is written.
	line []byte
	// spend reports what people and teams spent, for /api/turns (WithSpend); nil: nothing.
	spend func() Spend
	// limits reports a session's representative window (WithLimits); nil: none.
	limits func(session string) (limits.Window, bool)
	// ended is handed every turn as it ends (WithTurnEnded); nil: none.
	ended func(Turn)
	// titles keeps the titles Claude Code gives sessions (WithTitles).
	titles bool
}

// maxLineBuffer bounds the line buffer the store keeps between turns.
const maxLineBuffer = 4 << 10

var _ instrument.Sink = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithOutput sets where per-turn lines go. Default: nowhere (nil writer).
func WithOutput(w io.Writer) Option { return func(s *Store) { s.out = w } }

// WithMaxTurns bounds how many turns are kept. Default 200.
func WithMaxTurns(n int) Option { return func(s *Store) { s.maxTurns = n } }

// WithMaxSpans bounds how many spans one turn keeps. Default 5000; the rest are counted only.
func WithMaxSpans(n int) Option { return func(s *Store) { s.maxSpans = n } }

// WithClock sets the clock that times turns still running. Default: time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithSpend sets where /api/turns takes the spend of people and teams it shows beside the
// turns. Default: none is shown.
func WithSpend(spend func() Spend) Option { return func(s *Store) { s.spend = spend } }

// WithTurnEnded hands ended a copy of every turn, spans included, as its root span ends (a turn,
// a side request of its own, a part of a turn handed off): history keeps them. ended is called
// with the store's lock held, on the tracker's goroutine: it must only queue. Default: none.
func WithTurnEnded(ended func(Turn)) Option { return func(s *Store) { s.ended = ended } }

// WithTitles keeps the title Claude Code gives each session (the answer to its title side
// request), which says what the session is about: content, like a prompt, so kept only when
// content capture is on. Default: not kept.
func WithTitles(on bool) Option { return func(s *Store) { s.titles = on } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		now:      time.Now,
		maxTurns: 200,
		maxSpans: 5000,
		byTrace:  make(map[instrument.TraceID]*Turn),
		open:     make(map[instrument.SpanID]*record),
		sessions: make(map[string]*SessionTotals),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Turn is one turn as served at /api/turns. Its totals are the tracker's: while the turn runs
// (End is nil), as of the turn's last span the store saw.
type Turn struct {
	TraceID   string `json:"trace_id"`
	SessionID string `json:"session_id"`
	// User and Team are who the turn is attributed to: the person of the request that opened it.
	User string `json:"user,omitempty"`
	Team string `json:"team,omitempty"`
	// Project is the last element of the working directory Claude Code reported on the turn's
	// first request that named one; empty when none did.
	Project  string     `json:"project,omitempty"`
	Index    int        `json:"index"`
	Start    time.Time  `json:"start"`
	End      *time.Time `json:"end,omitempty"`
	Duration float64    `json:"duration_seconds"`
	// Root is the kind of the trace's root span: "turn", or "chat" for a side request that no
	// turn adopted.
	Root    string `json:"root"`
	Outcome string `json:"outcome,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	// Compaction is "manual" when the turn is a /compact summarisation.
	Compaction string `json:"compaction,omitempty"`
	// Compacted is the trigger ("auto", "manual") of a compaction the tracker recognised on one
	// of this turn's requests; empty when there was none.
	Compacted string `json:"compacted,omitempty"`
	instrument.Totals
	Prompt string    `json:"prompt,omitempty"`
	Spans  []*Record `json:"spans"`
	// DroppedSpans counts spans beyond the per-turn bound.
	DroppedSpans int `json:"dropped_spans,omitempty"`

	// endAt is what End first points to: the end is set once, and never changes after.
	endAt time.Time
}

// Running reports whether the turn has not ended yet.
func (t *Turn) Running() bool { return t.End == nil }

// CacheHitRatio is cache_read / (input + cache_read + cache_creation), and false when there was
// no input at all.
func CacheHitRatio(u wire.Usage) (float64, bool) {
	total := u.TotalInput()
	if total == 0 {
		return 0, false
	}
	return float64(u.CacheReadInputTokens) / float64(total), true
}

// Record is one span of a turn. The zero value is an empty record.
type Record struct {
	SpanID     string      `json:"span_id"`
	ParentID   string      `json:"parent_id,omitempty"`
	Kind       string      `json:"kind"`
	Name       string      `json:"name"`
	Start      time.Time   `json:"start"`
	End        *time.Time  `json:"end,omitempty"`
	Status     string      `json:"status,omitempty"`
	ErrorType  string      `json:"error_type,omitempty"`
	Agent      string      `json:"agent,omitempty"`
	Model      string      `json:"model,omitempty"`
	Request    string      `json:"request_kind,omitempty"`
	Attempt    int         `json:"attempt,omitempty"`
	StatusCode int         `json:"http_status,omitempty"`
	StopReason string      `json:"stop_reason,omitempty"`
	Tokens     *wire.Usage `json:"tokens,omitempty"`
	// Cost is the estimated USD cost of a chat span; nil when it had no usage or its model is
	// not in the price table.
	Cost      *float64 `json:"cost_usd,omitempty"`
	Compacted bool     `json:"compacted,omitempty"`
	// Compaction is the trigger of a compaction recognised on this request.
	Compaction string `json:"compaction,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	// Subagent is the subagent type of a subagent span.
	Subagent   string `json:"subagent,omitempty"`
	Background bool   `json:"background,omitempty"`
	// SubagentTokens and SubagentCost are a subagent span's own: what its requests used and
	// cost (nil when none was priced), which its chat spans also show one by one.
	SubagentTokens *wire.Usage `json:"subagent_tokens,omitempty"`
	SubagentCost   *float64    `json:"subagent_cost_usd,omitempty"`
	// Anatomy is what filled a chat span's input and what was new in it; nil when the answer
	// carried no usage.
	Anatomy *Anatomy `json:"anatomy,omitempty"`
}

// Running reports whether the span has not ended yet.
func (r *Record) Running() bool { return r.End == nil }

// record is a Record with room for what its pointer fields point to, so that a span costs the
// store one allocation. Those values are set once, when the span ends, and never change after:
// copies handed out by Turns may share them.
type record struct {
	Record
	end   time.Time
	usage wire.Usage
	cost  float64
}

// Messages counts the messages of a session by kind: user messages by what they carry, and
// assistant responses by whether they hold text, tool calls or both. Retries are not counted
// again. The zero value counts nothing.
type Messages struct {
	HumanText        int `json:"human_text"`
	ToolResults      int `json:"tool_results"`
	AssistantText    int `json:"assistant_text"`
	ToolCalls        int `json:"tool_calls"`
	TextAndToolCalls int `json:"text_and_tool_calls"`
	// SideRequests counts auxiliary requests (titles, classifiers), the requests tools made
	// and token counts.
	SideRequests int `json:"side_requests"`
}

// SessionTotals sums a session's spans for the closing summary and the sessions page.
type SessionTotals struct {
	ID string
	// User and Team are who the session's first attributed span was from.
	User, Team string
	// Project is the last element of the working directory the session's requests named first
	// (Turn.Project); empty when none did.
	Project     string
	First, Last time.Time
	Turns       int
	Compactions int
	instrument.Totals
	Messages Messages
	// Blocks counts content blocks by role and type, each counted once when first seen.
	Blocks map[instrument.BlockKey]int
	// Context is the main agent's context as of its last answered request.
	Context Context
	// FirstPrompt is the preview of the session's first human prompt; empty unless content
	// capture is on.
	FirstPrompt string
	// Title is the title Claude Code gave the session (WithTitles); empty when none was seen.
	Title string
}

// SpanStarted implements instrument.Sink.
func (s *Store) SpanStarted(sp *instrument.Span) {
	if !sp.TraceID.IsValid() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tot := s.session(sp.SessionID)
	tot.seen(sp.Start)
	tot.Add(sp)
	if tot.User == "" && sp.User != "" {
		tot.User, tot.Team = sp.User, sp.Team
	}
	t := s.turnFor(sp)
	if t == nil {
		return
	}
	t.follow(sp)
	rec := &record{Record: Record{
		SpanID: sp.ID.String(),
		Kind:   kindName(sp.Kind),
		Name:   sp.Name,
		Start:  sp.Start,
		Agent:  sp.Agent,
	}}
	r := &rec.Record
	if sp.Parent.IsValid() {
		if parent := s.open[sp.Parent]; parent != nil {
			r.ParentID = parent.SpanID // the same hex string: no need to encode it again
		} else {
			r.ParentID = sp.Parent.String()
		}
	}
	switch {
	case sp.Chat != nil:
		r.Request = string(sp.Chat.Kind)
		r.Attempt = sp.Chat.Attempt
		if b := sp.Chat.Request.Body; b != nil {
			r.Model = b.Model
			if p := project(b.WorkingDirectory); p != "" {
				t.Project = cmp.Or(t.Project, p)
				tot.Project = cmp.Or(tot.Project, p)
			}
		}
	case sp.Tool != nil:
		r.Tool = sp.Tool.Name
	case sp.Subagent != nil:
		r.Subagent, r.Background = sp.Subagent.Type, sp.Subagent.Background
	}
	if len(t.Spans) >= s.maxSpans {
		t.DroppedSpans++
		return
	}
	if t.Spans == nil {
		t.Spans = make([]*Record, 0, 4) // a turn has a root and a chat span at least
	}
	t.Spans = append(t.Spans, r)
	s.open[sp.ID] = rec
}

// SpanEnded implements instrument.Sink. Requests outside any session (no trace) are not kept.
func (s *Store) SpanEnded(sp *instrument.Span) {
	if !sp.TraceID.IsValid() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countSession(sp)
	t := s.byTrace[sp.TraceID]
	if t != nil {
		t.follow(sp)
	}
	if t != nil && sp.Chat != nil && t.Running() {
		if cp := sp.Chat.Compaction; cp != nil {
			t.Compacted = cp.Trigger
		}
	}
	rec := s.open[sp.ID]
	delete(s.open, sp.ID)
	if rec != nil {
		r := &rec.Record
		rec.end = sp.End
		r.End = &rec.end
		r.Status = statusName(sp.Status)
		r.ErrorType = sp.ErrorType
		switch {
		case sp.Chat != nil:
			fillChat(rec, sp.Chat)
			if sp.Chat.Priced {
				rec.cost = sp.Chat.Cost
				r.Cost = &rec.cost
			}
		case sp.Tool != nil:
			r.Tool, r.Outcome = sp.Tool.Name, string(sp.Tool.Outcome)
		case sp.Subagent != nil:
			// A subagent's own tokens and cost: its requests', apart from its turn's.
			tot := &sp.Subagent.Totals
			if tot.Requests > 0 {
				rec.usage = tot.Usage
				r.SubagentTokens = &rec.usage
			}
			if tot.Requests > 0 && tot.Unpriced == 0 {
				rec.cost = tot.Cost
				r.SubagentCost = &rec.cost
			}
		}
	}
	if t == nil || !isRoot(sp) {
		return
	}
	fillTurn(t, sp)
	if s.ended != nil {
		s.ended(t.clone(sp.End))
	}
	if sp.Kind == instrument.KindTurn && s.out != nil {
		s.line = append(appendLine(s.line[:0], t), '\n')
		_, _ = s.out.Write(s.line) // one Write, as fmt.Fprintln did; errors were ignored then too
		if cap(s.line) > maxLineBuffer {
			s.line = nil
		}
	}
}

// SessionsActive implements instrument.Sink; the store does not need it.
func (s *Store) SessionsActive(int) {}

func chatUsage(c *instrument.Chat) *wire.Usage {
	if c.Response == nil || c.Response.Message == nil {
		return nil
	}
	return &c.Response.Message.Usage
}

// follow takes the running totals of the turn t, as of sp, a span of it that is not its root:
// a copy, since the tracker goes on changing its own, and the store hands out copies of its
// turns.
func (t *Turn) follow(sp *instrument.Span) {
	if t.Running() && sp.TurnTotals != nil && sp.Kind != instrument.KindTurn {
		t.setTotals(sp.TurnTotals)
	}
}

// setTotals copies tot into t, reusing t's maps.
func (t *Turn) setTotals(tot *instrument.Totals) {
	counts, failures, models := t.ToolCounts, t.ToolFailures, t.Models
	t.Totals = *tot
	t.ToolCounts = copyCounts(counts, tot.ToolCounts)
	t.ToolFailures = copyCounts(failures, tot.ToolFailures)
	t.Models = append(models[:0], tot.Models...)
}

func copyCounts(dst, src map[string]int) map[string]int {
	if len(src) == 0 {
		return nil
	}
	if dst == nil {
		dst = make(map[string]int, len(src))
	}
	clear(dst)
	maps.Copy(dst, src)
	return dst
}

// turnFor returns the turn record of sp's trace, creating it for a root span. Spans of traces
// that are not turns (standalone side requests) get a record of their own.
func (s *Store) turnFor(sp *instrument.Span) *Turn {
	// A turn root in the trace of a turn that ended is a part of it that came back to this
	// replica after it was handed off (instrument.OutcomeHandedOff): a record of its own, as
	// the tracker made it a root of its own; the trace's id finds the latest part.
	if t := s.byTrace[sp.TraceID]; t != nil && (sp.Kind != instrument.KindTurn || t.Running()) {
		return t
	}
	if !isRoot(sp) {
		return nil // its turn already left the ring
	}
	t := &Turn{
		TraceID:   sp.TraceID.String(),
		SessionID: sp.SessionID,
		User:      sp.User,
		Team:      sp.Team,
		Index:     sp.TurnIndex,
		Start:     sp.Start,
		Root:      kindName(sp.Kind),
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
				if &o.Record == r {
					delete(s.open, id)
				}
			}
		}
	}
	return t
}

// isRoot reports whether sp is the root of the tracker's trace: a span without a parent, or a
// turn, whose parent is the client's span when it joined the client's trace.
func isRoot(sp *instrument.Span) bool {
	return !sp.Parent.IsValid() || sp.Kind == instrument.KindTurn
}

func (s *Store) session(id string) *SessionTotals {
	tot := s.sessions[id]
	if tot == nil {
		tot = &SessionTotals{ID: id, Blocks: make(map[instrument.BlockKey]int)}
		s.sessions[id] = tot
	}
	return tot
}

func (tot *SessionTotals) seen(at time.Time) {
	if at.IsZero() {
		return
	}
	if tot.First.IsZero() || at.Before(tot.First) {
		tot.First = at
	}
	if at.After(tot.Last) {
		tot.Last = at
	}
}

func (s *Store) countSession(sp *instrument.Span) {
	tot := s.session(sp.SessionID)
	tot.seen(sp.End)
	tot.Add(sp)
	switch {
	case sp.Kind == instrument.KindTurn:
		tot.Turns++
		if tot.FirstPrompt == "" && sp.Turn != nil {
			tot.FirstPrompt = sp.Turn.Prompt
		}
	case sp.Chat != nil:
		c := sp.Chat
		if c.Compaction != nil {
			tot.Compactions++
		}
		c.EachFirstSeenBlock(func(k instrument.BlockKey, n int) { tot.Blocks[k] += n })
		tot.Messages.count(c)
		tot.noteContext(c)
		if s.titles && tot.Title == "" {
			tot.Title = sessionTitle(c)
		}
	}
}

// count classifies the new user message of a request (on its first attempt only) and the
// assistant message it got.
func (m *Messages) count(c *instrument.Chat) {
	switch c.Kind {
	case instrument.RequestAuxiliary, instrument.RequestCountTokens, instrument.RequestOther, instrument.RequestTool:
		if c.Attempt == 0 {
			m.SideRequests++
		}
		return
	}
	switch {
	case c.Attempt > 0:
	case c.NewBlocks[instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockToolResult}] > 0:
		m.ToolResults++
	case c.NewBlocks[instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockText}] > 0 &&
		(c.Synthetic == "" || c.Synthetic == instrument.SyntheticInterrupt):
		// Text Claude Code wrote itself is no human text; an interruption comes with what the
		// user typed next.
		m.HumanText++
	}
	// Only a complete response counts: a retried attempt cut mid-stream is not a message.
	if c.Response == nil || c.Response.Message == nil || c.Response.Message.StopReason == "" {
		return
	}
	b := c.Response.Message.Blocks
	switch text, tools := b[wire.BlockText] > 0, b[wire.BlockToolUse] > 0; {
	case text && tools:
		m.TextAndToolCalls++
	case tools:
		m.ToolCalls++
	case text:
		m.AssistantText++
	}
}

// Filter picks turns and sessions: each field that is set must match. The zero value picks all.
type Filter struct {
	Session string
	User    string // the person a turn or session is attributed to
	Team    string
}

func (f Filter) match(session, user, team string) bool {
	return (f.Session == "" || f.Session == session) && (f.User == "" || f.User == user) && (f.Team == "" || f.Team == team)
}

// TurnsWhere returns copies of the kept turns that f picks, newest first.
func (s *Store) TurnsWhere(f Filter) []Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Turn, 0, len(s.turns))
	for i := len(s.turns) - 1; i >= 0; i-- {
		t := s.turns[i]
		if !f.match(t.SessionID, t.User, t.Team) {
			continue
		}
		out = append(out, t.clone(now))
	}
	return out
}

// Turn returns a copy of the kept turn with the given trace id (32 hex digits), and false when
// the store does not hold it.
func (s *Store) Turn(traceID string) (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.turns) - 1; i >= 0; i-- { // the latest part of a turn handed off and back
		if t := s.turns[i]; t.TraceID == traceID {
			return t.clone(s.now()), true
		}
	}
	return Turn{}, false
}

// Session returns the totals of one session, and false when the store has not seen it.
func (s *Store) Session(id string) (SessionTotals, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.sessions[id]
	if !ok {
		return SessionTotals{}, false
	}
	return t.clone(), true
}

func (t *Turn) clone(now time.Time) Turn {
	c := *t
	c.Spans = make([]*Record, len(t.Spans))
	for j, r := range t.Spans {
		rc := *r
		c.Spans[j] = &rc
	}
	c.ToolCounts = maps.Clone(t.ToolCounts)
	c.ToolFailures = maps.Clone(t.ToolFailures)
	c.Models = slices.Clone(t.Models)
	if c.End == nil {
		c.Duration = now.Sub(c.Start).Seconds()
	}
	return c
}

func (t *SessionTotals) clone() SessionTotals {
	c := *t
	c.Blocks = maps.Clone(t.Blocks)
	c.ToolCounts = maps.Clone(t.ToolCounts)
	c.ToolFailures = maps.Clone(t.ToolFailures)
	c.Models = slices.Clone(t.Models)
	return c
}

// Sessions returns the totals of every session seen, most recently active first.
func (s *Store) Sessions() []SessionTotals { return s.SessionsWhere(Filter{}) }

// SessionsWhere returns the totals of the sessions f picks, most recently active first.
func (s *Store) SessionsWhere(f Filter) []SessionTotals {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SessionTotals, 0, len(s.sessions))
	for _, t := range s.sessions {
		if f.match(t.ID, t.User, t.Team) {
			out = append(out, t.clone())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Last.Equal(out[j].Last) {
			return out[i].Last.After(out[j].Last)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Spend returns what people and teams spent (WithSpend), and false when the store has no source
// of it.
func (s *Store) Spend() (Spend, bool) {
	if s.spend == nil {
		return Spend{}, false
	}
	return s.spend(), true
}

// ServeHTTP serves the kept turns as JSON, newest first; ?session=ID, ?user=NAME and ?team=NAME
// filter them. Only what the viewer may see (ScopeFrom of the request's context) is served;
// with WithSpend, the spend of the people and teams the viewer may see comes along.
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scope := ScopeFrom(r.Context())
	f, ok := scope.Narrow(Filter{Session: q.Get("session"), User: q.Get("user"), Team: q.Get("team")})
	turns := []Turn{}
	if ok {
		turns = s.TurnsWhere(f)
	}
	var spend *Spend
	if s.spend != nil {
		sp := scope.Spend(s.spend())
		spend = &sp
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Turns []Turn `json:"turns"`
		Spend *Spend `json:"spend,omitempty"`
	}{turns, spend})
}

func fillTurn(t *Turn, sp *instrument.Span) {
	if t.End == nil {
		t.endAt = sp.End
		t.End = &t.endAt
	} else {
		end := sp.End // copies handed out may point at the first end: leave it alone
		t.End = &end
	}
	t.Start = sp.Start
	t.Duration = sp.End.Sub(sp.Start).Seconds()
	switch {
	case sp.Turn != nil:
		tt := sp.Turn
		t.Outcome = string(tt.Outcome)
		t.Trigger = string(tt.Trigger)
		t.Compaction = tt.Compaction
		t.Prompt = tt.Prompt
		t.setTotals(&tt.Totals)
	case sp.Subagent != nil:
		t.setTotals(&sp.Subagent.Totals)
	case sp.Chat != nil:
		t.Add(sp) // a side request no turn adopted: a trace of its own
	}
}

func fillChat(rec *record, c *instrument.Chat) {
	r := &rec.Record
	r.Request = string(c.Kind)
	r.Attempt = c.Attempt
	r.Compacted = c.Compacted
	if cp := c.Compaction; cp != nil {
		r.Compaction = cp.Trigger
	}
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
		rec.usage = m.Usage
		r.Tokens = &rec.usage
	}
	r.Anatomy = anatomyOf(c)
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

// project names a working directory by its last element: what a person calls the project, and
// not the local path, which may name them.
func project(dir string) string {
	dir = strings.TrimRight(strings.ReplaceAll(dir, `\`, "/"), "/")
	if dir == "" {
		return ""
	}
	return dir[strings.LastIndexByte(dir, '/')+1:]
}
