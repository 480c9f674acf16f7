// Package instrument is cctrace's turn tracker: plain Go with no network, no goroutines and no
// globals. It is fed the exchanges the proxy saw (wire.Request, then wire.Response) and turns
// them into spans: one trace per agentic turn, with a chat span per API attempt, an execute_tool
// span per tool round trip, and subagents nested under the Agent tool call that started them.
// Sinks (OpenTelemetry, Prometheus, the terminal) translate those spans; nothing here knows them.
package instrument

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cctrace/cctrace/internal/wire"
)

// Markers Claude Code puts in requests, from captured traffic (see shared/wire-notes.md).
const (
	compactionPrompt   = "CRITICAL: Respond with TEXT ONLY"
	continuationPrefix = "This session is being continued from a previous conversation"
	interruptMarker    = "[Request interrupted by user"
	asyncAgentMarker   = "Async agent launched"
	mainAgentName      = "claude-code"
	// otherClientName names the main agent of sessions that show no sign of Claude Code (other
	// Messages API clients): their turns are traced the same way.
	otherClientName = "api-client"
	defaultSubagent = "general-purpose"
)

// Tracker turns a stream of exchanges into turns and spans. It is not safe for concurrent use:
// feed it from one goroutine. The zero value is not usable; call New.
type Tracker struct {
	cfg      config
	sink     Sink
	sessions map[string]*session
	open     map[uint64]*exchange
	reported int // last session count reported to the sink
}

// New returns a tracker that hands its spans to sink.
func New(sink Sink, opts ...Option) *Tracker {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return &Tracker{
		cfg:      cfg,
		sink:     sink,
		sessions: make(map[string]*session),
		open:     make(map[uint64]*exchange),
	}
}

// Sessions returns how many sessions the tracker holds.
func (t *Tracker) Sessions() int { return len(t.sessions) }

// Request tracks a request whose body has been read. req.Body must already be decoded (or nil).
// The tracker keeps req; callers must not modify it afterwards.
func (t *Tracker) Request(req *wire.Request) {
	now := req.Time
	sess := t.sessionFor(req)
	sess.lastSeen = now
	ex := &exchange{sess: sess, since: now}
	chat := &Chat{Request: *req, Kind: RequestOther}
	span := &Span{
		Kind:      KindChat,
		Name:      chatName(req),
		Start:     now,
		SessionID: sess.id,
		Agent:     sess.agent,
		Link:      parseTraceparent(req.Headers.Traceparent),
		Chat:      chat,
	}
	ex.span = span
	body := req.Body
	if body != nil {
		ex.hash = body.HistoryHash
		chat.Messages = len(body.Messages)
		chat.PlanMode = body.PlanMode
	}
	t.open[req.ExchangeID] = ex

	switch {
	case req.Endpoint == wire.EndpointCountTokens:
		chat.Kind = RequestCountTokens
		t.startSide(ex)
	case req.Endpoint != wire.EndpointMessages || body == nil:
		t.startSide(ex)
	case isCompactionSummary(body):
		chat.Kind = RequestCompaction
		t.startCompaction(ex)
	default:
		t.startConversational(ex)
	}
	if chat.Request.Body != nil {
		// The tracker is done with the history: keep the request's shape, not its messages.
		b := *chat.Request.Body
		b.Messages = nil
		chat.Request.Body = &b
	}
	t.reportSessions()
}

// Response completes the exchange that resp answers. Responses to unknown exchanges are ignored.
func (t *Tracker) Response(resp *wire.Response) {
	ex := t.open[resp.ExchangeID]
	if ex == nil {
		return
	}
	delete(t.open, resp.ExchangeID)
	span, chat := ex.span, ex.span.Chat
	chat.Response = resp
	span.End = endTime(resp, span.Start)
	failed := setChatStatus(span, resp)
	msg := resp.Message
	if ex.sess.evicted {
		// The session was evicted while this request was in flight: its turn and tools have
		// ended, and tool calls opened now would belong to nothing and never end.
		if !ex.orphan {
			t.sink.SpanEnded(span)
		}
		return
	}
	if ex.sess.lastSeen.Before(span.End) {
		ex.sess.lastSeen = span.End
	}

	if ch := ex.chain; ch != nil {
		ch.failed = failed
		if msg != nil && !failed {
			ch.context = msg.Usage.TotalInput()
			addBlocks(chat, wire.RoleAssistant, msg.Blocks)
		}
	}
	t.addTotals(ex, resp)
	if msg != nil && !failed && ex.chain != nil {
		t.openTools(ex, msg)
	}
	if ex.orphan {
		ex.done = true // the span is emitted when a turn adopts it, or by Tick
	} else {
		t.sink.SpanEnded(span)
	}
	t.afterResponse(ex, resp, failed)
}

// Tick ends what has been idle for too long: turns waiting for a next request, side requests
// waiting for a turn, and whole sessions. Call it periodically with the current time.
func (t *Tracker) Tick(now time.Time) {
	for _, sess := range t.sessions {
		if tr := sess.turn; tr != nil && !tr.deadline.IsZero() && now.After(tr.deadline) {
			outcome := "idle_timeout"
			switch {
			case tr.canceled:
				outcome = "interrupted"
			case tr.failed:
				outcome = "error"
			}
			t.endTurn(sess, tr.lastSeen, outcome, "")
		}
		t.flushOrphans(sess, now, false)
		if now.Sub(sess.lastSeen) > t.cfg.sessionTimeout {
			t.evict(sess, now, "evicted")
		}
	}
	t.reportSessions()
}

// Close ends every open span as of now (outcome "shutdown") and forgets all state.
func (t *Tracker) Close(now time.Time) {
	ids := make([]uint64, 0, len(t.open))
	for id := range t.open {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ex := t.open[id]
		delete(t.open, id)
		ex.span.End = now
		ex.span.Status, ex.span.ErrorType, ex.span.StatusMessage = StatusError, "shutdown", "cctrace stopped before the response ended"
		if !ex.orphan {
			t.sink.SpanEnded(ex.span)
		} else {
			ex.done = true
		}
	}
	for _, sess := range t.sortedSessions() {
		t.evict(sess, now, "shutdown")
	}
	t.reportSessions()
}

// sessionFor finds or creates the session a request belongs to: Claude Code's session header,
// else the session inside metadata.user_id, else a fingerprint of the conversation.
func (t *Tracker) sessionFor(req *wire.Request) *session {
	id := req.Headers.SessionID
	if id == "" && req.Body != nil {
		id = req.Body.MetadataSessionID
		if id == "" && req.Body.FirstHumanTextHash != 0 {
			id = fmt.Sprintf("fp-%016x", req.Body.FirstHumanTextHash)
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
		t.evict(oldest, req.Time, "evicted")
	}
	s := &session{
		id:     id,
		agent:  otherClientName,
		agents: make(map[string]*chain),
		tools:  make(map[string]*openTool),
	}
	if req.Headers.SessionID != "" || strings.HasPrefix(req.Headers.UserAgent, "claude-cli/") ||
		(req.Body != nil && req.Body.System.BillingHeader != "") {
		s.agent = mainAgentName
	}
	t.sessions[id] = s
	return s
}

// startSide places a side request (title, count_tokens, anything not part of a conversation) in
// the open turn, or holds it for the next turn for a short while.
func (t *Tracker) startSide(ex *exchange) {
	if ex.span.Chat.Kind == RequestOther && ex.span.Chat.Request.Endpoint == wire.EndpointMessages {
		ex.span.Chat.Kind = RequestAuxiliary
	}
	if tr := ex.sess.turn; tr != nil {
		t.startChild(ex, tr.span, tr)
		return
	}
	ex.orphan = true
	ex.sess.orphans = append(ex.sess.orphans, ex)
}

// startChild starts ex's chat span under parent, counting into tr.
func (t *Tracker) startChild(ex *exchange, parent *Span, tr *turn) {
	ex.turn = tr
	ex.span.TraceID, ex.span.Parent, ex.span.ID = parent.TraceID, parent.ID, t.spanID()
	ex.span.TurnIndex = parent.TurnIndex
	t.sink.SpanStarted(ex.span)
}

// startCompaction handles a compaction summary request: inside an open turn it is a span of that
// turn (an automatic compaction); otherwise it is a trace of its own (a /compact command).
func (t *Tracker) startCompaction(ex *exchange) {
	sess := ex.sess
	ex.chain = &sess.main
	body := ex.span.Chat.Request.Body
	t.closeTools(sess, body, ex.span.Start)
	ex.chain.seen, ex.chain.lastHash, ex.chain.lastKind = true, ex.hash, RequestCompaction
	ex.chain.messages = len(body.Messages)
	if tr := sess.turn; tr != nil && !tr.compactionOnly {
		t.startChild(ex, tr.span, tr)
		return
	}
	tr := t.startTurn(sess, ex.span.Start, ex)
	tr.compactionOnly = true
	tr.span.Turn.Compaction = "manual"
	tr.span.Turn.Trigger = "compaction"
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
	interrupted, matched := t.closeTools(sess, body, req.Time)
	// A human prompt starts a turn, unless the same message answers tool calls of the open turn
	// (text the user queued while tools ran); an interruption always ends the open one.
	newPrompt := interrupted || (last != nil && last.Role == wire.RoleUser && last.HumanText && !matched)

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
		ex.sub = sub
		ex.span.Agent = sub.span.Agent
		t.startChild(ex, sub.span, sub.turn)
	} else {
		if !retry {
			chat.Kind = RequestToolResults
			if last == nil || len(last.ToolResults) == 0 {
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
			case body.TaskNotification:
				tr.span.Turn.Trigger = "task_notification"
			case newPrompt:
				chat.Kind = RequestTurn
			case compaction == nil:
				tr.span.Turn.Trigger = "continuation"
			}
		}
		t.trackPlanMode(sess, tr, body.PlanMode, req.Time)
		tr.deadline = time.Time{}
		tr.canceled = false
		tr.lastSeen = req.Time
		t.startChild(ex, tr.span, tr)
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

// chainFor finds the chain of a conversational request, creating a subagent run when a new
// subagent shows up. It returns a nil chain for side requests.
func (t *Tracker) chainFor(ex *exchange) (*chain, *subagentRun) {
	req := &ex.span.Chat.Request
	body := req.Body
	sess := ex.sess
	key := ""
	switch {
	case req.Headers.AgentID != "":
		key = "agent:" + req.Headers.AgentID
	case body.System.Subagent:
		key = fmt.Sprintf("prompt:%016x", body.FirstHumanTextHash)
	default:
		if ch := sess.agents[fmt.Sprintf("prompt:%016x", body.FirstHumanTextHash)]; ch != nil {
			key = fmt.Sprintf("prompt:%016x", body.FirstHumanTextHash)
		} else if t.agentCallFor(sess, body.FirstHumanTextHash, false) != nil {
			key = fmt.Sprintf("prompt:%016x", body.FirstHumanTextHash)
		}
	}
	if key == "" {
		if !body.Tools.Present || body.Tools.Count == 0 {
			return nil, nil // a side request: titles, classifiers, …
		}
		return &sess.main, nil
	}
	ch := sess.agents[key]
	if ch == nil {
		ch = &chain{}
		sess.agents[key] = ch
	}
	if ch.sub == nil || ch.sub.ended {
		ch.sub = t.startSubagent(ex)
	}
	return ch, ch.sub
}

// agentCallFor finds the Agent tool call that a subagent's first request answers: the one whose
// prompt it carries, or, when any is allowed, the oldest Agent call still without a subagent.
func (t *Tracker) agentCallFor(sess *session, promptHash uint64, any bool) *openTool {
	for _, tool := range sess.agentCalls {
		if tool.span.Tool.Agent != nil && tool.span.Tool.Agent.PromptHash == promptHash {
			return tool
		}
	}
	if any && len(sess.agentCalls) > 0 {
		return sess.agentCalls[0]
	}
	return nil
}

// startSubagent opens the span of a new subagent under the Agent tool call that started it, or
// under the open turn when no call matches, or as a trace of its own.
func (t *Tracker) startSubagent(ex *exchange) *subagentRun {
	req := &ex.span.Chat.Request
	sess := ex.sess
	run := &subagentRun{}
	sa := &Subagent{Type: defaultSubagent, AgentID: req.Headers.AgentID}
	span := &Span{
		Kind:      KindSubagent,
		Start:     req.Time,
		SessionID: sess.id,
		Subagent:  sa,
	}
	var parent *Span
	if call := t.agentCallFor(sess, req.Body.FirstHumanTextHash, true); call != nil {
		call.subagent = run
		t.dropAgentCall(sess, call)
		parent, run.turn = call.span, call.turn
		if a := call.span.Tool.Agent; a != nil {
			if a.SubagentType != "" {
				sa.Type = a.SubagentType
			}
			sa.Background = a.RunInBackground || call.async
		}
	} else if tr := sess.turn; tr != nil {
		parent, run.turn = tr.span, tr
	}
	span.Agent = sa.Type
	span.Name = "invoke_agent " + sa.Type
	span.ID = t.spanID()
	if parent != nil {
		span.TraceID, span.Parent, span.TurnIndex = parent.TraceID, parent.ID, parent.TurnIndex
	} else {
		span.TraceID = t.traceID()
	}
	run.span = span
	if run.turn != nil && !run.turn.ended {
		run.turn.span.Turn.Subagents++
	}
	t.sink.SpanStarted(span)
	return run
}

func (t *Tracker) dropAgentCall(sess *session, call *openTool) {
	for i, c := range sess.agentCalls {
		if c == call {
			sess.agentCalls = append(sess.agentCalls[:i], sess.agentCalls[i+1:]...)
			return
		}
	}
}

// startTurn opens a new turn in sess, ending the open one as interrupted, and adopts side
// requests that were waiting for it.
func (t *Tracker) startTurn(sess *session, now time.Time, ex *exchange) *turn {
	if sess.turn != nil {
		t.endTurn(sess, now, "interrupted", "")
	}
	sess.turns++
	start := now
	for _, o := range sess.orphans {
		if o.span.Start.Before(start) {
			start = o.span.Start
		}
	}
	tr := &turn{lastSeen: now}
	tr.span = &Span{
		TraceID:   t.traceID(),
		ID:        t.spanID(),
		Kind:      KindTurn,
		Name:      "invoke_agent " + sess.agent,
		Start:     start,
		SessionID: sess.id,
		TurnIndex: sess.turns,
		Agent:     sess.agent,
		Link:      ex.span.Link,
		Turn: &Turn{
			Index:        sess.turns,
			Trigger:      "prompt",
			ToolCounts:   make(map[string]int),
			ToolFailures: make(map[string]int),
		},
	}
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
		o.span.TurnIndex = tr.span.TurnIndex
		if o.done {
			t.addTotals(o, o.span.Chat.Response)
		}
		t.emitLate(o)
	}
	return tr
}

// endTurn ends the open turn of sess at end with outcome; tools still waiting for results end
// with it.
func (t *Tracker) endTurn(sess *session, end time.Time, outcome, stopReason string) {
	tr := sess.turn
	if tr == nil {
		return
	}
	sess.turn = nil
	tr.ended = true
	toolOutcome := "abandoned"
	if outcome == "interrupted" || outcome == "shutdown" || outcome == "evicted" {
		toolOutcome = outcome
	}
	for _, id := range sortedToolIDs(sess.tools) {
		tool := sess.tools[id]
		if tool.turn == tr && tool.chain == &sess.main {
			t.endTool(sess, id, tool, end, toolOutcome, nil)
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
		span.Turn.Outcome = "compaction"
		if outcome != "end_turn" && stopReason == "" {
			span.Turn.Outcome = outcome
		}
	}
	switch outcome {
	case "error", "idle_timeout":
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

	if sub := ex.sub; sub != nil {
		if !failed && msg != nil && !waits && !sub.ended {
			sub.ended = true
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
	default:
		if tr.compactionOnly {
			sess.compacting = &pendingCompaction{messagesBefore: sess.main.messages, contextBefore: sess.main.context}
		}
		t.endTurn(sess, end, stop, stop)
	}
}

// openTools starts an execute_tool span for each tool_use of a response.
func (t *Tracker) openTools(ex *exchange, msg *wire.MessageInfo) {
	var parent *Span
	switch {
	case ex.sub != nil:
		parent = ex.sub.span
	case ex.turn != nil:
		parent = ex.turn.span
	default:
		return // a side request that no turn adopted: its tool calls belong to nothing
	}
	for _, tu := range msg.ToolUses {
		if tu.ID == "" {
			continue
		}
		if old := ex.sess.tools[tu.ID]; old != nil {
			continue // a duplicated id: the first call keeps it
		}
		start := tu.End
		if start.IsZero() {
			start = ex.span.End
		}
		tool := &Tool{Name: tu.Name, CallID: tu.ID, InputBytes: tu.InputBytes, Agent: tu.Agent}
		if t.cfg.capture {
			tool.Input = t.cfg.scrub(tu.Input)
		}
		span := &Span{
			TraceID:   parent.TraceID,
			ID:        t.spanID(),
			Parent:    parent.ID,
			Kind:      KindTool,
			Name:      "execute_tool " + tu.Name,
			Start:     start,
			SessionID: ex.sess.id,
			TurnIndex: parent.TurnIndex,
			Agent:     ex.span.Agent,
			Tool:      tool,
		}
		ot := &openTool{span: span, turn: ex.turn, chain: ex.chain}
		ex.sess.tools[tu.ID] = ot
		if tu.Agent != nil {
			ex.sess.agentCalls = append(ex.sess.agentCalls, ot)
			if n := len(ex.sess.agentCalls); n > 64 {
				ex.sess.agentCalls = ex.sess.agentCalls[n-64:]
			}
		}
		if tr := ex.turn; tr != nil && !tr.ended {
			tr.span.Turn.ToolCalls++
			tr.span.Turn.ToolCounts[tu.Name]++
		}
		t.sink.SpanStarted(span)
	}
}

// closeTools ends the tool spans whose results the request's trailing user messages (those after
// the last assistant message) carry. Results for ids the tracker is not waiting on (resent
// history, unknown ids) are ignored. It reports whether those messages say the user interrupted
// the turn, and whether any result answered a call the tracker was waiting on.
func (t *Tracker) closeTools(sess *session, body *wire.Body, now time.Time) (interrupted, matched bool) {
	from := len(body.Messages)
	for from > 0 && body.Messages[from-1].Role != wire.RoleAssistant {
		from--
	}
	trailing := body.Messages[from:]
	for _, m := range trailing {
		if m.Role == wire.RoleUser && strings.Contains(m.Text, interruptMarker) {
			interrupted = true
		}
	}
	for _, m := range trailing {
		if m.Role != wire.RoleUser {
			continue
		}
		for i := range m.ToolResults {
			r := &m.ToolResults[i]
			tool := sess.tools[r.ToolUseID]
			if tool == nil {
				continue
			}
			matched = true
			outcome := "success"
			switch {
			case r.IsError && interrupted:
				// Claude Code rejects the call it was running when the user interrupted.
				outcome = "interrupted"
			case r.IsError:
				outcome = "error"
			}
			if tool.span.Tool.Agent != nil && strings.Contains(r.Preview, asyncAgentMarker) {
				// Claude Code ran the subagent in the background (the default in -p mode).
				tool.async = true
				if tool.subagent != nil {
					tool.subagent.span.Subagent.Background = true
				}
			}
			t.endTool(sess, r.ToolUseID, tool, now, outcome, r)
		}
	}
	return interrupted, matched
}

func (t *Tracker) endTool(sess *session, id string, tool *openTool, end time.Time, outcome string, r *wire.ToolResult) {
	delete(sess.tools, id)
	span := tool.span
	if end.Before(span.Start) {
		end = span.Start
	}
	span.End = end
	span.Tool.Outcome = outcome
	if r != nil {
		span.Tool.ResultBytes = r.Bytes
		if t.cfg.capture {
			span.Tool.Result = t.cfg.scrub(r.Preview)
		}
	}
	if outcome != "success" {
		span.Status, span.ErrorType = StatusError, outcome
		if outcome == "error" {
			span.ErrorType = "tool_error"
			span.StatusMessage = "the tool result has is_error set"
			if tr := tool.turn; tr != nil && !tr.ended {
				tr.span.Turn.ToolErrors++
				tr.span.Turn.ToolFailures[span.Tool.Name]++
			}
		}
	}
	t.sink.SpanEnded(span)
}

// addTotals adds a finished request to its turn's and subagent's totals.
func (t *Tracker) addTotals(ex *exchange, resp *wire.Response) {
	if resp == nil {
		return
	}
	var u wire.Usage
	model := ""
	if m := resp.Message; m != nil {
		u, model = m.Usage, m.Model
	}
	if model == "" && ex.span.Chat.Request.Body != nil {
		model = ex.span.Chat.Request.Body.Model
	}
	if sub := ex.sub; sub != nil {
		sub.span.Subagent.Requests++
		sub.span.Subagent.Usage = addUsage(sub.span.Subagent.Usage, u)
	}
	tr := ex.turn
	if tr == nil || tr.ended {
		return
	}
	tt := tr.span.Turn
	tt.Requests++
	if ex.span.Chat.Attempt > 0 {
		tt.Retries++
	}
	tt.Usage = addUsage(tt.Usage, u)
	if model != "" && !contains(tt.Models, model) {
		tt.Models = append(tt.Models, model)
	}
}

// countNewBlocks counts the content blocks a request carries for the first time in its chain:
// the messages beyond those of the chain's last request (all of them when the history was
// rewritten, as after a compaction). Assistant blocks are counted from responses instead.
func (t *Tracker) countNewBlocks(chat *Chat, ch *chain, body *wire.Body) {
	from := ch.messages
	if !ch.seen || from > len(body.Messages) {
		from = 0
	}
	for _, m := range body.Messages[from:] {
		if m.Role != wire.RoleAssistant {
			addBlocks(chat, m.Role, m.Blocks)
		}
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

// flushOrphans emits side requests that waited for a turn in vain as traces of their own: all
// of them when force is set, else those older than the adoption window.
func (t *Tracker) flushOrphans(sess *session, now time.Time, force bool) {
	kept := sess.orphans[:0]
	for _, o := range sess.orphans {
		if !force && now.Sub(o.since) <= t.cfg.adoptWindow {
			kept = append(kept, o)
			continue
		}
		o.orphan = false
		o.span.TraceID, o.span.ID = t.traceID(), t.spanID()
		t.emitLate(o)
	}
	for i := len(kept); i < len(sess.orphans); i++ {
		sess.orphans[i] = nil
	}
	sess.orphans = kept
}

// emitLate starts the span of a side request that waited for a turn, and ends it too when its
// response has already ended.
func (t *Tracker) emitLate(o *exchange) {
	end := o.span.End
	o.span.End = time.Time{}
	t.sink.SpanStarted(o.span)
	if o.done {
		o.span.End = end
		t.sink.SpanEnded(o.span)
	}
}

// evict ends everything open in sess and forgets it.
func (t *Tracker) evict(sess *session, now time.Time, outcome string) {
	t.flushOrphans(sess, now, true)
	if sess.turn != nil {
		end := now
		if outcome == "evicted" {
			end = sess.turn.lastSeen
		}
		t.endTurn(sess, end, outcome, "")
	}
	for _, id := range sortedToolIDs(sess.tools) {
		t.endTool(sess, id, sess.tools[id], now, outcome, nil)
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
			sub.span.Status, sub.span.ErrorType = StatusError, outcome
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

func (t *Tracker) traceID() TraceID {
	var id TraceID
	for !id.IsValid() {
		putUint64(id[:8], t.cfg.idSource())
		putUint64(id[8:], t.cfg.idSource())
	}
	return id
}

func (t *Tracker) spanID() SpanID {
	var id SpanID
	for !id.IsValid() {
		putUint64(id[:], t.cfg.idSource())
	}
	return id
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// setChatStatus sets a chat span's status from its response and reports whether it failed.
func setChatStatus(span *Span, resp *wire.Response) bool {
	set := func(errType, msg string) bool {
		span.Status, span.ErrorType, span.StatusMessage = StatusError, errType, msg
		return true
	}
	switch {
	case resp.Canceled:
		return set("canceled", "the client went away before the response ended")
	case resp.Status == 0 || (resp.Err != "" && resp.Status >= 500 && resp.BodySize == 0 && resp.Message == nil):
		return set("transport_error", resp.Err)
	case resp.Status >= 400:
		errType := resp.ErrorType
		if errType == "" {
			errType = fmt.Sprint(resp.Status)
		}
		return set(errType, resp.ErrorMessage)
	case resp.ErrorType != "":
		return set(resp.ErrorType, resp.ErrorMessage)
	case resp.Err != "":
		return set("transport_error", resp.Err)
	case resp.Streamed && resp.Incomplete:
		return set("incomplete_stream", "the event stream ended without message_stop")
	}
	span.Status = StatusOK
	return false
}

func endTime(resp *wire.Response, start time.Time) time.Time {
	end := resp.End
	if end.IsZero() {
		end = resp.HeaderTime
	}
	if end.Before(start) {
		end = start
	}
	return end
}

func isCompactionSummary(b *wire.Body) bool {
	last := lastConversational(b)
	return last != nil && last.Role == wire.RoleUser && strings.HasPrefix(strings.TrimSpace(last.Text), compactionPrompt)
}

func chatName(req *wire.Request) string {
	switch {
	case req.Endpoint == wire.EndpointOther:
		return req.Method + " " + req.Path
	case req.Body != nil && req.Body.Model != "":
		return "chat " + req.Body.Model
	}
	return "chat"
}

func addBlocks(chat *Chat, role wire.Role, blocks map[wire.BlockType]int) {
	for typ, n := range blocks {
		if n == 0 {
			continue
		}
		if chat.NewBlocks == nil {
			chat.NewBlocks = make(map[BlockKey]int)
		}
		chat.NewBlocks[BlockKey{Role: role, Type: typ}] += n
	}
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

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sortedToolIDs(tools map[string]*openTool) []string {
	ids := make([]string, 0, len(tools))
	for id := range tools {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// parseTraceparent decodes a W3C traceparent header ("00-<trace>-<span>-<flags>").
func parseTraceparent(h string) *LinkedSpan {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return nil
	}
	var l LinkedSpan
	if _, err := hex.Decode(l.TraceID[:], []byte(parts[1])); err != nil || !l.TraceID.IsValid() {
		return nil
	}
	if _, err := hex.Decode(l.SpanID[:], []byte(parts[2])); err != nil || !l.SpanID.IsValid() {
		return nil
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(parts[3])); err != nil {
		return nil
	}
	l.Sampled = flags[0]&1 == 1
	return &l
}
