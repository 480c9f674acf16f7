package instrument

import (
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// cut ends exchange id with a stream that began (message_start, a text block) and was cut by an
// error event before it stopped.
func (c *convo) cut(id uint64, errType string) {
	c.tick(300 * time.Millisecond)
	msg := &wire.MessageInfo{Model: c.model, Usage: usage(7, 1, 0, 0), Blocks: map[wire.BlockType]int{wire.BlockText: 1, wire.BlockToolUse: 1}}
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, End: c.now, Streamed: true, Incomplete: true, ErrorType: errType, Message: msg})
}

// TestCutAnswerContinuesTheTurn: after an answer cut mid-stream Claude Code keeps what arrived
// and asks the model to resume. Whatever that request says, it goes on with the turn, marked as
// a resumption; only an interruption by the user starts a new one.
func TestCutAnswerContinuesTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name string
		next wire.Message
		want string
	}{
		{"known resume text", user("Your response above was cut off mid-stream. Resume directly from where it stops."), `
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=17 out=2]
  chat claude-sonnet-4-6 [kind=turn stop= ERROR:overloaded_error]
  chat claude-sonnet-4-6 [kind=resumption synthetic=cut_off stop=end_turn]
`},
		{"text a later version may write", user("Keep going from where the stream broke."), `
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=17 out=2]
  chat claude-sonnet-4-6 [kind=turn stop= ERROR:overloaded_error]
  chat claude-sonnet-4-6 [kind=resumption stop=end_turn]
`},
		{"the user interrupted", user("[Request interrupted by user]\n"), `
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=0 in=7 out=1]
  chat claude-sonnet-4-6 [kind=turn stop= ERROR:overloaded_error]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn synthetic=interrupt stop=end_turn]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConvo(t)
			p := user("Print hello")
			id := c.send(p)
			c.cut(id, "overloaded_error")
			id = c.send(p, assistant(), tc.next)
			c.reply(id, "end_turn", usage(10, 1, 0, 0))
			c.check(tc.want)
		})
	}
}

// TestCutAnswerNotResumedThenPrompt: a cut answer that nothing resumed before its turn ended
// leaves no trace on what the person types next: a prompt of a new turn.
func TestCutAnswerNotResumedThenPrompt(t *testing.T) {
	c := newConvo(t)
	p := user("Print hello")
	id := c.send(p)
	c.cut(id, "overloaded_error")
	c.tick(time.Hour)
	c.tr.Tick(c.now)
	id = c.send(p, assistant(), user("Something else"))
	c.reply(id, "end_turn", usage(10, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=error req=1 tools=0 in=7 out=1 ERROR:error]
  chat claude-sonnet-4-6 [kind=turn stop= ERROR:overloaded_error]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

// TestHTTPErrorThenPromptIsANewTurn: an answer that never began (an HTTP error) is no cut answer:
// a human prompt after it starts a new turn, as before.
func TestHTTPErrorThenPromptIsANewTurn(t *testing.T) {
	c := newConvo(t)
	p := user("Print hello")
	id := c.send(p)
	c.fail(id, 529, "overloaded_error")
	id = c.send(p, assistant(), user("Something else"))
	c.reply(id, "end_turn", usage(10, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=interrupted req=1 tools=0 in=0 out=0]
  chat claude-sonnet-4-6 [kind=turn ERROR:overloaded_error]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

// TestOutputLimitRecovery: an answer that ran out of output tokens ends its turn only if Claude
// Code does not go on with it within recoveryWindow; when it does, one turn holds both answers.
func TestOutputLimitRecovery(t *testing.T) {
	p := user("Write a long answer")
	t.Run("Claude Code goes on", func(t *testing.T) {
		c := newConvo(t)
		id := c.send(p)
		c.reply(id, "max_tokens", usage(10, 64, 0, 0))
		c.tick(time.Second)
		c.tr.Tick(c.now)
		id = c.send(p, assistant(), user("Output token limit hit. Resume directly — no apology, no recap."))
		c.reply(id, "end_turn", usage(20, 9, 0, 0))
		c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=30 out=73]
  chat claude-sonnet-4-6 [kind=turn stop=max_tokens]
  chat claude-sonnet-4-6 [kind=resumption synthetic=output_limit stop=end_turn]
`)
	})
	t.Run("nothing follows", func(t *testing.T) {
		c := newConvo(t)
		id := c.send(p)
		c.reply(id, "max_tokens", usage(10, 64, 0, 0))
		answered := c.now
		c.tick(recoveryWindow + time.Second)
		c.tr.Tick(c.now)
		c.check(`
invoke_agent claude-code [turn=1 outcome=max_tokens req=1 tools=0 in=10 out=64]
  chat claude-sonnet-4-6 [kind=turn stop=max_tokens]
`)
		if end := c.rec.spans[0].End; !end.Equal(answered) {
			t.Errorf("the turn ends at %v, want its answer's end %v", end, answered)
		}
	})
	t.Run("the user types a new prompt", func(t *testing.T) {
		c := newConvo(t)
		id := c.send(p)
		c.reply(id, "max_tokens", usage(10, 64, 0, 0))
		id = c.send(p, assistant(), user("Never mind"))
		c.reply(id, "end_turn", usage(20, 9, 0, 0))
		c.check(`
invoke_agent claude-code [turn=1 outcome=max_tokens req=1 tools=0 in=10 out=64]
  chat claude-sonnet-4-6 [kind=turn stop=max_tokens]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 in=20 out=9]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
	})
}

// TestHookFeedbackOpensATurn: a Stop hook's feedback, sent after the turn ended, is no human
// prompt: it starts a turn with its kind as the trigger.
func TestHookFeedbackOpensATurn(t *testing.T) {
	c := newConvo(t)
	p := user("Answer")
	id := c.send(p)
	c.reply(id, "end_turn", usage(10, 1, 0, 0))
	id = c.send(p, assistant(), user("Stop hook feedback:\n[check.sh]: say goodbye"))
	c.reply(id, "end_turn", usage(20, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=1 tools=0 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 trigger=hook_feedback in=20 out=1]
  chat claude-sonnet-4-6 [kind=turn synthetic=hook_feedback stop=end_turn]
`)
}

// TestProbeWithSessionStaysInItsTurn: a request that is not a Messages API call but carries a
// session id belongs to that session, as a side request of its turn.
func TestProbeWithSessionStaysInItsTurn(t *testing.T) {
	c := newConvo(t)
	id := c.send(user("hi"))
	probe := c.sendReq(&wire.Request{Method: "GET", Path: "/v1/models", Endpoint: wire.EndpointOther,
		Headers: wire.Headers{SessionID: c.session}})
	c.tr.Response(&wire.Response{ExchangeID: probe, Status: 200, End: c.now})
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
  GET /v1/models [kind=other]
`)
}

// TestCostPricesRequestedThenServedModel: an answer is priced by the model requested, or, when
// the price table does not know it (an alias a gateway maps), by the model that answered; one
// that neither prices counts as unpriced in its turn.
func TestCostPricesRequestedThenServedModel(t *testing.T) {
	price := func(model string, u wire.Usage) (float64, bool) {
		if model != "claude-haiku-4-5" {
			return 0, false
		}
		return float64(u.InputTokens) / 1e6, true
	}
	c := newConvo(t, WithPricing(price))
	c.model = "my-gateway-alias"
	id := c.send(user("hi"))
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, End: c.now, Message: &wire.MessageInfo{
		Model: "claude-haiku-4-5", StopReason: "end_turn", Usage: usage(1000, 1, 0, 0)}})
	c.model = "unknown-model"
	id = c.send(user("hi"), assistant(), user("again"))
	c.reply(id, "end_turn", usage(1000, 1, 0, 0))
	var chats []*Span
	var turns []*Span
	for _, s := range c.rec.spans {
		switch {
		case s.Chat != nil:
			chats = append(chats, s)
		case s.Turn != nil:
			turns = append(turns, s)
		}
	}
	if len(chats) != 2 || !chats[0].Chat.Priced || chats[0].Chat.Cost != 0.001 || chats[1].Chat.Priced {
		t.Fatalf("chat costs: %+v %+v", chats[0].Chat, chats[1].Chat)
	}
	if tt := turns[0].Turn; tt.Cost != 0.001 || tt.Unpriced != 0 {
		t.Errorf("turn 1: cost %v, unpriced %d", tt.Cost, tt.Unpriced)
	}
	if tt := turns[1].Turn; tt.Cost != 0 || tt.Unpriced != 1 {
		t.Errorf("turn 2: cost %v, unpriced %d", tt.Cost, tt.Unpriced)
	}
}

// TestWithoutPricingNothingIsUnpriced: with no price table nothing is priced, and no answer
// counts as unpriced.
func TestWithoutPricingNothingIsUnpriced(t *testing.T) {
	c := newConvo(t)
	id := c.send(user("hi"))
	c.reply(id, "end_turn", usage(1000, 1, 0, 0))
	for _, s := range c.rec.spans {
		if s.Turn != nil && (s.Turn.Cost != 0 || s.Turn.Unpriced != 0) {
			t.Errorf("turn: cost %v, unpriced %d", s.Turn.Cost, s.Turn.Unpriced)
		}
	}
}

// TestNestedSubagentCountsInItsParent: what a subagent started by a subagent runs counts in
// both subagents' totals.
func TestNestedSubagentCountsInItsParent(t *testing.T) {
	c := newConvo(t)
	parent, sub := c.startExplore()
	// The Explore subagent starts a Plan subagent, which runs one Bash call that fails.
	id := c.send(sub, assistant("toolu_s1"), results("toolu_s1"))
	c.reply(id, "tool_use", usage(3, 4, 0, 0), agentTool("toolu_nested", "Plan it", "Plan", false))
	c.agentID = "nested"
	id = c.send(user("Plan it"))
	c.reply(id, "tool_use", usage(5, 6, 0, 0), tool("toolu_n1", "Bash"))
	id = c.send(user("Plan it"), assistant("toolu_n1"), results("!toolu_n1"))
	c.reply(id, "end_turn", usage(5, 6, 0, 0))
	c.agentID = "a1b2c3"
	id = c.send(sub, assistant("toolu_s1"), results("toolu_s1"), assistant("toolu_nested"), results("toolu_nested"))
	c.reply(id, "end_turn", usage(3, 4, 0, 0))
	c.endExplore(parent)
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=7 tools=4 tool_errors=1 subagents=2 in=39 out=64]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Agent [outcome=success]
    invoke_agent Explore [req=5 tools=3 tool_errors=1 in=19 out=24]
      chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
      execute_tool Glob [outcome=success]
      chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
      execute_tool Agent [outcome=success]
        invoke_agent Plan [req=2 tools=1 tool_errors=1 in=10 out=12]
          chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
          execute_tool Bash [outcome=error ERROR:tool_error]
          chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}
