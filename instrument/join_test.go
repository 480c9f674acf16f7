package instrument

import (
	"fmt"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// traceparent is the header Claude Code's tracing sends: trace t (one per interaction, that is
// per prompt) and span s (its claude_code.llm_request span, one per API call, the same on every
// attempt of it).
func traceparent(t, s int) string {
	return fmt.Sprintf("00-%04x000000000000000000000000aaaa-%04x00000000bbbb-01", t, s)
}

// TestJoinClientTrace is a turn whose every request carries the traceparent of Claude Code's
// llm_request span, as the real CLI sends them with CLAUDE_CODE_PROPAGATE_TRACEPARENT=1: the
// turn goes into the client's trace under the first request's span, each chat span under the
// span that sent it (both attempts of a retried call under the same one), tools and subagents
// under the tracker's spans. Without the option the same traffic is today's trace, with links.
func TestJoinClientTrace(t *testing.T) {
	play := func(c *convo) {
		p := user("explore the repo")
		c.traceparent = traceparent(1, 1)
		id := c.send(p)
		c.reply(id, "tool_use", usage(10, 20, 0, 0), agentTool("toolu_ag", "Find the tests", "Explore", false))
		c.agentID, c.tools = "a1b2c3", 5
		sub := user("Find the tests")
		c.traceparent = traceparent(1, 2)
		id = c.send(sub)
		c.reply(id, "tool_use", usage(3, 4, 0, 0), tool("toolu_s1", "Glob"))
		c.traceparent = traceparent(1, 3)
		id = c.send(sub, assistant("toolu_s1"), results("toolu_s1"))
		c.reply(id, "end_turn", usage(3, 4, 0, 0))
		c.agentID, c.tools = "", 20
		c.traceparent = traceparent(1, 4)
		id = c.send(p, assistant("toolu_ag"), results("toolu_ag"))
		c.fail(id, 529, "overloaded_error")
		id = c.send(p, assistant("toolu_ag"), results("toolu_ag"))
		c.reply(id, "end_turn", usage(10, 20, 0, 0))
	}

	c := newConvo(t, WithJoinClientTrace())
	play(c)
	c.check(`
client 0001/0001
  invoke_agent claude-code [turn=1 outcome=end_turn req=5 tools=2 retries=1 subagents=1 in=26 out=48]
    execute_tool Agent [outcome=success]
      invoke_agent Explore [req=2 tools=1 in=6 out=8]
        execute_tool Glob [outcome=success]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
client 0001/0002
  chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
client 0001/0003
  chat claude-sonnet-4-6 [kind=subagent stop=end_turn]
client 0001/0004
  chat claude-sonnet-4-6 [kind=tool_results ERROR:overloaded_error]
  chat claude-sonnet-4-6 [kind=tool_results attempt=1 stop=end_turn]
`)
	root := c.rec.spans[0]
	if root.TraceID.String() != "0001000000000000000000000000aaaa" || !root.ClientParent || root.Parent.String() != "000100000000bbbb" {
		t.Errorf("turn root: trace %s parent %s client %v, want the client's trace and its first span", root.TraceID, root.Parent, root.ClientParent)
	}
	for _, s := range c.rec.spans {
		if s.TraceID != root.TraceID {
			t.Errorf("%s is in trace %s, not the client's", s.Name, s.TraceID)
		}
	}

	c = newConvo(t)
	play(c)
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=5 tools=2 retries=1 subagents=1 in=26 out=48 link=0001/0001]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use link=0001/0001]
  execute_tool Agent [outcome=success]
    invoke_agent Explore [req=2 tools=1 in=6 out=8]
      chat claude-sonnet-4-6 [kind=subagent stop=tool_use link=0001/0002]
      execute_tool Glob [outcome=success]
      chat claude-sonnet-4-6 [kind=subagent stop=end_turn link=0001/0003]
  chat claude-sonnet-4-6 [kind=tool_results ERROR:overloaded_error link=0001/0004]
  chat claude-sonnet-4-6 [kind=tool_results attempt=1 stop=end_turn link=0001/0004]
`)
}

// TestJoinClientTraceOtherTraces covers requests that do not go under a client span: a side
// request in a trace of its own (Claude Code's title call is a standalone llm_request) and one
// with no traceparent stay under the turn; a turn whose first request has no traceparent is the
// tracker's own trace, and so are its later requests' spans, linked; a second turn naming a
// trace that a turn already went into is a trace of its own. A side request that waited for
// the turn and names its trace goes under its client span.
func TestJoinClientTraceOtherTraces(t *testing.T) {
	c := newConvo(t, WithJoinClientTrace())
	side := func(tp string) uint64 {
		b := body(c.model, 0, []wire.Message{user("<session>name this</session>")})
		b.Tools = wire.ToolsInfo{}
		return c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
			Headers: wire.Headers{SessionID: c.session, Traceparent: tp}, Body: b})
	}

	// Turn 1 joins trace 1; a title in trace 9 and a request without traceparent stay under it.
	c.traceparent = traceparent(2, 1)
	early := side(traceparent(2, 7)) // waits for the turn, which goes into its trace
	c.reply(early, "end_turn", usage(1, 1, 0, 0))
	p := user("first")
	id := c.send(p)
	title := side(traceparent(9, 1))
	c.reply(title, "end_turn", usage(1, 1, 0, 0))
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_1", "Bash"))
	c.traceparent = ""
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))

	// Turn 2 has no traceparent on its first request: a trace of the tracker's own, which the
	// client's later spans do not share.
	c.tick(time.Minute)
	p = user("second")
	id = c.send(p)
	c.reply(id, "tool_use", usage(1, 1, 0, 0), tool("toolu_2", "Bash"))
	c.traceparent = traceparent(3, 2)
	id = c.send(p, assistant("toolu_2"), results("toolu_2"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))

	// Turn 3 names trace 2 again, which turn 1 went into.
	c.tick(time.Minute)
	c.traceparent = traceparent(2, 5)
	id = c.send(user("third"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
client 0002/0001
  invoke_agent claude-code [turn=1 outcome=end_turn req=4 tools=1 in=4 out=4]
    chat claude-sonnet-4-6 [kind=auxiliary stop=end_turn link=0009/0001]
    execute_tool Bash [outcome=success]
    chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
client 0002/0007
  chat claude-sonnet-4-6 [kind=auxiliary stop=end_turn]
invoke_agent claude-code [turn=2 outcome=end_turn req=2 tools=1 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn link=0003/0002]
invoke_agent claude-code [turn=3 outcome=end_turn req=1 tools=0 in=1 out=1 link=0002/0005]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn link=0002/0005]
`)
}

// TestJoinClientTraceNotSampled: a traceparent whose sampled flag is off names a trace the
// client does not record, so the turn stays a trace of the tracker's own, with a link.
func TestJoinClientTraceNotSampled(t *testing.T) {
	c := newConvo(t, WithJoinClientTrace())
	c.traceparent = "00-0001000000000000000000000000aaaa-000100000000bbbb-00"
	id := c.send(user("hi"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=1 tools=0 in=1 out=1 link=0001/0001]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn link=0001/0001]
`)
	if root := c.rec.spans[0]; root.ClientParent || root.TraceID.String() == "0001000000000000000000000000aaaa" {
		t.Errorf("turn root joined the unsampled client trace %s", root.TraceID)
	}
}
