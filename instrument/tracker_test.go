package instrument

import (
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

func TestToolRoundTrip(t *testing.T) {
	c := newConvo(t)
	p := user("list the files")
	id := c.send(p)
	c.reply(id, "tool_use", usage(10, 20, 1000, 50), tool("toolu_1", "Bash"))
	c.tick(2 * time.Second) // the tool runs
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(5, 30, 1060, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=1 in=2125 out=50]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
	// The tool span runs from the end of its tool_use block to the request carrying its result.
	var toolSpan *Span
	for _, s := range c.rec.spans {
		if s.Kind == KindTool {
			toolSpan = s
		}
	}
	if d := toolSpan.End.Sub(toolSpan.Start); d < 2*time.Second || d > 3*time.Second {
		t.Errorf("tool span lasted %v, want about 2s", d)
	}
	if toolSpan.Tool.CallID != "toolu_1" || toolSpan.SessionID != c.session || toolSpan.TurnIndex != 1 {
		t.Errorf("tool span = %+v", toolSpan)
	}
}

func TestParallelToolsOutOfOrderOneFailing(t *testing.T) {
	c := newConvo(t)
	p := user("read three files")
	id := c.send(p)
	c.reply(id, "tool_use", usage(10, 20, 0, 0), tool("toolu_a", "Read"), tool("toolu_b", "Read"), tool("toolu_c", "Grep"))
	id = c.send(p, assistant("toolu_a", "toolu_b", "toolu_c"), results("toolu_c", "!toolu_a", "toolu_b"))
	c.reply(id, "end_turn", usage(10, 20, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=3 tool_errors=1 in=20 out=40]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Read [outcome=error ERROR:tool_error]
  execute_tool Read [outcome=success]
  execute_tool Grep [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
	root := c.rec.spans[0]
	if got := root.Turn.ToolCounts; got["Read"] != 2 || got["Grep"] != 1 {
		t.Errorf("tool counts = %v", got)
	}
	if got := root.Turn.ToolFailures; got["Read"] != 1 || len(got) != 1 {
		t.Errorf("tool failures = %v", got)
	}
}

func TestSubagentNestsUnderAgentCall(t *testing.T) {
	c := newConvo(t)
	p, sp := c.startExplore()
	sid := c.send(sp, assistant("toolu_s1"), results("toolu_s1"))
	c.reply(sid, "end_turn", usage(3, 4, 0, 0))
	c.endExplore(p)
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=4 tools=2 subagents=1 in=26 out=48]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Agent [outcome=success]
    invoke_agent Explore [req=2 tools=1 in=6 out=8]
      chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
      execute_tool Glob [outcome=success]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
	for _, s := range c.rec.spans {
		if s.Kind == KindSubagent && (s.Subagent.AgentID != "a1b2c3" || s.Agent != "Explore") {
			t.Errorf("subagent span = %+v %+v", s, s.Subagent)
		}
	}
}

func TestSubagentFoundByBillingHeaderAndPrompt(t *testing.T) {
	// Without the agent id header (older versions), the subagent is recognised by
	// cc_is_subagent=true and matched to its call by its prompt.
	c := newConvo(t)
	p := user("two agents")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), agentTool("toolu_x", "task X", "general-purpose", false), agentTool("toolu_y", "task Y", "Plan", false))
	for _, prompt := range []string{"task Y", "task X"} {
		b := body(c.model, 3, []wire.Message{user(prompt)})
		b.System.Subagent = true
		rid := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: c.session}, Body: b})
		c.reply(rid, "end_turn", usage(1, 1, 0, 0))
	}
	id = c.send(p, assistant("toolu_x", "toolu_y"), results("toolu_x", "toolu_y"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=4 tools=2 subagents=2 in=4 out=4]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Agent [outcome=success]
    invoke_agent general-purpose [req=1 tools=0 in=1 out=1]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
  execute_tool Agent [outcome=success]
    invoke_agent Plan [req=1 tools=0 in=1 out=1]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestBackgroundSubagentOutlivesItsCall(t *testing.T) {
	c := newConvo(t)
	p := user("run the slow check in the background")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), agentTool("toolu_bg", "slow check", "general-purpose", true))
	// The Agent call returns at once; the turn ends before the subagent even starts.
	id = c.send(p, assistant("toolu_bg"), results("toolu_bg"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.agentID = "bg1"
	sid := c.send(user("slow check"))
	c.reply(sid, "end_turn", usage(7, 7, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Agent [outcome=success]
    invoke_agent general-purpose [req=1 tools=0 background in=7 out=7]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestRetriesAfter529(t *testing.T) {
	c := newConvo(t)
	p := user("hello")
	id := c.send(p)
	c.fail(id, 529, "overloaded_error")
	c.tick(time.Second)
	id = c.send(p)
	c.fail(id, 529, "overloaded_error")
	id = c.send(p)
	c.reply(id, "end_turn", usage(1, 2, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=3 tools=0 retries=2 in=1 out=2]
  chat claude-sonnet-4-6 [kind=turn ERROR:overloaded_error]
  chat claude-sonnet-4-6 [kind=turn attempt=1 ERROR:overloaded_error]
  chat claude-sonnet-4-6 [kind=turn attempt=2 stop=end_turn]
`)
}

func TestSameHistoryAfterSuccessIsANewRequest(t *testing.T) {
	// Only a failed request makes an identical follow-up a retry.
	c := newConvo(t)
	p := user("again")
	id := c.send(p)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	id = c.send(p)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

func TestSideRequests(t *testing.T) {
	c := newConvo(t)
	// A title request that arrives before the turn's first request is adopted by the turn.
	title := body("claude-haiku-4-5", 0, []wire.Message{user("<session>hello</session>")})
	tid := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: c.session}, Body: title})
	p := user("hello")
	id := c.send(p)
	c.reply(tid, "end_turn", usage(5, 5, 0, 0))
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Read"))
	// count_tokens inside the turn.
	ct := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages/count_tokens", Endpoint: wire.EndpointCountTokens, Headers: wire.Headers{SessionID: c.session}})
	c.tr.Response(&wire.Response{ExchangeID: ct, Status: 200, End: c.now, InputTokens: 42})
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=4 tools=1 in=7 out=7]
  chat claude-haiku-4-5 [kind=auxiliary stop=end_turn]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Read [outcome=success]
  chat [kind=count_tokens]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestSideRequestWithoutTurnBecomesItsOwnTrace(t *testing.T) {
	c := newConvo(t)
	b := body("claude-haiku-4-5", 0, []wire.Message{user("classify this")})
	id := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: c.session}, Body: b})
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	if len(c.rec.spans) != 0 {
		t.Fatalf("side request emitted before the adoption window passed")
	}
	c.tick(11 * time.Second)
	c.tr.Tick(c.now)
	c.check(`chat claude-haiku-4-5 [kind=auxiliary stop=end_turn]`)
}

func TestSystemRoleLastMessage(t *testing.T) {
	// Claude Code can append a system-role message after the human prompt; the human prompt is
	// still "the last message".
	c := newConvo(t)
	id := c.send(user("what changed?"), systemMsg())
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	id = c.send(user("what changed?"), systemMsg(), assistant("toolu_1"), results("toolu_1"), systemMsg())
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestReminderOnlyMessageContinuesTurn(t *testing.T) {
	c := newConvo(t)
	p := user("go")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	id = c.send(p, assistant("toolu_1"), results("toolu_1"), reminderOnly())
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	if n := strings.Count(c.rec.traces(), "invoke_agent claude-code"); n != 1 {
		t.Fatalf("want one turn, got %d:\n%s", n, c.rec.traces())
	}
}

func TestInterruptedTurn(t *testing.T) {
	c := newConvo(t)
	p := user("refactor everything")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Edit"))
	// The user presses Esc while the tool runs and types a new prompt.
	c.tick(3 * time.Second)
	id = c.send(p, assistant("toolu_1"), results("!toolu_1"), user("[Request interrupted by user for tool use]"), user("stop, just fix the typo"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=1 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Edit [outcome=interrupted ERROR:interrupted]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

func TestResumedSessionInterruptEndsTurn(t *testing.T) {
	// A session resumed after its process stopped mid-turn: Claude Code's own interrupt text
	// comes with what the user types next, which is a new prompt.
	c := newConvo(t)
	p := user("refactor everything")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Edit"))
	c.tick(3 * time.Second)
	id = c.send(p, assistant("toolu_1"), results("!toolu_1"), user("[Request interrupted: the session ended before the response finished]\nfix the typo instead"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=1 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Edit [outcome=interrupted ERROR:interrupted]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn synthetic=interrupt stop=end_turn]
`)
}

func TestQueuedTextWithToolResultsContinuesTurn(t *testing.T) {
	// Text the user typed while tools ran travels with the tool results: still the same turn.
	c := newConvo(t)
	p := user("go")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	queued := results("toolu_1")
	queued.Blocks.Add(wire.BlockText, 1)
	queued.HumanText, queued.Text = true, "also check the README"
	id = c.send(p, assistant("toolu_1"), queued)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestCanceledStreamInterruptsTurn(t *testing.T) {
	c := newConvo(t)
	id := c.send(user("write a novel"))
	c.tick(time.Second)
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, Streamed: true, End: c.now, Canceled: true, Err: "context canceled"})
	c.tick(10 * time.Minute)
	c.tr.Tick(c.now)
	c.check(`
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=0 in=0 out=0]
  chat claude-sonnet-4-6 [kind=turn ERROR:canceled]
`)
}

func TestCanceledRequestSentAgainIsARetry(t *testing.T) {
	// Claude Code sometimes abandons a request right after sending it and sends it again.
	c := newConvo(t)
	p := user("hello")
	id := c.send(p)
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, Streamed: true, End: c.now, Canceled: true, Err: "context canceled"})
	id = c.send(p)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 retries=1 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn ERROR:canceled]
  chat claude-sonnet-4-6 [kind=turn attempt=1 stop=end_turn]
`)
}

func TestNewPromptWhileToolsPendingInterrupts(t *testing.T) {
	c := newConvo(t)
	id := c.send(user("first"))
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	id = c.send(user("second"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=1 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=interrupted ERROR:interrupted]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

func TestManualCompaction(t *testing.T) {
	c := newConvo(t)
	h := []wire.Message{user("build it"), assistant(), user("now test it"), assistant()}
	id := c.send(h[:1]...)
	c.reply(id, "end_turn", usage(100, 10, 0, 0))
	id = c.send(h[:3]...)
	c.reply(id, "end_turn", usage(200, 10, 0, 0))
	// /compact: the history plus the summary instruction.
	id = c.send(append(append([]wire.Message{}, h...), user("<command-name>/compact</command-name>"), user("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\nYour task is to create a detailed summary"))...)
	c.reply(id, "end_turn", usage(300, 50, 0, 0))
	// The next prompt starts over from the summary.
	cont := user("This session is being continued from a previous conversation that ran out of context. Summary: …")
	id = c.send(cont, user("<command-name>/compact</command-name>"), assistant(), user("and deploy"))
	c.reply(id, "end_turn", usage(40, 10, 0, 0))
	// Later requests repeat the continuation message; they are not compactions.
	id = c.send(cont, user("<command-name>/compact</command-name>"), assistant(), user("and deploy"), assistant(), user("thanks"))
	c.reply(id, "end_turn", usage(50, 10, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=1 tools=0 in=100 out=10]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=200 out=10]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent claude-code [turn=3 outcome=compaction req=1 tools=0 compaction=manual in=300 out=50]
  chat claude-sonnet-4-6 [kind=compaction synthetic=compaction stop=end_turn]
invoke_agent claude-code [turn=4 outcome=end_turn req=1 tools=0 in=40 out=10]
  chat claude-sonnet-4-6 [kind=turn compaction=manual stop=end_turn]
invoke_agent claude-code [turn=5 outcome=end_turn req=1 tools=0 in=50 out=10]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
	for _, s := range c.rec.spans {
		if s.Chat != nil && s.Chat.Compaction != nil {
			if !s.Chat.Compacted || s.Chat.Compaction.MessagesBefore != 6 || s.Chat.Compaction.MessagesAfter != 4 {
				t.Errorf("compaction = %+v compacted=%v", s.Chat.Compaction, s.Chat.Compacted)
			}
		}
	}
}

func TestAutoCompactionInsideTurn(t *testing.T) {
	c := newConvo(t)
	p := user("long task")
	id := c.send(p)
	c.reply(id, "tool_use", usage(150000, 10, 0, 0), tool("toolu_1", "Bash"))
	// The context is full: Claude Code summarises before sending the tool result.
	id = c.send(p, assistant("toolu_1"), results("toolu_1"), user("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."))
	c.reply(id, "end_turn", usage(150000, 2000, 0, 0))
	id = c.send(user("This session is being continued from a previous conversation that ran out of context."), user("Please continue the conversation from where we left off"))
	c.reply(id, "end_turn", usage(5000, 100, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=3 tools=1 in=305000 out=2110]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=compaction synthetic=compaction stop=end_turn]
  chat claude-sonnet-4-6 [kind=turn compaction=auto stop=end_turn]
`)
}

// TestAutoCompactionAfterMaxTokens: an answer that ran out of output tokens, then an automatic
// compaction that outlasts the recovery window: the turn waits for the compaction, it does not
// end while the compaction runs.
func TestAutoCompactionAfterMaxTokens(t *testing.T) {
	c := newConvo(t)
	p := user("long task")
	id := c.send(p)
	c.reply(id, "max_tokens", usage(150000, 10, 0, 0))
	id = c.send(p, assistant(), user("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."))
	c.tick(2 * recoveryWindow)
	c.tr.Tick(c.now)
	c.reply(id, "end_turn", usage(150000, 2000, 0, 0))
	id = c.send(user("This session is being continued from a previous conversation that ran out of context."), user("Please continue the conversation from where we left off"))
	c.reply(id, "end_turn", usage(5000, 100, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=3 tools=0 in=305000 out=2110]
  chat claude-sonnet-4-6 [kind=turn stop=max_tokens]
  chat claude-sonnet-4-6 [kind=compaction synthetic=compaction stop=end_turn]
  chat claude-sonnet-4-6 [kind=turn compaction=auto stop=end_turn]
`)
}

func TestCompactionWithoutSummarySeen(t *testing.T) {
	// A resumed session: cctrace sees only the continuation. In a short session the history can
	// even be longer than before, so the message count alone does not decide.
	c := newConvo(t)
	id := c.send(user("This session is being continued from a previous conversation that ran out of context."), user("<command-name>/compact</command-name>"), assistant(), user("go on"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn compaction=manual stop=end_turn]
`)
}

func TestNonClaudeCodeClient(t *testing.T) {
	// No session header: the session comes from metadata.user_id, else from the conversation.
	c := newConvo(t)
	c.session = ""
	b := body("claude-opus-4-5", 2, []wire.Message{user("hi from the SDK")})
	b.MetadataSessionID = "meta-session"
	id := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Body: b})
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	first := []wire.Message{user("plain client")}
	id = c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Body: body("claude-opus-4-5", 2, first)})
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("call_1", "get_weather"))
	id = c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Body: body("claude-opus-4-5", 2, append(first, assistant("call_1"), results("call_1")))})
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	// Something that is not the Messages API at all, and names no session: no trace.
	id = c.sendReq(&wire.Request{Method: "GET", Path: "/v1/models", Endpoint: wire.EndpointOther})
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, End: c.now})
	c.tick(time.Minute)
	c.tr.Tick(c.now)
	c.check(`
invoke_agent api-client [turn=1 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-opus-4-5 [kind=turn stop=end_turn]
invoke_agent api-client [turn=1 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-opus-4-5 [kind=turn stop=tool_use]
  execute_tool get_weather [outcome=success]
  chat claude-opus-4-5 [kind=tool_results stop=end_turn]
(no trace) GET /v1/models [kind=no_session]
`)
	sessions := map[string]bool{}
	for _, s := range c.rec.spans {
		sessions[s.SessionID] = true
	}
	if !sessions["meta-session"] || len(sessions) != 2 {
		t.Errorf("sessions = %v, want meta-session and a fingerprint", sessions)
	}
	if n := c.tr.Sessions(); n != 2 {
		t.Errorf("the tracker holds %d sessions, want 2: a probe makes none", n)
	}
}

func TestIdleTimeoutAndShutdown(t *testing.T) {
	c := newConvo(t, WithToolTimeout(time.Minute), WithErrorTimeout(30*time.Second))
	id := c.send(user("one"))
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	c.tick(2 * time.Minute)
	c.tr.Tick(c.now)

	c.session = "other-session"
	id = c.send(user("two"))
	c.fail(id, 500, "api_error")
	c.tick(time.Minute)
	c.tr.Tick(c.now)

	c.session = "third"
	c.send(user("three"))
	c.tr.Close(c.now)
	c.check(`
invoke_agent claude-code [turn=1 outcome=idle_timeout req=1 tools=1 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=abandoned ERROR:abandoned]
invoke_agent claude-code [turn=1 outcome=error req=1 tools=0 in=0 out=0 ERROR:error]
  chat claude-sonnet-4-6 [kind=turn ERROR:api_error]
invoke_agent claude-code [turn=1 outcome=shutdown req=0 tools=0 in=0 out=0]
  chat claude-sonnet-4-6 [kind=turn ERROR:shutdown]
`)
	if c.tr.Sessions() != 0 {
		t.Errorf("sessions left after Close: %d", c.tr.Sessions())
	}
}

func TestSessionEviction(t *testing.T) {
	c := newConvo(t, WithMaxSessions(2), WithSessionTimeout(time.Hour))
	for _, s := range []string{"s1", "s2", "s3"} {
		c.session = s
		id := c.send(user("hi " + s))
		c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_"+s, "Bash"))
	}
	if c.tr.Sessions() != 2 {
		t.Fatalf("sessions = %d, want 2", c.tr.Sessions())
	}
	c.tick(2 * time.Hour)
	c.tr.Tick(c.now)
	if c.tr.Sessions() != 0 {
		t.Fatalf("sessions = %d after the idle timeout, want 0", c.tr.Sessions())
	}
	if got := strings.Count(c.rec.traces(), "OPEN"); got != 0 {
		t.Fatalf("open spans after eviction:\n%s", c.rec.traces())
	}
	if !strings.Contains(c.rec.traces(), "outcome=evicted") {
		t.Fatalf("no evicted turn:\n%s", c.rec.traces())
	}
	if last := c.rec.sessions[len(c.rec.sessions)-1]; last != 0 {
		t.Errorf("last SessionsActive = %d", last)
	}
}

// TestNewBlocksCountedOnce: over a conversation, EachFirstSeenBlock counts every block once,
// when it first appears on the wire: the user's as sent, the assistant's as answered (not again
// when sent back), a retry's none.
func TestNewBlocksCountedOnce(t *testing.T) {
	c := newConvo(t)
	p := user("go")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.fail(id, 529, "overloaded_error")
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	total := map[BlockKey]int{}
	for _, s := range c.rec.spans {
		if s.Chat != nil {
			s.Chat.EachFirstSeenBlock(func(k BlockKey, n int) { total[k] += n })
		}
	}
	want := map[BlockKey]int{
		{wire.RoleUser, wire.BlockText}:         1,
		{wire.RoleUser, wire.BlockToolResult}:   1,
		{wire.RoleAssistant, wire.BlockText}:    2,
		{wire.RoleAssistant, wire.BlockToolUse}: 1,
	}
	if len(total) != len(want) {
		t.Fatalf("blocks = %v, want %v", total, want)
	}
	for k, n := range want {
		if total[k] != n {
			t.Errorf("blocks[%v] = %d, want %d (all: %v)", k, total[k], n, total)
		}
	}
}

func TestTraceparentBecomesLink(t *testing.T) {
	c := newConvo(t)
	b := body(c.model, 3, []wire.Message{user("hi")})
	id := c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Body: b,
		Headers: wire.Headers{SessionID: c.session, Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	for _, s := range c.rec.spans {
		if s.Link == nil || s.Link.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Link.SpanID.String() != "00f067aa0ba902b7" || !s.Link.Sampled {
			t.Errorf("%s: link = %+v", s.Name, s.Link)
		}
	}
	for _, bad := range []string{"", "00-zz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if l := parseTraceparent(bad); l != nil {
			t.Errorf("parseTraceparent(%q) = %+v", bad, l)
		}
	}
}

func TestPlanMode(t *testing.T) {
	c := newConvo(t)
	send := func(plan bool, msgs ...wire.Message) uint64 {
		b := body(c.model, 5, msgs)
		b.PlanMode = plan
		return c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Headers: wire.Headers{SessionID: c.session}, Body: b})
	}
	p := user("plan the refactor")
	id := send(true, p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "ExitPlanMode"))
	id = send(false, p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	root := c.rec.spans[0]
	if root.Turn.PlanModeEntered.IsZero() || root.Turn.PlanModeExited.IsZero() || !root.Turn.PlanModeExited.After(root.Turn.PlanModeEntered) {
		t.Errorf("plan mode times: entered %v exited %v", root.Turn.PlanModeEntered, root.Turn.PlanModeExited)
	}
}

func TestUnknownAndDuplicateToolIDs(t *testing.T) {
	c := newConvo(t)
	p := user("x")
	id := c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("dup", "Bash"), tool("dup", "Bash"), tool("", "Bash"))
	id = c.send(p, assistant("dup"), results("dup", "never-asked"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}

func TestResponseForUnknownExchangeIgnored(t *testing.T) {
	c := newConvo(t)
	c.tr.Response(&wire.Response{ExchangeID: 999, Status: 200})
	if len(c.rec.spans) != 0 {
		t.Fatal("spans from an unknown exchange")
	}
}

func TestCaptureContent(t *testing.T) {
	c := newConvo(t, WithContentCapture(func(s string) string { return strings.ReplaceAll(s, "sk-ant-secret", "[REDACTED]") }))
	id := c.send(user("use key sk-ant-secret please"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	root := c.rec.spans[0]
	if root.Turn.Prompt != "use key [REDACTED] please" {
		t.Errorf("prompt = %q", root.Turn.Prompt)
	}
	c2 := newConvo(t)
	id = c2.send(user("private"))
	c2.reply(id, "end_turn", usage(1, 1, 0, 0))
	if p := c2.rec.spans[0].Turn.Prompt; p != "" {
		t.Errorf("prompt captured with capture off: %q", p)
	}
}
