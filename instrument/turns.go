package instrument

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Turns: what starts, continues and ends an agentic turn, compactions included.

// startCompaction handles a compaction summary request: inside an open turn it is a span of that
// turn (an automatic compaction); otherwise it is a trace of its own (a /compact command).
func (t *Tracker) startCompaction(ex *exchange) {
	sess := ex.sess
	ex.chain = &sess.main
	body := ex.span.Chat.Request.Body
	ex.span.Chat.Synthetic = SyntheticCompaction
	t.closeTools(sess, body, ex.span.Start)
	t.countNewBlocks(ex.span.Chat, ex.chain, body)
	ex.chain.seen, ex.chain.lastHash, ex.chain.lastKind = true, ex.hash, RequestCompaction
	ex.chain.messages = len(body.Messages)
	if tr := sess.turn; tr != nil && !tr.compactionOnly {
		t.joinTurn(ex, tr, ex.span.Start)
		return
	}
	tr := t.startTurn(sess, ex.span.Start, ex)
	tr.compactionOnly = true
	tr.span.Turn.Compaction = "manual"
	tr.span.Turn.Trigger = TriggerCompaction
	t.startChild(ex, tr.span, tr)
}

// undecodedMainMin is the smallest request body of the main agent that, left undecoded, is taken
// for a request of its conversation rather than a side request: Claude Code's side requests
// (session titles and the like) are a few KB, and the proxy always copies bodies of up to
// 64 KiB, so only a full decode queue leaves a smaller one undecoded.
const undecodedMainMin = 64 << 10

// startUndecoded handles a Messages API request whose body cctrace forwarded without decoding it
// (a memory budget was full: wire.IsNotDecoded). What it carries is unknown, but its headers and
// size say which conversation it goes on with: a subagent's (its agent id header) that
// subagent's run, a large one of the main agent the main chain's turn, or a new turn when none
// is open. Claude Code sends the results of every tool call of a chain's last answer with the
// chain's next request, this one, unread: those calls end here, with outcome "unknown". The
// tool calls of its own answer are opened as any others, so that the next request's results end
// them. Anything else is placed as a side request. Without this, under overload a request of
// the main agent became a side request, the tool calls it answered ended as abandoned, and
// those of its answer were never traced.
func (t *Tracker) startUndecoded(ex *exchange) {
	req := &ex.span.Chat.Request
	sess := ex.sess
	now := req.Time
	if id := req.Headers.AgentID; id != "" {
		var buf [64]byte
		ch := sess.agents[string(agentKey(buf[:0], id))]
		if ch == nil || ch.sub == nil || ch.sub.ended {
			t.startSide(ex)
			return
		}
		ex.chain = ch
		t.endChainTools(sess, ch, now, ToolOutcomeUnknown)
		t.joinRun(ex, ch.sub)
		return
	}
	if req.BodySize < undecodedMainMin {
		t.startSide(ex)
		return
	}
	ex.chain = &sess.main
	t.endChainTools(sess, ex.chain, now, ToolOutcomeUnknown)
	tr := sess.turn
	if tr == nil || tr.compactionOnly {
		tr = t.startTurn(sess, now, ex)
		tr.span.Turn.Trigger = TriggerUndecoded
	}
	t.joinTurn(ex, tr, now)
}

// joinRun starts ex's chat span in the subagent run sub.
func (t *Tracker) joinRun(ex *exchange, sub *subagentRun) {
	ex.sub = sub
	ex.span.Agent = sub.span.Agent
	t.startChild(ex, sub.span, sub.turn)
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

	ch, sub := t.chainFor(ex)
	if ch == nil {
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
	ch.messages = len(body.Messages)
}

// compactionFor recognises the first request after a compaction: its first human text is the
// continuation summary, and either a summary was just produced, or the chain is new (a resumed
// session), or the history shrank. Later requests repeat the same first message with a growing
// history, so they do not match.
func (t *Tracker) compactionFor(sess *session, ch *chain, body *wire.Body, retry bool) *pendingCompaction {
	if retry || ch.sub != nil || !strings.HasPrefix(body.FirstHumanText, continuationPrefix) {
		return nil
	}
	if c := sess.compacting; c != nil {
		sess.compacting = nil
		return c
	}
	if !ch.seen || len(body.Messages) < ch.messages {
		return &pendingCompaction{messagesBefore: ch.messages, contextBefore: ch.context}
	}
	return nil
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
	tr.totals = Turn{
		Index:        sess.turns,
		Trigger:      TriggerPrompt,
		ToolCounts:   make(map[string]int),
		ToolFailures: make(map[string]int),
	}
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
		o.span.TurnIndex = tr.span.TurnIndex
		if o.done {
			t.addTotals(o, o.span.Chat.Response)
		}
		t.emitLate(o)
	}
	return tr
}

// turnTraceID returns the trace id of a turn that body (the first request of it the tracker
// sees) goes on with: a hash of the session, the conversation's first human text and the index
// of the message that opened the turn (wire.Body.TurnOpener). Every request of a turn carries
// them, so a cctrace that picks a session up mid-turn (another replica, or this one after a
// restart) puts its part of the turn in the same trace (up to a limit wire.Body.TurnOpener
// names). Without them (a body not decoded, no message that opens a turn) the id is random, and
// so it is in a session the client did not name (a fingerprint of its first text, or
// "unknown"): people whose conversations begin alike share such a session id, and must not
// share trace ids.
//
// Two turns of one session can open at the same message: the user rewinds the conversation and
// prompts again, or sends a prompt again that Claude Code put back after an interruption before
// any answer. The second one seen here hashes in how many came before it, so no trace holds two
// turns (of the last maxTurnTraces); another replica that picks such a turn up mid-way cannot
// tell, and joins the first. (And a part of such a turn that was handed off and comes back
// here starts a trace of its own.)
func (t *Tracker) turnTraceID(sess *session, body *wire.Body) TraceID {
	if body == nil || body.TurnOpener < 0 || !sess.clientID {
		return t.traceID()
	}
	b := append(t.hashBuf[:0], sess.id...)
	b = binary.BigEndian.AppendUint64(b, body.FirstHumanTextHash)
	b = binary.BigEndian.AppendUint64(b, uint64(body.TurnOpener))
	var id TraceID
	sum := sha256.Sum256(b)
	copy(id[:], sum[:])
	if !t.traces.claim(id) {
		b = binary.BigEndian.AppendUint64(append(b[:0], id[:]...), t.traces.again(id))
		sum = sha256.Sum256(b)
		copy(id[:], sum[:])
		t.traces.claim(id)
	}
	t.hashBuf = b[:0]
	if !id.IsValid() {
		return t.traceID()
	}
	return id
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

// toolOutcomeOf is the outcome of a tool call still waiting for its result when its turn ends
// with outcome.
func toolOutcomeOf(outcome Outcome) ToolOutcome {
	switch outcome {
	case OutcomeInterrupted:
		return ToolInterrupted
	case OutcomeShutdown:
		return ToolShutdown
	case OutcomeEvicted:
		return ToolEvicted
	case OutcomeHandedOff:
		return ToolHandedOff
	}
	return ToolAbandoned
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

	if sub := ex.sub; sub != nil {
		if !failed && msg != nil && !waits && !sub.ended {
			sub.ended = true
			// A subagent that has answered for good runs none of the tool calls it left
			// without a result.
			t.endChainTools(sess, ex.chain, end, ToolAbandoned)
			sub.span.End = end
			t.sink.SpanEnded(sub.span)
		}
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

// addTotals adds a finished request to its turn's totals, and to those of the subagent it ran
// in and of the subagents that started that one.
func (t *Tracker) addTotals(ex *exchange, resp *wire.Response) {
	if resp == nil {
		return
	}
	chat := ex.span.Chat
	var u wire.Usage
	model := ""
	if m := resp.Message; m != nil {
		u, model = m.Usage, m.Model
	}
	if model == "" && chat.Request.Body != nil {
		model = chat.Request.Body.Model
	}
	for sa := range ex.sub.openTotals() {
		sa.Requests++
		if chat.Attempt > 0 {
			sa.Retries++
		}
		sa.Usage = addUsage(sa.Usage, u)
		chat.AddCost(&sa.Cost, &sa.Unpriced)
	}
	tr := ex.turn
	if tr == nil || tr.ended {
		return
	}
	tt := tr.span.Turn
	tt.Requests++
	if chat.Attempt > 0 {
		tt.Retries++
	}
	tt.Usage = addUsage(tt.Usage, u)
	chat.AddCost(&tt.Cost, &tt.Unpriced)
	if model != "" && !contains(tt.Models, model) {
		if tt.Models == nil {
			tt.Models = tr.firstModel[:0] // most turns use one model
		}
		tt.Models = append(tt.Models, model)
	}
}

// price sets the cost of chat's answer (see WithPricing).
func (t *Tracker) price(chat *Chat) {
	if t.cfg.price == nil || chat.Response == nil || chat.Response.Message == nil {
		return
	}
	msg := chat.Response.Message
	if b := chat.Request.Body; b != nil && b.Model != "" {
		if chat.Cost, chat.Priced = t.cfg.price(b.Model, msg.Usage); chat.Priced {
			return
		}
	}
	if msg.Model != "" {
		chat.Cost, chat.Priced = t.cfg.price(msg.Model, msg.Usage)
	}
	chat.Unpriced = !chat.Priced
}

// AddCost adds the cost of c's answer to a total, or counts it as unpriced when the price table
// (WithPricing) could not price its usage.
func (c *Chat) AddCost(total *float64, unpriced *int) {
	switch {
	case c.Priced:
		*total += c.Cost
	case c.Unpriced:
		*unpriced++
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

func addUsage(a, b wire.Usage) wire.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadInputTokens += b.CacheReadInputTokens
	a.CacheCreationInputTokens += b.CacheCreationInputTokens
	a.CacheCreation5m += b.CacheCreation5m
	a.CacheCreation1h += b.CacheCreation1h
	return a
}
