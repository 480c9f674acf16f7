package instrument

import "fmt"

// Subagents: a request with its own agent id, the subagent billing marker, or the prompt of a
// pending Agent call starts (or continues) a subagent under that call.

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
