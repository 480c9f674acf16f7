package instrument

import (
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

// toolRequest is a request a running tool makes of the API itself, in the session c sends in:
// its own one-message conversation, offering the client no tool (serverTools counts the API's
// own, as WebSearch's web_search).
func (c *convo) toolRequest(text string, serverTools int) uint64 {
	b := body("claude-opus-5-5", serverTools, []wire.Message{user(text)})
	b.Tools.Server = serverTools
	return c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
		Headers: wire.Headers{SessionID: c.session}, Body: b})
}

// TestToolRequestsUnderTheirTools: requests that running tool calls make of the API go under
// those calls' spans, and count in their turn: two parallel WebSearch calls, each found by the
// query its request quotes (whatever order the requests arrive in), and a WebFetch, found as the
// call that made none yet. A search answer that pauses (pause_turn) stays under its call.
func TestToolRequestsUnderTheirTools(t *testing.T) {
	c := newConvo(t)
	p := user("search twice and fetch")
	id := c.send(p)
	search := func(id, q string) wire.ToolUse {
		tu := tool(id, "WebSearch")
		tu.Input = `{"query":"` + q + `"}`
		return tu
	}
	fetch := tool("toolu_f", "WebFetch")
	fetch.Input = `{"url":"https://example.com/page","prompt":"x"}`
	c.reply(id, "tool_use", usage(1, 1, 0, 0), search("toolu_a", "first search query"), search("toolu_b", "second search query"), fetch)
	b := c.toolRequest("Perform a web search for the query: second search query", 1)
	a := c.toolRequest("Perform a web search for the query: first search query", 1)
	f := c.toolRequest("Web page content:\n---\nsomething\n---", 0)
	c.reply(a, "pause_turn", usage(2, 2, 0, 0))
	c.reply(b, "end_turn", usage(2, 2, 0, 0))
	c.reply(f, "end_turn", usage(3, 3, 0, 0))
	id = c.send(p, assistant("toolu_a", "toolu_b", "toolu_f"), results("toolu_a", "toolu_b", "toolu_f"))
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=5 tools=3 in=9 out=9]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool WebSearch [outcome=success]
    chat claude-opus-5-5 [kind=tool stop=pause_turn]
  execute_tool WebSearch [outcome=success]
    chat claude-opus-5-5 [kind=tool stop=end_turn]
  execute_tool WebFetch [outcome=success]
    chat claude-opus-5-5 [kind=tool stop=end_turn]
  chat claude-sonnet-4-6 [kind=tool_results stop=end_turn]
`)
	want := map[string]string{
		"Perform a web search for the query: first search query":  "toolu_a",
		"Perform a web search for the query: second search query": "toolu_b",
		"Web page content:\n---\nsomething\n---":                  "toolu_f",
	}
	calls := map[SpanID]string{}
	for _, s := range c.rec.spans {
		if s.Tool != nil {
			calls[s.ID] = s.Tool.CallID
		}
	}
	for _, s := range c.rec.spans {
		if s.Chat != nil && s.Chat.Kind == RequestTool {
			if text := s.Chat.Request.Body.FirstHumanText; calls[s.Parent] != want[text] {
				t.Errorf("request %q under %s, want %s", text, calls[s.Parent], want[text])
			}
		}
	}
}

// TestPauseTurnContinuesTheTurn: an answer that pauses a long server-tool turn (pause_turn) is
// resumed by the client's next request, in the same turn.
func TestPauseTurnContinuesTheTurn(t *testing.T) {
	c := newConvo(t)
	p := user("research this")
	id := c.send(p)
	c.reply(id, "pause_turn", usage(1, 1, 0, 0))
	paused := assistant()
	id = c.send(p, paused)
	c.reply(id, "end_turn", usage(1, 1, 0, 0))
	c.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=2 out=2]
  chat claude-sonnet-4-6 [kind=turn stop=pause_turn]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}

// TestOtherClientsPromptsAreTurns: for a client other than Claude Code, every human prompt is a
// turn, with tools or without, streamed or not; Claude Code's own tool-less requests (a title,
// in a JSON schema) stay side requests.
func TestOtherClientsPromptsAreTurns(t *testing.T) {
	c := newConvo(t)
	c.session, c.tools = "", 0
	first := user("hello there")
	history := []wire.Message{first}
	for i, prompt := range []string{"", "and again", "once more"} {
		if i > 0 {
			history = append(history, assistant(), user(prompt))
		}
		id := c.send(history...)
		c.reply(id, "end_turn", usage(1, 1, 0, 0))
	}
	c.check(`
invoke_agent api-client [turn=1 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent api-client [turn=2 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
invoke_agent api-client [turn=3 outcome=end_turn req=1 tools=0 in=1 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)

	cc := newConvo(t)
	title := body("claude-haiku-5-5", 0, []wire.Message{user("<session>hi</session>")})
	title.OutputFormat = "json_schema"
	tid := cc.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
		Headers: wire.Headers{SessionID: cc.session}, Body: title})
	id := cc.send(user("hi"))
	cc.reply(tid, "end_turn", usage(1, 1, 0, 0))
	cc.reply(id, "end_turn", usage(1, 1, 0, 0))
	cc.check(`
invoke_agent claude-code [turn=1 outcome=end_turn req=2 tools=0 in=2 out=2]
  chat claude-haiku-5-5 [kind=auxiliary stop=end_turn]
  chat claude-sonnet-4-6 [kind=turn stop=end_turn]
`)
}
