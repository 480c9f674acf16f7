package instrument

import (
	"fmt"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
)

// opReader hands out the fuzzer's bytes one decision at a time; past the end it answers zero.
type opReader struct {
	b []byte
	i int
}

func (r *opReader) more() bool { return r.i < len(r.b) }

func (r *opReader) next(n int) int {
	if r.i >= len(r.b) {
		return 0
	}
	v := int(r.b[r.i]) % n
	r.i++
	return v
}

// fuzzSession drives one tracker with a sequence of exchanges decoded from fuzz bytes: prompts,
// tool results (for waited-on, resent and unknown ids), compactions, subagents, side requests,
// count_tokens, undecodable bodies and bodies left undecoded, retries, responses of every
// outcome in any order, ticks over every timeout, and responses to exchanges that do not exist.
type fuzzSession struct {
	c    *convo
	r    *opReader
	open []uint64
}

var (
	fuzzStops  = []string{"end_turn", "tool_use", "tool_use", "max_tokens", "pause_turn", "refusal", ""}
	fuzzStatus = []int{200, 200, 200, 200, 429, 500, 529, 0, 400}
	fuzzTools  = []string{"Bash", "Read", "Agent", "Edit"}
)

func (f *fuzzSession) toolID() string { return fmt.Sprintf("toolu_%d", f.r.next(8)) }

func (f *fuzzSession) request() {
	c, r := f.c, f.r
	c.session = fmt.Sprintf("session-%d", r.next(4))
	c.agentID = ""
	if a := r.next(4); a > 1 {
		c.agentID = fmt.Sprintf("agent-%d", a)
	}
	c.tools = 20
	prompt := fmt.Sprintf("prompt %d", r.next(4))
	var msgs []wire.Message
	req := &wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages}
	switch r.next(10) {
	case 0, 1: // a human prompt
		msgs = []wire.Message{user(prompt)}
	case 2, 3: // tool results, possibly errors, possibly for ids nobody asked for
		ids := make([]string, 1+r.next(3))
		for i := range ids {
			ids[i] = f.toolID()
			if r.next(4) == 0 {
				ids[i] = "!" + ids[i]
			}
		}
		msgs = []wire.Message{user(prompt), assistant(), results(ids...)}
	case 4: // a compaction summary request
		msgs = []wire.Message{user(prompt), assistant(), user("CRITICAL: Respond with TEXT ONLY. summarise")}
	case 5: // the request after a compaction
		msgs = []wire.Message{user(continuationPrefix + " that ran out of context."), systemMsg()}
		if r.next(2) == 0 {
			msgs[0].Text += " <command-name>/compact</command-name>"
		}
	case 6: // a side request: no tools
		c.tools = 0
		msgs = []wire.Message{user("<session>" + prompt + "</session>")}
	case 7: // count_tokens, or not a Messages call at all
		req.Endpoint, req.Path = wire.EndpointCountTokens, "/v1/messages/count_tokens"
		if r.next(2) == 0 {
			req.Method, req.Path, req.Endpoint = "GET", "/v1/models", wire.EndpointOther
		}
	case 8: // an interrupted turn
		msgs = []wire.Message{user(prompt), assistant(), user("[Request interrupted by user]")}
	case 9: // no messages at all
	}
	if req.Endpoint == wire.EndpointMessages && r.next(6) != 0 {
		req.Body = body(c.model, c.tools, msgs)
		req.Body.System.Subagent = c.agentID != "" && r.next(2) == 0
		if r.next(8) == 0 && len(msgs) > 0 {
			// The newest message only reports a finished background task.
			msgs[len(msgs)-1] = reminderOnly()
			msgs[len(msgs)-1].Synthetic = wire.SyntheticTaskNotification
		}
		req.Body.PlanMode = r.next(4) == 0
	} else if req.Endpoint == wire.EndpointMessages && r.next(2) == 0 {
		// Forwarded without its body decoded (a memory budget was full), large or small.
		req.ParseError = wire.NotDecodedCopyBudget
		req.BodySize = int64(r.next(2)) << 20
	}
	req.Headers = wire.Headers{SessionID: c.session, AgentID: c.agentID, RetryCount: r.next(2)}
	if r.next(8) == 0 {
		req.Headers.SessionID = "" // falls back to metadata or a fingerprint
	}
	if r.next(16) == 0 {
		// Claude Code's own tracing: one trace per interaction, a span per API call.
		req.Headers.Traceparent = fmt.Sprintf("00-0af7651916cd43dd8448eb211c80319%d-b7ad6b716920333%d-01", r.next(2), r.next(4))
	}
	f.open = append(f.open, c.sendReq(req))
}

func (f *fuzzSession) response() {
	c, r := f.c, f.r
	if len(f.open) == 0 {
		// A response nobody asked for.
		c.tr.Response(&wire.Response{ExchangeID: c.nextID + 1000, Status: 200, End: c.now})
		return
	}
	i := r.next(len(f.open))
	id := f.open[i]
	f.open = append(f.open[:i], f.open[i+1:]...)
	c.tick(time.Duration(r.next(200)) * 10 * time.Millisecond)
	resp := &wire.Response{ExchangeID: id, Status: fuzzStatus[r.next(len(fuzzStatus))], HeaderTime: c.now, End: c.now, Streamed: true}
	switch r.next(6) {
	case 0:
		resp.Canceled, resp.Err = true, "client went away"
	case 1:
		resp.Incomplete = true
	case 2:
		resp.ErrorType = "overloaded_error"
	}
	if resp.Status == 0 {
		resp.Err = "upstream: connection refused"
	}
	if resp.Status == 200 && r.next(5) != 0 {
		msg := &wire.MessageInfo{ID: fmt.Sprintf("msg_%d", id), Model: c.model, StopReason: fuzzStops[r.next(len(fuzzStops))],
			Usage: usage(r.next(100), r.next(100), r.next(100), r.next(100)), Blocks: map[wire.BlockType]int{wire.BlockText: 1}}
		for range r.next(4) {
			name := fuzzTools[r.next(len(fuzzTools))]
			tu := tool(f.toolID(), name)
			if r.next(8) == 0 {
				tu.ID = "" // a tool_use without an id
			}
			if name == "Agent" {
				tu = agentTool(tu.ID, fmt.Sprintf("prompt %d", r.next(4)), "", r.next(2) == 0)
			}
			tu.End = c.now.Add(-time.Duration(r.next(3)) * time.Second)
			msg.ToolUses = append(msg.ToolUses, tu)
		}
		resp.Message = msg
	}
	c.tr.Response(resp)
}

func (f *fuzzSession) tick() {
	steps := []time.Duration{time.Second, 11 * time.Second, 6 * time.Minute, 31 * time.Minute, 3 * time.Hour}
	f.c.tick(steps[f.r.next(len(steps))])
	f.c.tr.Tick(f.c.now)
}

// checkClosed fails unless every span that started has ended, every child names a parent that
// started in the same trace, and the tracker holds nothing.
func checkClosed(t testing.TB, c *convo) {
	t.Helper()
	byID := map[SpanID]*Span{}
	for _, s := range c.rec.spans {
		byID[s.ID] = s
	}
	for _, s := range c.rec.spans {
		if !c.rec.ended[s.ID] {
			t.Fatalf("span %q (%v) left open after Close:\n%s", s.Name, s.Kind, c.rec.traces())
		}
		if s.ClientParent {
			if s.Link != nil || s.Kind == KindTool || s.Kind == KindSubagent {
				t.Fatalf("span %q (%v) under a client span, with link %v:\n%s", s.Name, s.Kind, s.Link, c.rec.traces())
			}
			continue
		}
		if s.Parent.IsValid() {
			p := byID[s.Parent]
			if p == nil {
				t.Fatalf("span %q has a parent that never started:\n%s", s.Name, c.rec.traces())
			}
			if p.TraceID != s.TraceID {
				t.Fatalf("span %q is in another trace than its parent %q:\n%s", s.Name, p.Name, c.rec.traces())
			}
		}
	}
	// A trace is one turn: /api/turns and the turns page key turns by trace id.
	turns := map[TraceID]int{}
	for _, s := range c.rec.spans {
		if s.Kind == KindTurn {
			if turns[s.TraceID]++; turns[s.TraceID] > 1 {
				t.Fatalf("trace %s holds two turns:\n%s", s.TraceID, c.rec.traces())
			}
		}
	}
	if n := c.tr.Sessions(); n != 0 {
		t.Fatalf("%d sessions held after Close", n)
	}
	if n := len(c.tr.open); n != 0 {
		t.Fatalf("%d exchanges held after Close", n)
	}
}

// FuzzTracker feeds the tracker fuzzed exchange sequences. Whatever the order and content, it
// must not panic, must keep the Sink contract (each span started once, ended once, never before
// it starts), must never hold more sessions than allowed, and must end every span at Close.
func FuzzTracker(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 2, 1, 0, 2, 0, 0, 0, 1, 0, 1, 0, 0, 0},
		[]byte("prompt, tools, results, subagent, compaction, eviction and back"),
		{0, 0, 2, 4, 0, 1, 0, 1, 0, 0, 3, 1, 0, 1, 2, 0, 2, 2, 9, 1, 1, 0, 0, 0, 4, 4, 4},
	} {
		f.Add(seed)
	}
	// Seed with the shapes of the recorded sessions too: one op byte per recorded exchange.
	dirs, _ := replay.Sessions("../testdata/claude-code")
	for _, dir := range dirs {
		exs, err := replay.Load(dir)
		if err != nil {
			continue
		}
		var seed []byte
		for _, ex := range exs {
			seed = append(seed, 0, byte(ex.Seq), byte(len(ex.Body)), 1, byte(ex.Response.Status), byte(ex.Response.BodySize))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		const maxSessions = 3
		// Each sequence twice: with turns of the tracker's own, and joining the client's traces.
		for _, join := range []bool{false, true} {
			opts := []Option{WithMaxSessions(maxSessions), WithToolTimeout(30 * time.Minute), WithErrorTimeout(5 * time.Minute), WithSessionTimeout(2 * time.Hour)}
			if join {
				opts = append(opts, WithJoinClientTrace())
			}
			fs := &fuzzSession{c: newConvo(t, opts...), r: &opReader{b: data}}
			for fs.r.more() {
				switch fs.r.next(4) {
				case 0, 1:
					fs.request()
				case 2:
					fs.response()
				case 3:
					fs.tick()
				}
				if n := fs.c.tr.Sessions(); n > maxSessions {
					t.Fatalf("%d sessions held, limit %d", n, maxSessions)
				}
			}
			fs.c.tick(time.Second)
			fs.c.tr.Close(fs.c.now)
			checkClosed(t, fs.c)
		}
	})
}
