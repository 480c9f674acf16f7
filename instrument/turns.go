package instrument

import (
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Turn boundaries: what starts, continues and ends an agentic turn.

// stopMaxTokens is the stop reason of an answer that ran out of output tokens.
const stopMaxTokens = "max_tokens"

// recoveryWindow is how long a turn whose answer ran out of output tokens waits for Claude
// Code's own request to go on with it before it ends with that answer. Claude Code sends that
// request within milliseconds.
const recoveryWindow = 10 * time.Second

// chain is one conversation within a session: the main agent's, a subagent's, or the one a
// running tool holds with the API.
type chain struct {
	sub      *subagentRun // nil for the main chain
	seen     bool         // a request of this chain was tracked already
	first    uint64       // Body.FirstHumanTextHash of its requests
	messages int          // message count of the last request
	context  int          // all input tokens of the last successful response
	lastHash uint64       // Body.HistoryHash of the last request
	lastKind RequestKind
	failed   bool // the last request failed (a request repeating it is a retry)
	// cut: the last answer began (message_start) and ended without a stop reason.
	cut     bool
	attempt int // attempt number of the last request
	// prefix is what the last request answered with usage left in the prompt cache (cache.go).
	prefix prefixState
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
	// root and totals are where span and span.Turn live: one allocation per turn instead of
	// two. Nothing else points at them.
	root   Span
	totals Turn
}

// joinTurn starts ex's chat span in the main chain's turn tr, which a request at now keeps open.
func (t *Tracker) joinTurn(ex *exchange, tr *turn, now time.Time) {
	tr.deadline = time.Time{}
	tr.canceled = false
	tr.stopped = ""
	tr.lastSeen = now
	t.startChild(ex, tr.span, tr)
}

// startConversational handles a request of the main chain or of a subagent.
func (t *Tracker) startConversational(ex *exchange) {
	req := &ex.span.Chat.Request
	body := req.Body
	sess := ex.sess
	chat := ex.span.Chat

	ch, sub, tool := t.chainFor(ex)
	switch {
	case tool != nil:
		t.startToolRequest(ex, tool)
		return
	case ch == nil:
		t.startSide(ex)
		return
	}
	ex.chain = ch
	last := lastConversational(body)
	chat.Synthetic = syntheticKind(last)
	interrupted, matched := t.closeTools(sess, body, req.Time)
	// After an answer that began and was cut before it stopped (an error event, the upstream or
	// the client ending the stream), Claude Code sends the same request again (a retry, below)
	// or goes on from what arrived, with the text it keeps and a request to resume: whatever
	// that request says, it continues the turn, unless the user interrupted it.
	resumes := ch.seen && ch.cut && !interrupted
	// A human prompt starts a turn, unless the same message answers tool calls of the open turn
	// (text the user queued while tools ran) or goes on with a cut answer; an interruption always
	// ends the open one. Text Claude Code writes itself is no prompt: it continues the open turn,
	// or, when none is open, starts one with its kind as the trigger.
	newPrompt := interrupted || (!resumes && last != nil && last.Role == wire.RoleUser && last.HumanText &&
		chat.Synthetic == "" && !matched)

	retry := ch.seen && body.HistoryHash == ch.lastHash && (ch.failed || req.Headers.RetryCount > 0)
	if retry {
		chat.Attempt = ch.attempt + 1
		chat.Kind = ch.lastKind
	} else {
		t.countNewBlocks(chat, ch, body)
	}
	compaction := t.compactionFor(sess, ch, body, retry)

	if sub != nil {
		chat.Kind = RequestSubagent
		t.joinRun(ex, sub)
	} else {
		if !retry {
			switch {
			case resumes || chat.Synthetic == SyntheticCutOff || chat.Synthetic == SyntheticOutputLimit:
				chat.Kind = RequestResumption
			case last != nil && len(last.ToolResults) > 0:
				chat.Kind = RequestToolResults
			default:
				chat.Kind = RequestTurn
			}
		}
		tr := sess.turn
		switch {
		case retry && tr != nil:
		case compaction != nil && compaction.midTurn && tr != nil:
			// An automatic compaction: the turn goes on with the summarised history.
		case tr != nil && !tr.compactionOnly && !newPrompt:
		default:
			tr = t.startTurn(sess, req.Time, ex)
			switch {
			case newPrompt:
				chat.Kind = RequestTurn
			case chat.Synthetic != "":
				tr.span.Turn.Trigger = Trigger(chat.Synthetic)
			case compaction == nil:
				tr.span.Turn.Trigger = TriggerContinuation
			}
		}
		t.trackPlanMode(sess, tr, body.PlanMode, req.Time)
		t.joinTurn(ex, tr, req.Time)
	}
	if compaction != nil {
		chat.Compacted = true
		chat.Compaction = &Compaction{
			Trigger:        "auto",
			MessagesBefore: compaction.messagesBefore,
			MessagesAfter:  len(body.Messages),
			ContextBefore:  compaction.contextBefore,
		}
		if body.CompactCommand {
			chat.Compaction.Trigger = "manual"
		}
	}
	ch.seen, ch.lastHash, ch.lastKind, ch.attempt = true, body.HistoryHash, chat.Kind, chat.Attempt
	ch.messages, ch.first = len(body.Messages), body.FirstHumanTextHash
}

// continuesMain reports whether a request of no subagent, and of no running tool, goes on with
// the session's main conversation or starts one; if not, it is a side request. What marks a side
// request (docs/wire.md): Claude Code's session title (an answer in a JSON schema, no tools), and
// any other request of Claude Code's that offers the client no tool and holds a conversation
// other than the main one. Any other request, from any other client, is a prompt of its
// conversation, tools or not.
func (t *Tracker) continuesMain(ex *exchange) bool {
	body := ex.span.Chat.Request.Body
	sess := ex.sess
	if sess.agent != mainAgentName {
		return true
	}
	switch {
	case body.Tools.Count == 0 && body.OutputFormat == outputJSONSchema:
		return false
	case body.Tools.Count != body.Tools.Server:
		return true
	}
	return sess.main.seen && (body.FirstHumanTextHash == sess.main.first ||
		strings.HasPrefix(body.FirstHumanText, continuationPrefix))
}

// startTurn opens a new turn in sess, ending the open one as interrupted, and adopts side
// requests that were waiting for it.
func (t *Tracker) startTurn(sess *session, now time.Time, ex *exchange) *turn {
	if sess.turn != nil {
		t.endTurn(sess, now, OutcomeInterrupted, "")
	}
	sess.turns++
	start := now
	for _, o := range sess.orphans {
		if o.span.Start.Before(start) {
			start = o.span.Start
		}
	}
	tr := &turn{lastSeen: now}
	tr.totals = Turn{Index: sess.turns, Trigger: TriggerPrompt}
	tr.root = Span{
		Kind:      KindTurn,
		Name:      t.names.join("invoke_agent ", sess.agent),
		Start:     start,
		SessionID: sess.id,
		TurnIndex: sess.turns,
		Agent:     sess.agent,
		User:      ex.span.User,
		Team:      ex.span.Team,
		Link:      ex.span.Link,
		Turn:      &tr.totals,
	}
	if l := ex.span.Link; t.cfg.joinClient && l != nil && l.Sampled && t.traces.claim(l.TraceID) {
		// The turn goes into the client's trace, under the span that sent its first request.
		tr.root.TraceID, tr.root.Parent, tr.root.ClientParent, tr.root.Link = l.TraceID, l.SpanID, true, nil
	} else {
		tr.root.TraceID = t.turnTraceID(sess, ex.span.Chat.Request.Body)
	}
	tr.root.ID = t.spanID()
	tr.span = &tr.root
	if t.cfg.capture {
		if last := lastConversational(ex.span.Chat.Request.Body); last != nil && last.HumanText {
			tr.span.Turn.Prompt = t.cfg.scrub(last.Text)
			ex.span.Chat.Prompt = tr.span.Turn.Prompt
		}
	}
	sess.turn = tr
	t.sink.SpanStarted(tr.span)
	orphans := sess.orphans
	sess.orphans = nil
	for _, o := range orphans {
		o.orphan = false
		o.turn = tr
		o.span.TraceID, o.span.Parent, o.span.ID = tr.span.TraceID, tr.span.ID, t.spanID()
		t.underClient(o.span)
		o.span.TurnIndex, o.span.TurnTotals = tr.span.TurnIndex, &tr.totals.Totals
		if o.done {
			tr.totals.Add(o.span)
		}
		t.emitLate(o)
	}
	return tr
}

// endTurn ends the open turn of sess at end with outcome; tools still waiting for results end
// with it. A turn whose answer stopped at the output limit, held open in case Claude Code went
// on with it, ends as that answer did, whatever came instead.
func (t *Tracker) endTurn(sess *session, end time.Time, outcome Outcome, stopReason string) {
	tr := sess.turn
	if tr == nil {
		return
	}
	if tr.stopped != "" {
		end, outcome, stopReason = tr.lastSeen, Outcome(tr.stopped), tr.stopped
	}
	sess.turn = nil
	tr.ended = true
	// A cut answer that was not resumed before its turn ended is resumed by nothing later.
	sess.main.cut = false
	if outcome == OutcomeHandedOff {
		// The rest of the turn went to another replica; it may come back here.
		t.traces.release(tr.span.TraceID)
	}
	toolOutcome := toolOutcomeOf(outcome)
	for _, id := range sortedToolIDs(sess.tools) {
		tool := sess.tools[id]
		if tool.turn == tr && tool.chain == &sess.main {
			t.endTool(sess, id, tool, end, toolOutcome, nil)
		}
	}
	// Forget the subagents that are done: a long session must not hold every subagent it
	// ever ran. One still running (in the background) is kept until it ends.
	for key, ch := range sess.agents {
		if sub := ch.sub; sub != nil && sub.ended && (sub.turn == nil || sub.turn.ended) {
			delete(sess.agents, key)
		}
	}
	span := tr.span
	if end.Before(span.Start) {
		end = span.Start
	}
	span.End = end
	span.Turn.Outcome = outcome
	span.Turn.StopReason = stopReason
	if tr.compactionOnly {
		span.Turn.Outcome = OutcomeCompaction
		if outcome != "end_turn" && stopReason == "" {
			span.Turn.Outcome = outcome
		}
	}
	switch outcome {
	case OutcomeError, OutcomeIdleTimeout:
		if tr.failed && !tr.canceled {
			span.Status, span.ErrorType = StatusError, "error"
			span.StatusMessage = "the turn's last request failed and was not retried"
		}
	}
	t.sink.SpanEnded(span)
}

// afterResponse moves the turn and subagent state on once a response has ended.
func (t *Tracker) afterResponse(ex *exchange, resp *wire.Response, failed bool) {
	sess, chat := ex.sess, ex.span.Chat
	end := ex.span.End
	msg := resp.Message
	stop := ""
	if msg != nil {
		stop = msg.StopReason
	}
	waits := stop == "tool_use" || stop == "pause_turn"

	switch {
	case ex.tool != nil:
		return // the tool call's result ends it, with the main chain's next request
	case ex.sub != nil:
		t.endRun(ex, !failed && msg != nil && !waits)
		return
	}
	tr := ex.turn
	if tr == nil || tr.ended || ex.chain != &sess.main || tr != sess.turn {
		return
	}
	tr.lastSeen = end
	tr.failed = failed
	switch {
	case chat.Kind == RequestCompaction && !tr.compactionOnly:
		if !failed {
			sess.compacting = &pendingCompaction{
				messagesBefore: sess.main.messages,
				contextBefore:  sess.main.context,
				midTurn:        true,
			}
		}
		tr.deadline = end.Add(t.cfg.toolTimeout)
	case resp.Canceled:
		// The client gave up on the request: the user interrupted, or Claude Code is about to
		// send it again. A new prompt or the error timeout ends the turn as interrupted.
		tr.canceled = true
		tr.deadline = end.Add(t.cfg.errorTimeout)
	case failed || msg == nil:
		tr.deadline = end.Add(t.cfg.errorTimeout)
	case waits:
		tr.deadline = end.Add(t.cfg.toolTimeout)
	case stop == stopMaxTokens && !tr.compactionOnly:
		// Claude Code asks the model to go on (SyntheticOutputLimit) at once, in the same turn.
		tr.stopped = stop
		tr.deadline = end.Add(recoveryWindow)
	default:
		if tr.compactionOnly {
			sess.compacting = &pendingCompaction{messagesBefore: sess.main.messages, contextBefore: sess.main.context}
		}
		t.endTurn(sess, end, Outcome(stop), stop)
	}
}

// countNewBlocks counts the content blocks of the messages a request carries beyond those of
// its chain's last request (all of them when the history was rewritten, as after a compaction):
// Chat.NewBlocks.
func (t *Tracker) countNewBlocks(chat *Chat, ch *chain, body *wire.Body) {
	from := ch.messages
	if !ch.seen || from > len(body.Messages) {
		from = 0
	}
	for _, m := range body.Messages[from:] {
		m.Blocks.Each(func(typ wire.BlockType, n int) { addBlock(chat, m.Role, typ, n) })
	}
}

func (t *Tracker) trackPlanMode(sess *session, tr *turn, on bool, now time.Time) {
	if on && !sess.planMode && tr.span.Turn.PlanModeEntered.IsZero() {
		tr.span.Turn.PlanModeEntered = now
	}
	if !on && sess.planMode && tr.span.Turn.PlanModeExited.IsZero() {
		tr.span.Turn.PlanModeExited = now
	}
	sess.planMode = on
}

// addBlock counts n content blocks of type typ in role's messages as new in chat.
func addBlock(chat *Chat, role wire.Role, typ wire.BlockType, n int) {
	if n == 0 {
		return
	}
	if chat.NewBlocks == nil {
		chat.NewBlocks = make(map[BlockKey]int)
	}
	chat.NewBlocks[BlockKey{Role: role, Type: typ}] += n
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

// syntheticKind returns the kind of Claude Code's own text that m, the newest user or assistant
// message of a request, carries; "" for human text and for anything else.
func syntheticKind(m *wire.Message) Synthetic {
	if m == nil || m.Role != wire.RoleUser {
		return ""
	}
	return m.Synthetic
}

// OpensTurn reports whether req, read on its own, carries a prompt a person typed and so starts a
// new turn of the main agent: its newest user or assistant message is a user message with human
// text that is not one of Claude Code's own texts (an interruption, which comes with what the
// user typed next, counts as human) and does not come with tool results. Subagents' requests,
// Claude Code's requests that offer the client no tool (titles, a tool's own requests such as
// WebSearch's), answers in a JSON schema (titles), compaction summaries and continuations are
// no new turn; another client's prompt is one, tools or not.
//
// It is the tracker's rule without the tracker's state, for a decision that cannot wait for the
// tracker (refusing a request before it is forwarded): it cannot see that a request goes on with
// an answer cut short, so it errs towards "not a new turn" only where the text says so.
func OpensTurn(req *wire.Request) bool {
	b := req.Body
	if req.Endpoint != wire.EndpointMessages || b == nil {
		return false
	}
	if req.Headers.AgentID != "" || b.System.Subagent || isCompactionSummary(b) {
		return false
	}
	if b.Tools.Count == b.Tools.Server && (fromClaudeCode(req) || b.OutputFormat == outputJSONSchema) {
		return false
	}
	last := lastConversational(b)
	if last == nil || last.Role != wire.RoleUser || !last.HumanText {
		return false
	}
	if strings.HasPrefix(strings.TrimSpace(last.Text), continuationPrefix) {
		return false
	}
	switch syntheticKind(last) {
	case SyntheticInterrupt:
		return true
	case "":
		return len(last.ToolResults) == 0
	}
	return false
}
