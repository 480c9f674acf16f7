package instrument

// Subagents: a request with its own agent id, the subagent billing marker, or the prompt of a
// pending Agent call starts (or continues) a subagent under that call.

const defaultSubagent = "general-purpose"

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

// chainFor finds the chain of a conversational request, creating a subagent run when a new
// subagent shows up. It returns the running tool call instead when the request is one that call
// makes (toolFor), and a nil chain for a side request (continuesMain).
func (t *Tracker) chainFor(ex *exchange) (*chain, *subagentRun, *openTool) {
	req := &ex.span.Chat.Request
	body := req.Body
	sess := ex.sess
	// The key is built in buf; it becomes a string only when a new chain is stored under it.
	var buf [64]byte
	var key []byte
	switch {
	case req.Headers.AgentID != "":
		key = agentKey(buf[:0], req.Headers.AgentID)
	case body.System.Subagent:
		key = promptKey(buf[:0], body.FirstHumanTextHash)
	default:
		k := promptKey(buf[:0], body.FirstHumanTextHash)
		if sess.agents[string(k)] != nil || t.agentCallFor(sess, body.FirstHumanTextHash, false) != nil {
			key = k
		}
	}
	if key == nil {
		if tool := t.toolFor(sess, &sess.main, body); tool != nil {
			return nil, nil, tool
		}
		if !t.continuesMain(ex) {
			return nil, nil, nil
		}
		return &sess.main, nil, nil
	}
	ch := sess.agents[string(key)]
	if ch == nil {
		ch = &chain{}
		sess.agents[string(key)] = ch
	}
	if ch.sub != nil && !ch.sub.ended {
		if tool := t.toolFor(sess, ch, body); tool != nil {
			return nil, nil, tool
		}
	}
	if ch.sub == nil || ch.sub.ended {
		ch.sub = t.startSubagent(ex)
	}
	return ch, ch.sub, nil
}

// agentKey appends the key of the subagent chain whose requests carry agent id id.
func agentKey(dst []byte, id string) []byte {
	return append(append(dst, "agent:"...), id...)
}

// promptKey appends the key of the subagent chain whose first human text hashes to h.
func promptKey(dst []byte, h uint64) []byte {
	return appendHash(append(dst, "prompt:"...), h)
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
	run.totals = Subagent{Type: defaultSubagent, AgentID: req.Headers.AgentID}
	sa := &run.totals
	run.root = Span{
		Kind:      KindSubagent,
		Start:     req.Time,
		SessionID: sess.id,
		User:      ex.span.User,
		Team:      ex.span.Team,
		Subagent:  sa,
	}
	span := &run.root
	var parent *Span
	if call := t.agentCallFor(sess, req.Body.FirstHumanTextHash, true); call != nil {
		call.subagent = run
		t.dropAgentCall(sess, call)
		parent, run.turn, run.parent = call.span, call.turn, call.sub
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
	span.Name = t.names.join("invoke_agent ", sa.Type)
	span.ID = t.spanID()
	if parent != nil {
		span.TraceID, span.Parent, span.TurnIndex = parent.TraceID, parent.ID, parent.TurnIndex
	} else {
		span.TraceID = t.traceID()
	}
	run.span = span
	span.TurnTotals = turnTotals(run.turn)
	for tot := range counts(run.turn, run.parent) {
		tot.Add(span)
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

// joinRun starts ex's chat span in the subagent run sub.
func (t *Tracker) joinRun(ex *exchange, sub *subagentRun) {
	ex.sub = sub
	ex.span.Agent = sub.span.Agent
	t.startChild(ex, sub.span, sub.turn)
}

// endRun ends ex's subagent run when ex's answer is final: it stops for good, neither failed nor
// waiting for tools. A subagent that has answered for good runs none of the tool calls it left
// without a result.
func (t *Tracker) endRun(ex *exchange, final bool) {
	sub := ex.sub
	if !final || sub.ended {
		return
	}
	sub.ended = true
	end := ex.span.End
	t.endChainTools(ex.sess, ex.chain, end, ToolAbandoned)
	sub.span.End = end
	t.sink.SpanEnded(sub.span)
}
