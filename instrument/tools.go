package instrument

import (
	"cmp"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Tool round trips: an execute_tool span runs from the end of its tool_use block to the request
// that carries its result.

const asyncAgentMarker = "Async agent launched"

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
	// input is the start of the call's input (wire.ToolUse.Input), and requests the chain of
	// the requests the call made of the API itself while it ran (nil before the first).
	input    string
	requests *chain
	// root and call are where span and span.Tool live (one allocation, not three).
	root Span
	call Tool
}

// endChainTools ends, with outcome, the tool calls still waiting for a result that ch asked for.
func (t *Tracker) endChainTools(sess *session, ch *chain, end time.Time, outcome ToolOutcome) {
	for _, id := range sortedToolIDs(sess.tools) {
		if tool := sess.tools[id]; tool.chain == ch {
			t.endTool(sess, id, tool, end, outcome, nil)
		}
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
	if ex.sub == nil && ex.turn != nil && ex.turn.ended {
		// The answer to a request of a turn that already ended (a new prompt interrupted it):
		// Claude Code runs none of its tool calls, and spans opened for them would never end.
		return
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
		ot := &openTool{turn: ex.turn, chain: ex.chain, sub: ex.sub, input: tu.Input}
		ot.call = Tool{Name: tu.Name, CallID: tu.ID, InputBytes: tu.InputBytes, Agent: tu.Agent}
		if t.cfg.capture {
			ot.call.Input = t.cfg.scrub(tu.Input)
		}
		ot.root = Span{
			TraceID:    parent.TraceID,
			ID:         t.spanID(),
			Parent:     parent.ID,
			Kind:       KindTool,
			Name:       t.names.join("execute_tool ", tu.Name),
			Start:      start,
			SessionID:  ex.sess.id,
			TurnIndex:  parent.TurnIndex,
			Agent:      ex.span.Agent,
			User:       ex.span.User,
			Team:       ex.span.Team,
			TurnTotals: turnTotals(ex.turn),
			Tool:       &ot.call,
		}
		span := &ot.root
		ot.span = span
		ex.sess.tools[tu.ID] = ot
		if tu.Agent != nil {
			ex.sess.agentCalls = append(ex.sess.agentCalls, ot)
			if n := len(ex.sess.agentCalls); n > 64 {
				ex.sess.agentCalls = ex.sess.agentCalls[n-64:]
			}
		}
		for tot := range counts(ex.turn, ex.sub) {
			tot.Add(span)
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
		if m.Role == wire.RoleUser && m.Synthetic == wire.SyntheticInterrupt {
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
			outcome := ToolSuccess
			switch {
			case r.IsError && interrupted:
				// Claude Code rejects the call it was running when the user interrupted.
				outcome = ToolInterrupted
			case r.IsError:
				outcome = ToolError
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

func (t *Tracker) endTool(sess *session, id string, tool *openTool, end time.Time, outcome ToolOutcome, r *wire.ToolResult) {
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
	if outcome != ToolSuccess && outcome != ToolOutcomeUnknown {
		span.Status, span.ErrorType = StatusError, string(outcome)
		if outcome == ToolError {
			span.ErrorType = "tool_error"
			span.StatusMessage = "the tool result has is_error set"
		}
	}
	for tot := range counts(tool.turn, tool.sub) {
		tot.Add(span)
	}
	t.sink.SpanEnded(span)
}

// toolFor finds the running tool call of chain ch's agent that made a request, if the request
// is one a tool makes of the API itself. The rule (docs/wire.md): a request of an agent that
// holds a conversation other than the agent's own and offers the client no tool, while a tool
// call of that agent runs, belongs to that call (WebSearch's search, WebFetch's question about
// the page it fetched). Among several: the call whose own requests it goes on with (a retry),
// else the one whose input it quotes, else the oldest that made none yet, else the newest. An
// Agent call's requests are its subagent's (subagents.go).
func (t *Tracker) toolFor(sess *session, ch *chain, body *wire.Body) *openTool {
	if !ch.seen || body.FirstHumanTextHash == ch.first || body.Tools.Count != body.Tools.Server {
		return nil
	}
	var quoted, fresh, newest *openTool
	for _, id := range sortedToolIDs(sess.tools) {
		tool := sess.tools[id]
		switch {
		case tool.chain != ch || tool.span.Tool.Agent != nil:
			continue
		case tool.requests != nil && tool.requests.first == body.FirstHumanTextHash:
			return tool
		case quoted == nil && quotes(body.FirstHumanText, tool.input):
			quoted = tool
		}
		if tool.requests == nil && (fresh == nil || tool.span.Start.Before(fresh.span.Start)) {
			fresh = tool
		}
		if newest == nil || tool.span.Start.After(newest.span.Start) {
			newest = tool
		}
	}
	return cmp.Or(quoted, fresh, newest)
}

// quotes reports whether text carries one of the string values of a tool call's input (a JSON
// object; its start when cut), such as a search's query.
func quotes(text, input string) bool {
	var values map[string]any
	if json.Unmarshal([]byte(input), &values) != nil {
		return false
	}
	for _, v := range values {
		if s, ok := v.(string); ok && len(s) >= minQuote && strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// minQuote is the shortest input value quotes looks for: shorter ones match by chance.
const minQuote = 8

// startToolRequest starts ex's chat span under the running tool call that made it: a request of
// the tool's own conversation with the API (WebSearch's search, WebFetch's question about the
// page), counted in the turn and the subagent the call counts in. Like a side request, it
// counts no new content blocks: the tool's result carries what came of it into the
// conversation.
func (t *Tracker) startToolRequest(ex *exchange, tool *openTool) {
	if tool.requests == nil {
		tool.requests = &chain{}
	}
	ch, req, chat := tool.requests, &ex.span.Chat.Request, ex.span.Chat
	body := req.Body
	chat.Kind = RequestTool
	if ch.seen && body.HistoryHash == ch.lastHash && (ch.failed || req.Headers.RetryCount > 0) {
		chat.Attempt = ch.attempt + 1
	}
	ex.chain, ex.tool, ex.sub = ch, tool, tool.sub
	ex.span.Agent = tool.span.Agent
	t.startChild(ex, tool.span, tool.turn)
	ch.seen, ch.lastHash, ch.attempt = true, body.HistoryHash, chat.Attempt
	ch.messages, ch.first = len(body.Messages), body.FirstHumanTextHash
}

func sortedToolIDs(tools map[string]*openTool) []string {
	ids := make([]string, 0, len(tools))
	for id := range tools {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
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
