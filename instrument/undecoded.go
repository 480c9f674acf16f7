package instrument

// Requests whose body cctrace forwarded without decoding it still go on with their conversation.

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
