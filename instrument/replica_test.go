package instrument

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/replay"
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

// TestTurnMovesToAnotherReplica replays recorded sessions split between two trackers, as when a
// session's replica dies or is rolled mid-turn and the load balancer sends the rest to another:
// the part the second one sees goes on in the same trace (its trigger says it did not see the
// turn's start), and a turn counts its requests once between the two. (A subagent's request
// that a replica sees before any of its parent turn's is a trace of its own: nothing in it names
// the turn.)
func TestTurnMovesToAnotherReplica(t *testing.T) {
	for _, tc := range []struct {
		session string
		split   int // exchanges the first replica sees
	}{
		{"tool_roundtrip", 1},
		{"parallel_tools", 1},
		{"stream_cut", 1},
	} {
		t.Run(tc.session, func(t *testing.T) {
			exchanges, err := replay.Load(filepath.Join("../testdata/claude-code", tc.session))
			if err != nil {
				t.Fatal(err)
			}
			var seed uint64
			ids := WithIDSource(func() uint64 { seed++; return seed })
			a, b := newRecorder(t), newRecorder(t)
			ta, tb := New(a, ids, WithReplica()), New(b, ids, WithReplica())
			replay.Play(ta, exchanges[:tc.split])
			replay.Play(tb, exchanges[tc.split:])
			end := exchanges[len(exchanges)-1].Response.End
			ta.Tick(end.Add(time.Hour))
			tb.Tick(end.Add(time.Hour))
			ta.Close(end.Add(2 * time.Hour))
			tb.Close(end.Add(2 * time.Hour))
			var roots []*Span
			for _, s := range append(a.spans, b.spans...) {
				if s.Kind == KindTurn {
					roots = append(roots, s)
				}
			}
			if len(roots) != 2 || roots[0].TraceID != roots[1].TraceID {
				t.Fatalf("turn roots %v: want two parts of one trace\nfirst replica:\n%s\nsecond:\n%s", roots, a.traces(), b.traces())
			}
			first, second := roots[0].Turn, roots[1].Turn
			if first.Outcome != OutcomeHandedOff || second.Trigger == TriggerPrompt || second.Outcome != "end_turn" {
				t.Errorf("first part %s, second part %s from %s", first.Outcome, second.Outcome, second.Trigger)
			}
			if first.Requests+second.Requests != len(exchanges) {
				t.Errorf("requests %d + %d, recorded %d", first.Requests, second.Requests, len(exchanges))
			}
		})
	}
}

// TestColdReplicaPicksUpTheCurrentTurn: a cctrace started while a long session runs (a new
// replica, or a restart) traces the turn in progress and nothing of the history before it.
func TestColdReplicaPicksUpTheCurrentTurn(t *testing.T) {
	exchanges, err := replay.Load("../testdata/claude-code/compaction")
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	tr := New(rec)
	last := exchanges[len(exchanges)-1:]
	replay.Play(tr, last)
	tr.Tick(last[0].Response.End.Add(time.Minute))
	got := rec.traces()
	if strings.Count(got, "invoke_agent") != 1 || !strings.Contains(got, "turn=1 outcome=end_turn req=1") {
		t.Errorf("a cold start at the session's last prompt:\n%s", got)
	}
}

// TestTurnsOpenedAtOneMessageHaveTraceIDsOfTheirOwn: after a rewind the user can prompt again at
// a message where an earlier turn opened, with the same words, so the turns' deterministic trace
// ids would be one; the second gets an id of its own. A part of a turn that a replica handed off
// and that comes back to it goes on in the turn's trace.
func TestTurnsOpenedAtOneMessageHaveTraceIDsOfTheirOwn(t *testing.T) {
	c := newConvo(t)
	for range 3 {
		id := c.send(user("hello"))
		c.reply(id, "end_turn", usage(1, 1, 0, 0))
		c.tick(time.Minute)
	}
	c.tr.Close(c.now)
	seen := map[TraceID]bool{}
	for _, s := range c.rec.spans {
		if s.Kind == KindTurn {
			if seen[s.TraceID] {
				t.Fatalf("two turns in trace %s:\n%s", s.TraceID, c.rec.traces())
			}
			seen[s.TraceID] = true
		}
	}
	if len(seen) != 3 {
		t.Fatalf("%d turns, want 3:\n%s", len(seen), c.rec.traces())
	}

	c = newConvo(t, WithReplica())
	p := user("Fix the tests")
	id := c.send(p)
	c.reply(id, "tool_use", usage(10, 1, 0, 0), tool("toolu_1", "Bash"))
	c.tick(31 * time.Minute)
	c.tr.Tick(c.now)
	id = c.send(p, assistant("toolu_1"), results("toolu_1"))
	c.reply(id, "end_turn", usage(10, 1, 0, 0))
	c.tr.Close(c.now)
	var roots []*Span
	for _, s := range c.rec.spans {
		if s.Kind == KindTurn {
			roots = append(roots, s)
		}
	}
	if len(roots) != 2 || roots[0].Turn.Outcome != OutcomeHandedOff || roots[0].TraceID != roots[1].TraceID {
		t.Fatalf("want a handed-off part and its return in one trace:\n%s", c.rec.traces())
	}
}

// TestUnnamedSessionsGetRandomTraceIDs: a session the client did not name is keyed by a
// fingerprint of its first text, which different people's conversations can share: their
// turns must not get the same trace id, as turns of one named session on two replicas do.
func TestUnnamedSessionsGetRandomTraceIDs(t *testing.T) {
	rootOf := func(session string, seed uint64) TraceID {
		c := newConvo(t, WithIDSource(func() uint64 { seed++; return seed }))
		c.session = session
		id := c.send(user("hi"))
		c.reply(id, "end_turn", usage(1, 1, 0, 0))
		for _, s := range c.rec.spans {
			if s.Turn != nil {
				return s.TraceID
			}
		}
		t.Fatal("no turn")
		return TraceID{}
	}
	if a, b := rootOf("", 1), rootOf("", 1000); a == b {
		t.Errorf("two unnamed sessions that begin alike share trace id %s", a)
	}
	if a, b := rootOf("s1", 1), rootOf("s1", 1000); a != b {
		t.Errorf("one named session on two replicas: trace ids %s and %s", a, b)
	}
}
