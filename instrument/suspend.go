package instrument

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Turns in flight across a restart: at Close, a tracker with an InFlightStore (WithInFlight)
// keeps what each open turn of the main agent needs to go on (the turn's root span and totals,
// its tool calls still running, the main conversation's state) instead of ending it, and the
// tracker of the next process takes it back (Resume) before its first request. The turn then
// keeps one root, its real start and its tool calls, and counts every request, tool call and
// turn once: the ended spans in the process that saw them end, the turn and its running tools
// in the one that ends them.

// inFlightPrefix starts the names the tracker keeps its states under in the store.
const inFlightPrefix = "tracker/session/"

// inFlightVersion is the version of the saved state's format; a state of another is dropped.
const inFlightVersion = 1

// saveTimeout bounds the store's calls at Close, so that a stuck disk or server cannot hold a
// shutdown past its grace.
const saveTimeout = 5 * time.Second

// WithInFlight keeps the turns in flight at Close in store, for the tracker of the next process
// to resume (Resume) rather than end them as "shutdown" ("handed_off" with WithReplica). Only a
// turn of the main agent with no subagent running is kept; the others end as before. Default:
// none, every open turn ends at Close.
func WithInFlight(store InFlightStore) Option {
	return func(c *config) { c.inFlight = store }
}

// Suspender is a Sink that keeps something of a span between SpanStarted and SpanEnded. The
// tracker calls SpanSuspended for a started span that will not end in this process, since the
// next one resumes it (WithInFlight): the sink forgets it, neither ending nor exporting it. The
// tracker of the next process starts it again, with the same ids and start, and ends it.
type Suspender interface {
	SpanSuspended(s *Span)
}

// SpanSuspended hands s to each sink that is a Suspender.
func (ss Sinks) SpanSuspended(s *Span) {
	for _, k := range ss {
		if sp, ok := k.(Suspender); ok {
			sp.SpanSuspended(s)
		}
	}
}

// suspendedSession is the saved form of a session with a turn in flight.
type suspendedSession struct {
	Version  int             `json:"version"`
	ID       string          `json:"id"`
	Agent    string          `json:"agent"`
	ClientID bool            `json:"client_id"`
	LastSeen time.Time       `json:"last_seen"`
	Turns    int             `json:"turns"`
	PlanMode bool            `json:"plan_mode"`
	Main     suspendedChain  `json:"main"`
	Turn     suspendedTurn   `json:"turn"`
	Tools    []suspendedTool `json:"tools,omitempty"`
}

type suspendedChain struct {
	Seen     bool        `json:"seen"`
	First    uint64      `json:"first"`
	Messages int         `json:"messages"`
	Context  int         `json:"context"`
	LastHash uint64      `json:"last_hash"`
	LastKind RequestKind `json:"last_kind"`
	Failed   bool        `json:"failed"`
	Cut      bool        `json:"cut"`
	Attempt  int         `json:"attempt"`
}

// spanState is a turn's root or a tool call's span as kept in the store: an open span, neither
// a chat span nor a subagent's.
type spanState struct {
	TraceID      TraceID     `json:"trace_id"`
	ID           SpanID      `json:"id"`
	Parent       SpanID      `json:"parent"`
	Kind         SpanKind    `json:"kind"`
	Name         string      `json:"name"`
	Start        time.Time   `json:"start"`
	SessionID    string      `json:"session_id"`
	TurnIndex    int         `json:"turn_index"`
	Agent        string      `json:"agent"`
	User         string      `json:"user,omitempty"`
	Team         string      `json:"team,omitempty"`
	Link         *LinkedSpan `json:"link,omitempty"`
	ClientParent bool        `json:"client_parent,omitempty"`
	Tool         *Tool       `json:"tool,omitempty"`
	Turn         *Turn       `json:"turn,omitempty"`
}

func stateOf(sp *Span) spanState {
	return spanState{
		TraceID: sp.TraceID, ID: sp.ID, Parent: sp.Parent, Kind: sp.Kind, Name: sp.Name, Start: sp.Start,
		SessionID: sp.SessionID, TurnIndex: sp.TurnIndex, Agent: sp.Agent, User: sp.User, Team: sp.Team,
		Link: sp.Link, ClientParent: sp.ClientParent, Tool: sp.Tool, Turn: sp.Turn,
	}
}

// span returns the span s keeps, without its Tool and Turn, which the caller sets.
func (s *spanState) span() Span {
	return Span{
		TraceID: s.TraceID, ID: s.ID, Parent: s.Parent, Kind: s.Kind, Name: s.Name, Start: s.Start,
		SessionID: s.SessionID, TurnIndex: s.TurnIndex, Agent: s.Agent, User: s.User, Team: s.Team,
		Link: s.Link, ClientParent: s.ClientParent,
	}
}

type suspendedTurn struct {
	Span     spanState `json:"span"` // Span.Turn holds the totals
	Deadline time.Time `json:"deadline"`
	LastSeen time.Time `json:"last_seen"`
	Failed   bool      `json:"failed"`
	Canceled bool      `json:"canceled"`
	Stopped  string    `json:"stopped,omitempty"`
}

type suspendedTool struct {
	Span  spanState `json:"span"` // Span.Tool holds the call
	Input string    `json:"input,omitempty"`
}

// suspendable reports whether sess has a turn in flight that the next process can go on with:
// an open turn of the main agent, with no subagent running and no Agent call waiting for one.
func suspendable(sess *session) bool {
	tr := sess.turn
	if tr == nil || tr.ended || tr.compactionOnly || sess.compacting != nil {
		return false
	}
	for _, tool := range sess.tools {
		if tool.chain != &sess.main || tool.turn != tr || tool.span.Tool.Agent != nil {
			return false
		}
	}
	for _, ch := range sess.agents {
		if ch.sub != nil && !ch.sub.ended {
			return false
		}
	}
	return true
}

// suspend saves sess's turn in flight in the store and tells the sinks that its open spans will
// end elsewhere. It reports false, having changed nothing, when the store failed.
func (t *Tracker) suspend(ctx context.Context, sess *session, now time.Time) bool {
	tr := sess.turn
	if tr.deadline.IsZero() {
		// A request of the turn was still in flight, and was cut: the client sends it again
		// or goes on, as after any failure.
		tr.deadline, tr.failed = now.Add(t.cfg.errorTimeout), true
	}
	ch := &sess.main
	s := suspendedSession{
		Version: inFlightVersion, ID: sess.id, Agent: sess.agent, ClientID: sess.clientID,
		LastSeen: sess.lastSeen, Turns: sess.turns, PlanMode: sess.planMode,
		Main: suspendedChain{
			Seen: ch.seen, First: ch.first, Messages: ch.messages, Context: ch.context,
			LastHash: ch.lastHash, LastKind: ch.lastKind, Failed: ch.failed, Cut: ch.cut, Attempt: ch.attempt,
		},
		Turn: suspendedTurn{
			Span: stateOf(tr.span), Deadline: tr.deadline, LastSeen: tr.lastSeen,
			Failed: tr.failed, Canceled: tr.canceled, Stopped: tr.stopped,
		},
	}
	tools := sortedToolIDs(sess.tools)
	for _, id := range tools {
		tool := sess.tools[id]
		s.Tools = append(s.Tools, suspendedTool{Span: stateOf(tool.span), Input: tool.input})
	}
	state, err := json.Marshal(&s)
	if err == nil {
		err = t.cfg.inFlight.SaveInFlight(ctx, inFlightPrefix+sess.id, state)
	}
	if err != nil {
		return false
	}
	if sp, ok := t.sink.(Suspender); ok {
		for _, id := range tools {
			sp.SpanSuspended(sess.tools[id].span)
		}
		sp.SpanSuspended(tr.span)
	}
	t.flushOrphans(sess, now, true)
	sess.evicted = true
	delete(t.sessions, sess.id)
	return true
}

// Resume takes back the turns in flight that an earlier process kept in the store
// (WithInFlight) and goes on with them: their root spans and running tool calls start again in
// the sinks, with their ids and start times, and end here. Call it once, before the first
// request. It reports how many turns it resumed; a state it cannot read is dropped.
func (t *Tracker) Resume(ctx context.Context) (int, error) {
	if t.cfg.inFlight == nil {
		return 0, nil
	}
	states, err := t.cfg.inFlight.TakeInFlight(ctx, inFlightPrefix)
	if err != nil {
		return 0, fmt.Errorf("resuming turns in flight: %w", err)
	}
	n := 0
	var errs []error
	for name, state := range states {
		s, err := decodeSuspended(name, state)
		switch {
		case err != nil:
			errs = append(errs, err)
		case t.sessions[s.ID] != nil || len(t.sessions) >= t.cfg.maxSessions:
		default:
			t.resume(s)
			n++
		}
	}
	t.reportSessions()
	return n, errors.Join(errs...)
}

// decodeSuspended reads the state kept under name, reporting one it cannot resume.
func decodeSuspended(name string, state []byte) (*suspendedSession, error) {
	var s suspendedSession
	if err := json.Unmarshal(state, &s); err != nil {
		return nil, fmt.Errorf("state %s: %w", name, err)
	}
	if s.Version != inFlightVersion || s.Turn.Span.Turn == nil || s.ID != strings.TrimPrefix(name, inFlightPrefix) {
		return nil, fmt.Errorf("state %s: not a turn this version of cctrace can resume", name)
	}
	return &s, nil
}

// takeSuspended takes from the store the turn in flight that another replica kept for session
// id when it stopped (WithReplica), and resumes it: the session moved here mid-turn. It returns
// nil when there is none, or the store failed: the turn then goes on here as a continuation, as
// it would without a store.
func (t *Tracker) takeSuspended(id string) *session {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	name := inFlightPrefix + id
	states, err := t.cfg.inFlight.TakeInFlight(ctx, name)
	if err != nil || len(states) == 0 {
		return nil
	}
	for other, state := range states {
		if other != name { // a session whose id begins with this one's: not taken after all
			_ = t.cfg.inFlight.SaveInFlight(ctx, other, state)
		}
	}
	s, err := decodeSuspended(name, states[name])
	if err != nil {
		return nil
	}
	t.resume(s)
	return t.sessions[id]
}

// resume rebuilds the session s saved, with its turn and tool calls, and starts their spans
// again in the sinks. What they counted is in the saved totals: nothing is counted again.
func (t *Tracker) resume(s *suspendedSession) {
	sess := &session{
		id: s.ID, agent: s.Agent, clientID: s.ClientID, lastSeen: s.LastSeen,
		turns: s.Turns, planMode: s.PlanMode,
		agents: make(map[string]*chain),
		tools:  make(map[string]*openTool),
	}
	m := s.Main
	sess.main = chain{
		seen: m.Seen, first: m.First, messages: m.Messages, context: m.Context,
		lastHash: m.LastHash, lastKind: m.LastKind, failed: m.Failed, cut: m.Cut, attempt: m.Attempt,
	}
	tr := &turn{
		deadline: s.Turn.Deadline, lastSeen: s.Turn.LastSeen,
		failed: s.Turn.Failed, canceled: s.Turn.Canceled, stopped: s.Turn.Stopped,
	}
	tr.totals = *s.Turn.Span.Turn
	tr.root = s.Turn.Span.span()
	tr.root.Turn = &tr.totals
	tr.span = &tr.root
	sess.turn = tr
	t.traces.claim(tr.root.TraceID)
	t.sessions[sess.id] = sess
	t.sink.SpanStarted(tr.span)
	for _, st := range s.Tools {
		if st.Span.Tool == nil || st.Span.Tool.CallID == "" {
			continue
		}
		ot := &openTool{turn: tr, chain: &sess.main, input: st.Input}
		ot.call = *st.Span.Tool
		ot.root = st.Span.span()
		ot.root.Tool, ot.root.TurnTotals = &ot.call, turnTotals(tr)
		ot.span = &ot.root
		sess.tools[ot.call.CallID] = ot
		t.sink.SpanStarted(ot.span)
	}
}
