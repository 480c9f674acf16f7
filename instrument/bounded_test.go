package instrument

import (
	"fmt"
	"testing"
	"time"
)

// TestLongSessionStateBounded runs one session for thousands of turns, each with a subagent of
// its own that leaves a tool call unanswered: what the tracker holds for the session must not
// grow with its history.
func TestLongSessionStateBounded(t *testing.T) {
	c := newConvo(t)
	const turns = 2000
	for i := range turns {
		p := user(fmt.Sprintf("task %d", i))
		id := c.send(p)
		prompt := fmt.Sprintf("sub task %d", i)
		agentCall := fmt.Sprintf("toolu_ag%d", i)
		c.reply(id, "tool_use", usage(10, 20, 0, 0), agentTool(agentCall, prompt, "Explore", false))

		c.agentID, c.tools = fmt.Sprintf("agent-%d", i), 5
		sp := user(prompt)
		sid := c.send(sp)
		done, lost := fmt.Sprintf("toolu_s%d", i), fmt.Sprintf("toolu_lost%d", i)
		c.reply(sid, "tool_use", usage(3, 4, 0, 0), tool(done, "Glob"), tool(lost, "Grep"))
		sid = c.send(sp, assistant(done, lost), results(done))
		c.reply(sid, "end_turn", usage(3, 4, 0, 0))

		c.agentID, c.tools = "", 20
		id = c.send(p, assistant(agentCall), results(agentCall))
		c.reply(id, "end_turn", usage(10, 20, 0, 0))
		c.tick(time.Minute)
		c.tr.Tick(c.now)
	}
	sess := c.tr.sessions[c.session]
	if sess == nil {
		t.Fatal("the session is gone")
	}
	if n := len(sess.agents); n > 100 {
		t.Errorf("the session holds %d subagent chains after %d turns", n, turns)
	}
	if n := len(sess.tools); n > 100 {
		t.Errorf("the session holds %d open tool calls after %d turns", n, turns)
	}
	if n := len(sess.agentCalls); n > 64 {
		t.Errorf("the session holds %d Agent calls", n)
	}
	if n := len(c.tr.open); n != 0 {
		t.Errorf("%d exchanges held with none in flight", n)
	}
	c.tr.Close(c.now)
	checkClosed(t, c)
}
