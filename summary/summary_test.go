package summary

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// spans builds tracker output by hand for one trace.
type spans struct {
	trace   instrument.TraceID
	session string
	next    byte
	running instrument.Totals // the turn's, as the tracker sums them
}

// started and ended hand a span of the turn to s as the tracker does: with the turn's running
// totals, which count it.
func (b *spans) started(s *Store, sp *instrument.Span) { s.SpanStarted(b.count(sp)) }
func (b *spans) ended(s *Store, sp *instrument.Span)   { s.SpanEnded(b.count(sp)) }

func (b *spans) count(sp *instrument.Span) *instrument.Span {
	b.running.Add(sp)
	sp.TurnTotals = &b.running
	return sp
}

func newSpans(trace byte, session string) *spans {
	return &spans{trace: instrument.TraceID{trace}, session: session}
}

func (b *spans) span(kind instrument.SpanKind, parent *instrument.Span, name string, at time.Duration) *instrument.Span {
	b.next++
	sp := &instrument.Span{
		TraceID: b.trace, ID: instrument.SpanID{b.next}, Kind: kind, Name: name,
		Start: t0.Add(at), SessionID: b.session, TurnIndex: 1, Agent: "claude-code",
	}
	if parent != nil {
		sp.Parent = parent.ID
	}
	return sp
}

func (b *spans) chat(parent *instrument.Span, at time.Duration, kind instrument.RequestKind, attempt int) *instrument.Span {
	sp := b.span(instrument.KindChat, parent, "chat claude-opus-5-5", at)
	sp.Chat = &instrument.Chat{Kind: kind, Attempt: attempt, Request: wire.Request{Body: &wire.Body{Model: "claude-opus-5-5"}}}
	return sp
}

func respond(sp *instrument.Span, end time.Duration, u wire.Usage, blocks map[wire.BlockType]int) {
	sp.End = t0.Add(end)
	sp.Status = instrument.StatusOK
	sp.Chat.Response = &wire.Response{Status: 200, Message: &wire.MessageInfo{Model: "claude-opus-5-5", StopReason: "end_turn", Usage: u, Blocks: blocks}}
	sp.Chat.ResponseBlocks = blocks
	sp.Chat.Cost, sp.Chat.Priced = testPrices.Cost("claude-opus-5-5", u) // as instrument.WithPricing does
}

// TestLiveTurn follows one turn through the store: while it runs, the store shows running spans
// and running totals; at its end, the tracker's totals and one printed line.
func TestLiveTurn(t *testing.T) {
	var out bytes.Buffer
	now := t0.Add(5 * time.Second)
	s := New(WithOutput(&out), WithClock(func() time.Time { return now }))
	b := newSpans(1, "sess-live-1")
	turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
	s.SpanStarted(turn)
	chat := b.chat(turn, time.Second, instrument.RequestTurn, 0)
	b.started(s, chat)

	got := s.TurnsWhere(Filter{})
	if len(got) != 1 || !got[0].Running() || got[0].Duration != 5 || len(got[0].Spans) != 2 || !got[0].Spans[1].Running() {
		t.Fatalf("running turn = %+v", got)
	}
	if got[0].Spans[1].Model != "claude-opus-5-5" || got[0].Spans[1].Request != "turn" {
		t.Errorf("running chat span lacks model or kind: %+v", got[0].Spans[1])
	}

	u := wire.Usage{InputTokens: 100, OutputTokens: 10, CacheReadInputTokens: 800, CacheCreationInputTokens: 100}
	respond(chat, 3*time.Second, u, map[wire.BlockType]int{wire.BlockText: 1, wire.BlockToolUse: 1})
	chat.Chat.NewBlocks = map[instrument.BlockKey]int{{Role: wire.RoleUser, Type: wire.BlockText}: 2}
	b.ended(s, chat)
	tool := b.span(instrument.KindTool, turn, "execute_tool Bash", 3*time.Second)
	tool.Tool = &instrument.Tool{Name: "Bash"}
	b.started(s, tool)
	tool.End, tool.Tool.Outcome = t0.Add(4*time.Second), instrument.ToolError
	b.ended(s, tool)

	live, ok := s.Turn(got[0].TraceID)
	if !ok {
		t.Fatal("Turn: not found")
	}
	// 100*10 + 10*100 + 800*1 + 100*10 micro-dollars.
	const wantCost = 0.0038
	if live.Requests != 1 || live.Usage.CacheReadInputTokens != 800 || live.ToolCounts["Bash"] != 1 || live.ToolFailures["Bash"] != 1 || live.ToolErrors != 1 {
		t.Errorf("running totals = %+v", live)
	}
	if d := live.Cost - wantCost; d > 1e-12 || d < -1e-12 {
		t.Errorf("running cost = %v, want %v", live.Cost, wantCost)
	}
	if c := live.Spans[1].Cost; c == nil || *c != live.Cost {
		t.Errorf("chat span cost = %v, want %v", c, live.Cost)
	}
	if out.Len() != 0 {
		t.Errorf("printed before the turn ended: %q", out.String())
	}

	turn.End = t0.Add(4 * time.Second)
	turn.Turn = &instrument.Turn{Index: 1, Outcome: "end_turn", Totals: instrument.Totals{Requests: 1, ToolCalls: 1, ToolErrors: 1,
		ToolCounts: map[string]int{"Bash": 1}, ToolFailures: map[string]int{"Bash": 1}, Usage: u, Models: []string{"claude-opus-5-5"},
		Cost: chat.Chat.Cost}}
	s.SpanEnded(turn)
	turn.Turn.ToolCounts["Bash"] = 99 // the tracker may reuse its maps; the store must have copied

	want := "cctrace sess-liv turn 1 · 4.0s · 1 req · Bash×1 (failed Bash×1) · input 1.0k (100 uncached + 800 cache read + 100 cache write) · output 10 · hit 80% · $0.0038 · end_turn\n"
	if out.String() != want {
		t.Errorf("line:\n got %q\nwant %q", out.String(), want)
	}
	done, _ := s.Turn(got[0].TraceID)
	if done.Running() || done.ToolCounts["Bash"] != 1 || done.Duration != 4 {
		t.Errorf("ended turn = %+v", done)
	}
	sess, _ := s.Session("sess-live-1")
	if sess.Messages != (Messages{HumanText: 1, TextAndToolCalls: 1}) || sess.Turns != 1 || sess.ToolErrors != 1 {
		t.Errorf("session = %+v", sess)
	}
	if !sess.First.Equal(t0) || !sess.Last.Equal(t0.Add(4*time.Second)) {
		t.Errorf("session seen %v..%v, want %v..%v", sess.First, sess.Last, t0, t0.Add(4*time.Second))
	}
}

func TestLine(t *testing.T) {
	end := t0
	tests := []struct {
		name string
		turn Turn
		want string
	}{
		{
			name: "plain",
			turn: Turn{SessionID: "0123456789ab", Index: 2, End: &end, Duration: 1.25, Outcome: "end_turn",
				Totals: instrument.Totals{Requests: 1, Usage: usage(12, 3400, 120_000, 1_500_000), Cost: 12.345}},
			want: "cctrace 01234567 turn 2 · 1.2s · 1 req · input 1.6M (12 uncached + 120k cache read + 1.5M cache write) · output 3.4k · hit 7% · $12.35 · end_turn",
		},
		{
			name: "retries tools subagents unpriced",
			turn: Turn{SessionID: "s", Index: 7, End: &end, Duration: 125, Totals: instrument.Totals{Requests: 9, Retries: 2,
				ToolCounts: map[string]int{"Read": 1, "Agent": 2, "Bash": 3}, ToolErrors: 1, Subagents: 2,
				Usage: usage(5, 0, 0, 0), Cost: 0.5, Unpriced: 3}, Outcome: "max_tokens", Compacted: "auto"},
			want: "cctrace s turn 7 · 2m05s · 9 req (2 retried) · Agent×2 Bash×3 Read×1 (1 failed) · 2 subagents · input 5 · output 0 · hit 0% · $0.5000 +3 unpriced · max_tokens · compacted (auto)",
		},
		{
			name: "no input no prices manual compaction prompt",
			turn: Turn{Index: 3, End: &end, Compaction: "manual", Totals: instrument.Totals{Unpriced: 1}, Outcome: "compaction",
				Prompt: "  explain\nthe   whole repository to me, file by file, in great detail please, thank you"},
			want: `cctrace - turn 3 (/compact manual) · 0.0s · 0 req · input 0 · output 0 · cost ? · compaction · "explain the whole repository to me, file by file, in great d…"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendLine(nil, &tt.turn)); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCacheHitRatio(t *testing.T) {
	tests := []struct {
		name   string
		tokens wire.Usage
		want   float64
		ok     bool
	}{
		{"none", usage(0, 5, 0, 0), 0, false},
		{"all read", usage(0, 0, 10, 0), 1, true},
		{"quarter", usage(1, 0, 1, 2), 0.25, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CacheHitRatio(tt.tokens)
			if got != tt.want || ok != tt.ok {
				t.Errorf("CacheHitRatio() = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{Count(999), "999"},
		{Count(1000), "1.0k"},
		{Count(99_949), "99.9k"},
		{Count(100_000), "100k"},
		{Count(2_345_678), "2.3M"},
		{Seconds(59.94), "59.9s"},
		{Seconds(61), "1m01s"},
		{Dollars(0.00001), "$0.0000"},
		{Dollars(9.99), "$9.9900"},
		{Dollars(10), "$10.00"},
		{CostText(0, 0), "$0.0000"},
		{CostText(0, 2), "cost ?"},
		{CostText(1, 2), "$1.0000 +2 unpriced"},
		{Percent(0.934), "93%"},
		{ToolList(map[string]int{"b": 1, "a": 2, "z": 0}), "a×2 b×1"},
		{MessagesText(Messages{HumanText: 1, SideRequests: 1}), "1 prompt · 1 side request (titles, token counts)"},
		{MessagesText(Messages{HumanText: 3, ToolResults: 6, AssistantText: 2, ToolCalls: 5, TextAndToolCalls: 1}), "3 prompts, 6 rounds of tool results · answers: 2 with text, 5 with tool calls, 1 with text and tool calls"},
		{MessagesText(Messages{}), "no messages"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

// TestWriteSummary checks that sessions appear in the order they started, that a session of
// nothing but free probes is left out, and that a total follows when there are several.
func TestWriteSummary(t *testing.T) {
	s := New()
	for i, id := range []string{"second-session", "first-session"} {
		b := newSpans(byte(i+1), id)
		turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", time.Duration(10-i*5)*time.Second)
		s.SpanStarted(turn)
		chat := b.chat(turn, turn.Start.Sub(t0), instrument.RequestTurn, 0)
		b.started(s, chat)
		respond(chat, turn.Start.Sub(t0)+time.Second, wire.Usage{InputTokens: 1000, OutputTokens: 100}, map[wire.BlockType]int{wire.BlockText: 1})
		b.ended(s, chat)
		turn.End = chat.End
		turn.Turn = &instrument.Turn{Index: 1, Totals: b.running}
		s.SpanEnded(turn)
	}
	probe := newSpans(9, "")
	ct := probe.chat(nil, 0, instrument.RequestCountTokens, 0)
	s.SpanStarted(ct)
	ct.End = t0
	ct.Chat.Response = &wire.Response{Status: 200, InputTokens: 50}
	s.SpanEnded(ct)

	var b bytes.Buffer
	if err := s.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := `cctrace session first-se: 1 turn · 1 req · input 1.0k · output 100 · hit 0% · $0.0200
cctrace session first-se: answers: 1 with text
cctrace session second-s: 1 turn · 1 req · input 1.0k · output 100 · hit 0% · $0.0200
cctrace session second-s: answers: 1 with text
cctrace total of 2 sessions: 2 turns · 2 req · input 2.0k · output 200 · hit 0% · $0.0400
`
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := s.Sessions(); len(got) != 3 || got[0].ID != "second-session" {
		t.Errorf("Sessions() not most recent first: %+v", got)
	}
}

func TestTurnsAreCopies(t *testing.T) {
	s := New()
	b := newSpans(1, "s")
	turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
	s.SpanStarted(turn)
	tool := b.span(instrument.KindTool, turn, "execute_tool Bash", 0)
	tool.Tool = &instrument.Tool{Name: "Bash"}
	b.started(s, tool)
	tool.End = t0
	b.ended(s, tool)

	got := s.TurnsWhere(Filter{Session: "s"})
	got[0].Spans[0].Name = "changed"
	got[0].ToolCounts["Bash"] = 5
	again, _ := s.Turn(got[0].TraceID)
	if again.Spans[0].Name != "invoke_agent claude-code" || again.ToolCounts["Bash"] != 1 {
		t.Errorf("changing a returned turn changed the store: %+v", again)
	}
	if n := len(s.TurnsWhere(Filter{Session: "other"})); n != 0 {
		t.Errorf("Turns(other) = %d turns, want 0", n)
	}
	if _, ok := s.Turn("nope"); ok {
		t.Error("Turn(nope) found a turn")
	}
}

func TestMaxTurns(t *testing.T) {
	s := New(WithMaxTurns(2), WithMaxSpans(2))
	for i := range 3 {
		b := newSpans(byte(i+1), "s")
		turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
		s.SpanStarted(turn)
		for range 3 {
			s.SpanStarted(b.chat(turn, 0, instrument.RequestTurn, 0))
		}
	}
	got := s.TurnsWhere(Filter{})
	if len(got) != 2 || got[0].TraceID != (instrument.TraceID{3}).String() || got[1].TraceID != (instrument.TraceID{2}).String() {
		t.Fatalf("kept turns %v, want the last two, newest first", got)
	}
	if len(got[0].Spans) != 2 || got[0].DroppedSpans != 2 {
		t.Errorf("spans %d dropped %d, want 2 and 2", len(got[0].Spans), got[0].DroppedSpans)
	}
}

func TestServeHTTP(t *testing.T) {
	s := New()
	b := newSpans(1, "sess-a")
	s.SpanStarted(b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/turns?session=sess-a", nil))
	var body struct{ Turns []Turn }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Turns) != 1 || body.Turns[0].SessionID != "sess-a" || body.Turns[0].Root != "turn" {
		t.Errorf("body = %s", rec.Body.String())
	}
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
	}
}

// TestJoinedTurn follows a turn that went into the client's trace: its root and its chat spans
// run under the client's spans, which the store never sees. It is still one turn, with its
// line and its totals.
func TestJoinedTurn(t *testing.T) {
	var out bytes.Buffer
	s := New(WithOutput(&out))
	b := newSpans(7, "sess-joined")
	client1, client2 := instrument.SpanID{0xcc, 1}, instrument.SpanID{0xcc, 2}
	turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
	turn.Parent, turn.ClientParent = client1, true
	s.SpanStarted(turn)
	chat := b.chat(nil, 0, instrument.RequestTurn, 0)
	chat.Parent, chat.ClientParent = client1, true
	b.started(s, chat)
	u := wire.Usage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 90}
	respond(chat, time.Second, u, map[wire.BlockType]int{wire.BlockToolUse: 1})
	b.ended(s, chat)
	tool := b.span(instrument.KindTool, turn, "execute_tool Bash", time.Second)
	tool.Tool = &instrument.Tool{Name: "Bash"}
	b.started(s, tool)
	tool.End, tool.Tool.Outcome = t0.Add(2*time.Second), instrument.ToolSuccess
	b.ended(s, tool)
	chat2 := b.chat(nil, 2*time.Second, instrument.RequestToolResults, 0)
	chat2.Parent, chat2.ClientParent = client2, true
	b.started(s, chat2)
	respond(chat2, 3*time.Second, u, nil)
	b.ended(s, chat2)

	turns := s.TurnsWhere(Filter{Session: "sess-joined"})
	if len(turns) != 1 || !turns[0].Running() || turns[0].Requests != 2 || len(turns[0].Spans) != 4 {
		t.Fatalf("running joined turn = %+v", turns)
	}
	if r := turns[0].Spans[0]; r.Kind != "turn" || r.ParentID != client1.String() {
		t.Errorf("root record = %+v, want the turn under the client's span", r)
	}
	turn.End = t0.Add(3 * time.Second)
	turn.Turn = &instrument.Turn{Index: 1, Outcome: "end_turn", Totals: instrument.Totals{Requests: 2, ToolCalls: 1, ToolCounts: map[string]int{"Bash": 1},
		Usage: wire.Usage{InputTokens: 20, OutputTokens: 10, CacheReadInputTokens: 180}}}
	s.SpanEnded(turn)
	if got, _ := s.Turn(turns[0].TraceID); got.Running() || got.Outcome != "end_turn" || got.Usage.CacheReadInputTokens != 180 {
		t.Errorf("ended joined turn = %+v", got)
	}
	if out.Len() == 0 {
		t.Error("no line for the joined turn")
	}
}

// TestTurnPartComesBack: a replica hands a turn off (its part ends handed_off) and the session
// comes back to it within the turn: the tracker starts a second root in the same trace. The
// store keeps the parts apart, each with its own totals, and the trace id finds the latest.
func TestTurnPartComesBack(t *testing.T) {
	s := New()
	b := newSpans(7, "sess-back")
	u := wire.Usage{InputTokens: 10, OutputTokens: 1}
	var roots []*instrument.Span
	for i, outcome := range []instrument.Outcome{instrument.OutcomeHandedOff, "end_turn"} {
		at := time.Duration(i) * time.Hour
		root := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", at)
		s.SpanStarted(root)
		chat := b.chat(root, at+time.Second, instrument.RequestTurn, 0)
		b.running = instrument.Totals{} // each part is a turn of its own to the tracker
		b.started(s, chat)
		respond(chat, at+2*time.Second, u, nil)
		b.ended(s, chat)
		root.End = t0.Add(at + 3*time.Second)
		root.Turn = &instrument.Turn{Index: 1, Outcome: outcome, Totals: b.running}
		s.SpanEnded(root)
		roots = append(roots, root)
	}
	got := s.TurnsWhere(Filter{}) // newest first
	if len(got) != 2 || got[1].Outcome != "handed_off" || got[0].Outcome != "end_turn" || got[0].Requests != 1 || got[1].Requests != 1 {
		t.Fatalf("turns = %+v", got)
	}
	if !got[1].Start.Equal(roots[0].Start) || len(got[0].Spans) != 2 || len(got[1].Spans) != 2 {
		t.Errorf("first part overwritten by the second: %+v", got)
	}
	if last, ok := s.Turn(got[0].TraceID); !ok || last.Outcome != "end_turn" {
		t.Errorf("Turn(trace) = %+v, want the latest part", last)
	}
}
