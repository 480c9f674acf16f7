package instrument

import (
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// undecoded sends a Messages API request whose body cctrace forwarded without decoding it, of
// size bytes, as the pipeline reports one when its decode queue is full.
func (c *convo) undecoded(size int64) uint64 {
	return c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
		Headers: wire.Headers{SessionID: c.session, AgentID: c.agentID}, BodySize: size, ParseError: wire.NotDecodedQueueFull})
}

// TestUndecodedRequestStaysInItsTurn: under overload a request of the main agent is tracked
// without its body. It still belongs to its turn: the tool call it answers is over (outcome
// unknown, not an error), and the tool call of its answer is traced and ended by the next
// request. It used to be a side request, with the first call abandoned and the second lost.
func TestUndecodedRequestStaysInItsTurn(t *testing.T) {
	c := newConvo(t)
	h := []wire.Message{user("Fix the tests")}
	id := c.send(h...)
	c.reply(id, "tool_use", usage(10, 5, 100, 0), tool("t1", "Bash"))
	id = c.undecoded(300 << 10)
	c.reply(id, "tool_use", usage(10, 5, 200, 0), tool("t2", "Read"))
	h = append(h, assistant("t1"), results("t1"), assistant("t2"), results("t2"))
	id = c.send(h...)
	c.reply(id, "end_turn", usage(10, 5, 300, 0))

	// The next prompt's request is not decoded either: with no turn open it starts one, and
	// its final answer ends it.
	c.tick(time.Minute)
	id = c.undecoded(310 << 10)
	c.reply(id, "end_turn", usage(10, 5, 300, 0))

	// A small one is a side request, as a session title is.
	c.tick(time.Minute)
	id = c.undecoded(2 << 10)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.tick(time.Minute)
	c.tr.Tick(c.now)
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=3 tools=2 in=630 out=15]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=unknown]
  chat [kind=other stop=tool_use]
  execute_tool Read [outcome=success]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
invoke_agent claude-code [turn=2 outcome=end_turn req=1 tools=0 trigger=undecoded in=310 out=5]
  chat [kind=other stop=end_turn]
chat [kind=auxiliary stop=end_turn]
`)
}

// TestUndecodedSubagentRequest: a subagent's request left undecoded stays in the subagent's run.
func TestUndecodedSubagentRequest(t *testing.T) {
	c := newConvo(t, WithContentCapture(func(s string) string { return s }))
	p, _ := c.startExplore()
	sid := c.undecoded(100 << 10)
	c.reply(sid, "end_turn", usage(3, 4, 0, 0))
	// A subagent the tracker never saw: a side request.
	c.agentID = "ffff"
	sid = c.undecoded(100 << 10)
	c.reply(sid, "end_turn", usage(1, 1, 0, 0))
	c.endExplore(p)
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=5 tools=2 subagents=1 in=27 out=49]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Agent [outcome=success]
    invoke_agent Explore [req=2 tools=1 in=6 out=8]
      chat claude-sonnet-4-6 [kind=subagent stop=tool_use]
      execute_tool Glob [outcome=unknown]
      chat [kind=other stop=end_turn]
  chat [kind=auxiliary stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
}
