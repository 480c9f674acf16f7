package instrument

import (
	"sort"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Sessions: which session a request belongs to, and how a session's state is dropped.

const (
	mainAgentName = "claude-code"
	// otherClientName names the main agent of sessions that show no sign of Claude Code (other
	// Messages API clients): their turns are traced the same way.
	otherClientName = "api-client"
)

// session is everything the tracker keeps about one Claude Code session. It is proportional to
// the tool calls and subagents in flight, never to the conversation's history.
type session struct {
	id    string
	agent string // the main agent's name: "claude-code", or "api-client" for other clients
	// clientID is set when the client named the session (a header or metadata.user_id), not
	// when id is a fingerprint of the conversation or "unknown".
	clientID bool
	lastSeen time.Time
	turns    int   // turns started so far (for Turn.Index)
	turn     *turn // the open turn of the main chain, if any
	main     chain
	agents   map[string]*chain    // subagent chains by key
	tools    map[string]*openTool // tool calls awaiting their result, by tool_use id
	// agentCalls are Agent tool calls whose subagent has not been seen yet. A background agent
	// can send its first request after its tool call already returned.
	agentCalls []*openTool
	// compacting is set between a successful compaction summary and the request that follows it.
	compacting *pendingCompaction
	// orphans are side requests that arrived before any turn was open; the next turn adopts them.
	orphans []*exchange
	// planMode is whether the last main-chain request carried Plan Mode reminders.
	planMode bool
	// evicted is set once the tracker has dropped the session; requests still in flight keep
	// a pointer to it.
	evicted bool
}

// sessionFor finds or creates the session a request belongs to: Claude Code's session header,
// else the session inside metadata.user_id, else a fingerprint of the conversation.
func (t *Tracker) sessionFor(req *wire.Request) *session {
	id := req.Headers.SessionID
	if id == "" && req.Body != nil {
		id = req.Body.MetadataSessionID
		if id == "" && req.Body.FirstHumanTextHash != 0 {
			// Built on the stack: the string is only allocated for a new session.
			var buf [len("fp-") + 16]byte
			key := appendHash(append(buf[:0], "fp-"...), req.Body.FirstHumanTextHash)
			if s := t.sessions[string(key)]; s != nil {
				return s
			}
			id = string(key)
		}
	}
	if id == "" {
		id = "unknown"
	}
	if s := t.sessions[id]; s != nil {
		return s
	}
	if len(t.sessions) >= t.cfg.maxSessions {
		var oldest *session
		for _, s := range t.sessions {
			if oldest == nil || s.lastSeen.Before(oldest.lastSeen) {
				oldest = s
			}
		}
		t.evict(oldest, req.Time, OutcomeEvicted)
	}
	if t.cfg.replica && t.cfg.inFlight != nil {
		if s := t.takeSuspended(id); s != nil {
			return s
		}
	}
	s := &session{
		id:       id,
		agent:    otherClientName,
		clientID: req.Headers.SessionID != "" || (req.Body != nil && req.Body.MetadataSessionID != ""),
		agents:   make(map[string]*chain),
		tools:    make(map[string]*openTool),
	}
	if fromClaudeCode(req) {
		s.agent = mainAgentName
	}
	t.sessions[id] = s
	return s
}

// fromClaudeCode reports whether req shows any sign of Claude Code: its session header, its user
// agent, or the billing header in its system prompt.
func fromClaudeCode(req *wire.Request) bool {
	return req.Headers.SessionID != "" || strings.HasPrefix(req.Headers.UserAgent, "claude-cli/") ||
		(req.Body != nil && req.Body.System.BillingHeader != "")
}

// evict ends everything open in sess, with outcome (OutcomeEvicted, OutcomeShutdown or
// OutcomeHandedOff), and forgets it.
func (t *Tracker) evict(sess *session, now time.Time, outcome Outcome) {
	t.flushOrphans(sess, now, true)
	if sess.turn != nil {
		end := now
		if outcome == OutcomeEvicted {
			end = sess.turn.lastSeen
		}
		t.endTurn(sess, end, outcome, "")
	}
	for _, id := range sortedToolIDs(sess.tools) {
		t.endTool(sess, id, sess.tools[id], now, toolOutcomeOf(outcome), nil)
	}
	keys := make([]string, 0, len(sess.agents))
	for k := range sess.agents {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if sub := sess.agents[k].sub; sub != nil && !sub.ended {
			sub.ended = true
			sub.span.End = now
			if sub.span.End.Before(sub.span.Start) {
				sub.span.End = sub.span.Start
			}
			sub.span.Status, sub.span.ErrorType = StatusError, string(outcome)
			t.sink.SpanEnded(sub.span)
		}
	}
	sess.evicted = true
	delete(t.sessions, sess.id)
}

func (t *Tracker) reportSessions() {
	if n := len(t.sessions); n != t.reported {
		t.reported = n
		t.sink.SessionsActive(n)
	}
}

func (t *Tracker) sortedSessions() []*session {
	out := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
