package instrument

import (
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

func TestOpensTurn(t *testing.T) {
	tools := wire.ToolsInfo{Present: true, Count: 3}
	user := func(text string, results ...wire.ToolResult) wire.Message {
		return wire.Message{Role: wire.RoleUser, HumanText: text != "", Text: text, ToolResults: results, Synthetic: wire.SyntheticText(text)}
	}
	assistant := wire.Message{Role: wire.RoleAssistant}
	system := wire.Message{Role: wire.RoleSystem}
	req := func(b *wire.Body, h wire.Headers) *wire.Request {
		return &wire.Request{Endpoint: wire.EndpointMessages, Headers: h, Body: b}
	}
	result := wire.ToolResult{ToolUseID: "toolu_1"}
	tests := []struct {
		name string
		req  *wire.Request
		want bool
	}{
		{"prompt", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("fix the test"), system}}, wire.Headers{}), true},
		{"next prompt", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("and now b")}}, wire.Headers{}), true},
		{"tool results", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("", result)}}, wire.Headers{}), false},
		{"text queued beside tool results", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("also b", result)}}, wire.Headers{}), false},
		{"interrupt with the next prompt", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("[Request interrupted by user]\nstop, do b", result)}}, wire.Headers{}), true},
		{"cut-off resumption", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("Your response above was cut off mid-stream. Resume directly")}}, wire.Headers{}), false},
		{"hook feedback", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("Stop hook feedback:\n[x]: no")}}, wire.Headers{}), false},
		{"task notification", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, {Role: wire.RoleUser, Synthetic: wire.SyntheticTaskNotification}}}, wire.Headers{}), false},
		{"compaction summary", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant, user("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.")}}, wire.Headers{}), false},
		{"auto-compaction continuation", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("This session is being continued from a previous conversation that ran out of context.")}}, wire.Headers{}), false},
		{"subagent header", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("explore")}}, wire.Headers{AgentID: "a123"}), false},
		{"subagent billing marker", req(&wire.Body{Tools: tools, System: wire.SystemInfo{Subagent: true}, Messages: []wire.Message{user("explore")}}, wire.Headers{}), false},
		{"title request", req(&wire.Body{Tools: wire.ToolsInfo{Present: true}, OutputFormat: "json_schema", Messages: []wire.Message{user("<session>fix</session>")}}, wire.Headers{}), false},
		{"Claude Code's tool-less request", req(&wire.Body{Tools: wire.ToolsInfo{Present: true}, Messages: []wire.Message{user("Web page content:\n---")}}, wire.Headers{SessionID: "s"}), false},
		{"Claude Code's search request", req(&wire.Body{Tools: wire.ToolsInfo{Present: true, Count: 1, Server: 1}, Messages: []wire.Message{user("Perform a web search for the query: x")}}, wire.Headers{SessionID: "s"}), false},
		{"another client's prompt without tools", req(&wire.Body{Messages: []wire.Message{user("a"), assistant, user("and now b")}}, wire.Headers{}), true},
		{"another client's prompt with a server tool", req(&wire.Body{Tools: wire.ToolsInfo{Present: true, Count: 1, Server: 1}, Messages: []wire.Message{user("search for b")}}, wire.Headers{}), true},
		{"last message the assistant's", req(&wire.Body{Tools: tools, Messages: []wire.Message{user("a"), assistant}}, wire.Headers{}), false},
		{"no body", &wire.Request{Endpoint: wire.EndpointMessages}, false},
		{"count_tokens", &wire.Request{Endpoint: wire.EndpointCountTokens, Body: &wire.Body{Tools: tools, Messages: []wire.Message{user("a")}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OpensTurn(tt.req); got != tt.want {
				t.Errorf("OpensTurn = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSpansCarryIdentity checks who each span is attributed to: a chat span its own request's
// person, the turn and its tool calls the person of the request that opened or answered them.
func TestSpansCarryIdentity(t *testing.T) {
	c := newConvo(t)
	as := func(user, team string, msgs ...wire.Message) uint64 {
		c.tick(10 * time.Millisecond)
		c.nextID++
		req := &wire.Request{
			ExchangeID: c.nextID, Time: c.now, Method: "POST", Path: "/v1/messages",
			Endpoint: wire.EndpointMessages,
			Headers:  wire.Headers{SessionID: c.session},
			Identity: wire.Identity{User: user, Team: team},
			Body:     body(c.model, c.tools, msgs),
		}
		c.tr.Request(req)
		return c.nextID
	}
	id := as("alice", "platform", user("run it"))
	c.reply(id, "tool_use", usage(10, 5, 0, 0), tool("toolu_1", "Bash"))
	id = as("key-0123456789abcdef", "", user("run it"), assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(10, 5, 0, 0))
	want := map[string]string{
		"invoke_agent claude-code": "alice/platform",
		"execute_tool Bash":        "alice/platform",
	}
	chats := []string{}
	for _, s := range c.rec.spans {
		got := s.User + "/" + s.Team
		if s.Kind == KindChat {
			chats = append(chats, got)
			continue
		}
		if want[s.Name] != got {
			t.Errorf("%s: attributed to %q, want %q", s.Name, got, want[s.Name])
		}
	}
	if len(chats) != 2 || chats[0] != "alice/platform" || chats[1] != "key-0123456789abcdef/" {
		t.Errorf("chat spans attributed to %v", chats)
	}
}
