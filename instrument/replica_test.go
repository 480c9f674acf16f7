package instrument

import (
	"testing"
	"time"
)

// TestReplicaHandsOffTurns: behind a load balancer, a turn whose next request never comes to this
// replica (it went to another, which carries the turn on) ends as handed_off, both when the turn
// idle timeout passes and at shutdown; its tool calls too. Without WithReplica they end as before.
func TestReplicaHandsOffTurns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replica bool
		stop    func(c *convo)
		want    string
	}{
		{"idle, replica", true, func(c *convo) { c.tick(31 * time.Minute); c.tr.Tick(c.now) }, `
invoke_agent claude-code [turn=1 outcome=handed_off req=1 tools=1 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=handed_off ERROR:handed_off]
`},
		{"shutdown, replica", true, func(c *convo) { c.tr.Close(c.now) }, `
invoke_agent claude-code [turn=1 outcome=handed_off req=1 tools=1 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=handed_off ERROR:handed_off]
`},
		{"idle, alone", false, func(c *convo) { c.tick(31 * time.Minute); c.tr.Tick(c.now) }, `
invoke_agent claude-code [turn=1 outcome=idle_timeout req=1 tools=1 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=abandoned ERROR:abandoned]
`},
		{"shutdown, alone", false, func(c *convo) { c.tr.Close(c.now) }, `
invoke_agent claude-code [turn=1 outcome=shutdown req=1 tools=1 in=10 out=1]
  chat claude-sonnet-4-6 [kind=turn stop=tool_use]
  execute_tool Bash [outcome=shutdown ERROR:shutdown]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.replica {
				opts = append(opts, WithReplica())
			}
			c := newConvo(t, opts...)
			id := c.send(user("Fix the tests"))
			c.reply(id, "tool_use", usage(10, 1, 0, 0), tool("toolu_1", "Bash"))
			tc.stop(c)
			c.check(tc.want)
		})
	}
}
