package instrument

import (
	"iter"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
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

// chain is one agent's conversation within a session: the main agent's, or a subagent's.
type chain struct {
	sub      *subagentRun // nil for the main chain
	seen     bool         // a request of this chain was tracked already
	messages int          // message count of the last request
	context  int          // all input tokens of the last successful response
	lastHash uint64       // Body.HistoryHash of the last request
	lastKind RequestKind
	failed   bool // the last request failed (a request repeating it is a retry)
	// cut: the last answer began (message_start) and ended without a stop reason.
	cut     bool
	attempt int // attempt number of the last request
}

// turn is an open agentic turn: the root span and its running totals.
type turn struct {
	span     *Span // &root
	ended    bool
	deadline time.Time // when Tick ends it for lack of activity; zero while a request is in flight
	lastSeen time.Time
	failed   bool // the last main-chain request failed
	canceled bool // the client abandoned the last main-chain request
	// stopped is the stop reason of an answer that ran out of output tokens: Claude Code goes
	// on with the turn by itself, so it ends with that outcome only when nothing follows
	// within recoveryWindow (or something else does).
	stopped string
	// compactionOnly marks a trace that holds a /compact summarisation and nothing else.
	compactionOnly bool
	// root, totals and firstModel are where span, span.Turn and the first backing array of
	// span.Turn.Models live: one allocation per turn instead of four. Nothing else points at them.
	root       Span
	totals     Turn
	firstModel [1]string
}

// subagentRun is one subagent: its span and its own totals.
type subagentRun struct {
	span *Span // &root
	turn *turn // the turn it started in; it may outlive it (background agents)
	// parent is the run whose Agent call started this one (nil when the main agent's did):
	// what runs under this one counts in the parent's totals too.
	parent *subagentRun
	ended  bool
	// root and totals are where span and span.Subagent live (one allocation, not three).
	root   Span
	totals Subagent
}

// openTotals yields the totals of r and of the runs that started it, those whose spans have not
// ended (an ended span is out already, with the totals it had). r may be nil: nothing.
func (r *subagentRun) openTotals() iter.Seq[*Subagent] {
	return func(yield func(*Subagent) bool) {
		for run := r; run != nil; run = run.parent {
			if !run.ended && !yield(run.span.Subagent) {
				return
			}
		}
	}
}

// openTool is a tool call whose result has not arrived yet.
type openTool struct {
	span  *Span // &root
	turn  *turn
	chain *chain // the chain whose response asked for it
	// sub is the subagent run whose response asked for it (nil for the main agent's).
	sub *subagentRun
	// subagent is the run this Agent call started, once its first request was seen.
	subagent *subagentRun
	// async is set when the Agent call's result says the subagent runs in the background.
	async bool
	// root and call are where span and span.Tool live (one allocation, not three).
	root Span
	call Tool
}

// pendingCompaction is what the tracker remembers between a compaction summary and the
// continuation request.
type pendingCompaction struct {
	messagesBefore int
	contextBefore  int
	midTurn        bool // it happened inside an open turn (an automatic compaction)
}

// exchange is one request in flight.
type exchange struct {
	span  *Span // &root
	sess  *session
	chain *chain       // nil for side requests
	turn  *turn        // the turn whose totals it counts into; nil for standalone traces
	sub   *subagentRun // set for subagent requests
	hash  uint64
	// orphan: its span waits for a turn to adopt it; done: its response already ended;
	// untraced: a request outside any session (RequestNoSession), in no trace.
	orphan, done, untraced bool
	since                  time.Time
	// root, chat and body are where span, span.Chat and span.Chat.Request.Body (the request's
	// body without its messages) live: one allocation per request instead of four. Sinks do not
	// keep spans past a call, and nothing else points at them.
	root Span
	chat Chat
	body wire.Body
}

// lastConversational returns the last user or assistant message: system-role messages (such as
// the environment block Claude Code appends) do not count as "the last message".
func lastConversational(b *wire.Body) *wire.Message {
	if b == nil {
		return nil
	}
	for i := len(b.Messages) - 1; i >= 0; i-- {
		switch b.Messages[i].Role {
		case wire.RoleUser, wire.RoleAssistant:
			return &b.Messages[i]
		}
	}
	return nil
}
