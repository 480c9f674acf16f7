package instrument

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// recorder is a Sink that keeps everything, checking the Sink contract as it goes.
type recorder struct {
	t     testing.TB
	spans []*Span
	// untraced are the requests outside any session, handed to SpanEnded alone.
	untraced []*Span
	started  map[SpanID]bool
	ended    map[SpanID]bool
	sessions []int
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, started: map[SpanID]bool{}, ended: map[SpanID]bool{}}
}

func (r *recorder) SpanStarted(s *Span) {
	r.t.Helper()
	if !s.TraceID.IsValid() || !s.ID.IsValid() {
		r.t.Fatalf("span %q started without ids", s.Name)
	}
	if r.started[s.ID] {
		r.t.Fatalf("span %q started twice", s.Name)
	}
	if !s.End.IsZero() {
		r.t.Fatalf("span %q started with an end time", s.Name)
	}
	r.started[s.ID] = true
	r.spans = append(r.spans, s)
}

func (r *recorder) SpanEnded(s *Span) {
	r.t.Helper()
	if !s.TraceID.IsValid() {
		if s.ID.IsValid() || s.Parent.IsValid() || s.Chat == nil || s.Chat.Kind != RequestNoSession {
			r.t.Fatalf("span %q ended without a trace id", s.Name)
		}
		r.untraced = append(r.untraced, s)
		return
	}
	if !r.started[s.ID] {
		r.t.Fatalf("span %q ended without start", s.Name)
	}
	if r.ended[s.ID] {
		r.t.Fatalf("span %q ended twice", s.Name)
	}
	if s.End.Before(s.Start) {
		r.t.Fatalf("span %q ends (%v) before it starts (%v)", s.Name, s.End, s.Start)
	}
	r.ended[s.ID] = true
}

// SpanSuspended forgets a span that another tracker resumes (WithInFlight): that one starts it
// again and ends it, so that the recorder, shared by both, holds each span once.
func (r *recorder) SpanSuspended(s *Span) {
	r.t.Helper()
	if !r.started[s.ID] || r.ended[s.ID] {
		r.t.Fatalf("span %q suspended while not running", s.Name)
	}
	delete(r.started, s.ID)
	r.spans = slices.DeleteFunc(r.spans, func(o *Span) bool { return o.ID == s.ID })
}

func (r *recorder) SessionsActive(n int) { r.sessions = append(r.sessions, n) }

// traces renders every trace as an indented tree, traces in order of their roots' start, children
// in order of start. Each line: name, then the facts tests assert on. The client's spans that
// joined spans run under (ClientParent) are lines of their own, "client trace/span" in short,
// with the tracker's spans under them.
func (r *recorder) traces() string {
	children := map[SpanID][]*Span{}
	var roots []*Span
	client := map[SpanID]*Span{} // a stand-in for each client span, in its first child's trace
	for _, s := range r.spans {
		switch {
		case s.ClientParent:
			if client[s.Parent] == nil {
				c := &Span{TraceID: s.TraceID, ID: s.Parent, Start: s.Start}
				client[s.Parent] = c
				roots = append(roots, c)
			}
			children[s.Parent] = append(children[s.Parent], s)
		case s.Parent.IsValid():
			children[s.Parent] = append(children[s.Parent], s)
		default:
			roots = append(roots, s)
		}
	}
	byStart := func(list []*Span) {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Start.Before(list[j].Start) })
	}
	byStart(roots)
	var b strings.Builder
	var walk func(s *Span, depth int)
	walk = func(s *Span, depth int) {
		if c := client[s.ID]; c == s {
			fmt.Fprintf(&b, "%sclient %s/%s\n", strings.Repeat("  ", depth), s.TraceID.String()[:4], s.ID.String()[:4])
		} else {
			fmt.Fprintf(&b, "%s%s%s\n", strings.Repeat("  ", depth), s.Name, describe(s, r.ended[s.ID]))
		}
		kids := children[s.ID]
		byStart(kids)
		for _, k := range kids {
			if k.TraceID != s.TraceID {
				fmt.Fprintf(&b, "%s!! trace id differs from parent\n", strings.Repeat("  ", depth+1))
			}
			walk(k, depth+1)
		}
	}
	for _, s := range roots {
		walk(s, 0)
	}
	for _, s := range r.untraced {
		fmt.Fprintf(&b, "(no trace) %s%s\n", s.Name, describe(s, true))
	}
	return b.String()
}

func describe(s *Span, ended bool) string {
	var f []string
	switch {
	case s.Turn != nil:
		t := s.Turn
		f = append(f, fmt.Sprintf("turn=%d", t.Index), "outcome="+string(t.Outcome))
		f = append(f, fmt.Sprintf("req=%d tools=%d", t.Requests, t.ToolCalls))
		if t.Retries > 0 {
			f = append(f, fmt.Sprintf("retries=%d", t.Retries))
		}
		if t.ToolErrors > 0 {
			f = append(f, fmt.Sprintf("tool_errors=%d", t.ToolErrors))
		}
		if t.Subagents > 0 {
			f = append(f, fmt.Sprintf("subagents=%d", t.Subagents))
		}
		if t.Compaction != "" {
			f = append(f, "compaction="+t.Compaction)
		}
		if !t.PlanModeEntered.IsZero() {
			f = append(f, "plan_mode")
		}
		if t.Trigger != TriggerPrompt && t.Trigger != TriggerCompaction {
			f = append(f, "trigger="+string(t.Trigger))
		}
		f = append(f, fmt.Sprintf("in=%d out=%d", t.Usage.TotalInput(), t.Usage.OutputTokens))
	case s.Chat != nil:
		c := s.Chat
		f = append(f, "kind="+string(c.Kind))
		if c.Attempt > 0 {
			f = append(f, fmt.Sprintf("attempt=%d", c.Attempt))
		}
		if c.Compaction != nil {
			f = append(f, "compaction="+c.Compaction.Trigger)
		}
		if c.Synthetic != "" {
			f = append(f, "synthetic="+string(c.Synthetic))
		}
		if c.Response != nil && c.Response.Message != nil {
			f = append(f, "stop="+c.Response.Message.StopReason)
		}
		if m := c.CacheMiss; m != nil {
			f = append(f, "cache_miss="+string(m.Cause))
		}
	case s.Tool != nil:
		f = append(f, "outcome="+string(s.Tool.Outcome))
	case s.Subagent != nil:
		sa := s.Subagent
		f = append(f, fmt.Sprintf("req=%d tools=%d", sa.Requests, sa.ToolCalls))
		if sa.ToolErrors > 0 {
			f = append(f, fmt.Sprintf("tool_errors=%d", sa.ToolErrors))
		}
		if sa.Background {
			f = append(f, "background")
		}
		f = append(f, fmt.Sprintf("in=%d out=%d", sa.Usage.TotalInput(), sa.Usage.OutputTokens))
	}
	if s.Status == StatusError {
		f = append(f, "ERROR:"+s.ErrorType)
	}
	if l := s.Link; l != nil {
		f = append(f, "link="+l.TraceID.String()[:4]+"/"+l.SpanID.String()[:4])
	}
	if !ended {
		f = append(f, "OPEN")
	}
	return " [" + strings.Join(f, " ") + "]"
}

// convo drives a tracker the way the pipeline does, with a fake clock.
type convo struct {
	t       testing.TB
	tr      *Tracker
	rec     *recorder
	now     time.Time
	nextID  uint64
	session string
	agentID string // set to send as a subagent
	model   string
	tools   int
	// traceparent is sent with each request when set, as Claude Code's own tracing does.
	traceparent string
}

func newConvo(t testing.TB, opts ...Option) *convo {
	rec := newRecorder(t)
	var seed uint64
	opts = append([]Option{WithIDSource(func() uint64 { seed++; return seed })}, opts...)
	return &convo{
		t:       t,
		tr:      New(rec, opts...),
		rec:     rec,
		now:     time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		session: "0b8f3c1e-5d2a-4c6b-9e7f-1a2b3c4d5e6f",
		model:   "claude-sonnet-4-6",
		tools:   20,
	}
}

func (c *convo) tick(d time.Duration) { c.now = c.now.Add(d) }

// send tracks a request with the given messages and returns its exchange id.
func (c *convo) send(msgs ...wire.Message) uint64 {
	c.t.Helper()
	c.tick(10 * time.Millisecond)
	c.nextID++
	req := &wire.Request{
		ExchangeID: c.nextID,
		Time:       c.now,
		Method:     "POST",
		Path:       "/v1/messages",
		Endpoint:   wire.EndpointMessages,
		Headers:    wire.Headers{SessionID: c.session, AgentID: c.agentID, Traceparent: c.traceparent},
		Body:       body(c.model, c.tools, msgs),
	}
	c.tr.Request(req)
	return c.nextID
}

// sendReq tracks a hand-made request.
func (c *convo) sendReq(req *wire.Request) uint64 {
	c.tick(10 * time.Millisecond)
	c.nextID++
	req.ExchangeID, req.Time = c.nextID, c.now
	c.tr.Request(req)
	return c.nextID
}

// reply ends exchange id with a 200 message.
func (c *convo) reply(id uint64, stop string, u wire.Usage, toolUses ...wire.ToolUse) {
	c.tick(500 * time.Millisecond)
	msg := &wire.MessageInfo{ID: fmt.Sprintf("msg_%d", id), Model: c.model, StopReason: stop, Usage: u, Blocks: map[wire.BlockType]int{wire.BlockText: 1}}
	for i := range toolUses {
		toolUses[i].End = c.now.Add(-time.Millisecond)
		msg.Blocks[wire.BlockToolUse]++
	}
	msg.ToolUses = toolUses
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, HeaderTime: c.now.Add(-400 * time.Millisecond), End: c.now, Streamed: true, Message: msg})
}

// fail ends exchange id with an HTTP error.
func (c *convo) fail(id uint64, status int, errType string) {
	c.tick(100 * time.Millisecond)
	c.tr.Response(&wire.Response{ExchangeID: id, Status: status, End: c.now, ErrorType: errType})
}

func body(model string, tools int, msgs []wire.Message) *wire.Body {
	b := &wire.Body{Model: model, MaxTokens: 32000, Stream: true, Messages: msgs}
	b.Tools = wire.ToolsInfo{Present: true, Count: tools}
	var h strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&h, "%s|%v|%s|%v|%v;", m.Role, m.Blocks, m.Text, m.ToolResults, m.ToolUseIDs)
	}
	b.HistoryHash = wire.HashText(h.String())
	for _, m := range msgs {
		if m.Role == wire.RoleUser && m.HumanText {
			b.FirstHumanText = m.Text
			b.FirstHumanTextHash = wire.HashText(m.Text)
			break
		}
	}
	for _, m := range msgs {
		if m.Role == wire.RoleUser && strings.Contains(m.Text, "<command-name>/compact</command-name>") {
			b.CompactCommand = true
		}
	}
	return b
}

// blocksOf counts n blocks of type t.
func blocksOf(t wire.BlockType, n int) wire.BlockCounts {
	var c wire.BlockCounts
	c.Add(t, n)
	return c
}

func user(text string) wire.Message {
	return wire.Message{Role: wire.RoleUser, Blocks: blocksOf(wire.BlockText, 1), HumanText: true, Text: text,
		Synthetic: wire.SyntheticText(text)}
}

func reminderOnly() wire.Message {
	return wire.Message{Role: wire.RoleUser, Blocks: blocksOf(wire.BlockText, 1)}
}

func systemMsg() wire.Message {
	return wire.Message{Role: wire.RoleSystem, Blocks: blocksOf(wire.BlockText, 1)}
}

func assistant(toolIDs ...string) wire.Message {
	m := wire.Message{Role: wire.RoleAssistant, Blocks: blocksOf(wire.BlockText, 1), ToolUseIDs: toolIDs}
	if len(toolIDs) > 0 {
		m.Blocks.Add(wire.BlockToolUse, len(toolIDs))
	}
	return m
}

// results builds a user message of tool results; an id prefixed with "!" is an error result.
func results(ids ...string) wire.Message {
	m := wire.Message{Role: wire.RoleUser, Blocks: blocksOf(wire.BlockToolResult, len(ids))}
	for _, id := range ids {
		r := wire.ToolResult{ToolUseID: strings.TrimPrefix(id, "!"), IsError: strings.HasPrefix(id, "!"), Bytes: 10}
		m.ToolResults = append(m.ToolResults, r)
	}
	return m
}

func tool(id, name string) wire.ToolUse { return wire.ToolUse{ID: id, Name: name, InputBytes: 20} }

func agentTool(id, prompt, typ string, background bool) wire.ToolUse {
	return wire.ToolUse{ID: id, Name: "Agent", InputBytes: 100, Agent: &wire.AgentCall{
		Description: "look around", SubagentType: typ, RunInBackground: background, PromptHash: wire.HashText(prompt),
	}}
}

func usage(in, out, cacheRead, cacheWrite int) wire.Usage {
	return wire.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite}
}

// startExplore sends a prompt of the main agent answered by an Agent call (toolu_ag), then that
// subagent's first request, answered by a Glob call (toolu_s1); c is left sending as the
// subagent. It returns the main agent's prompt and the subagent's.
func (c *convo) startExplore() (parent, sub wire.Message) {
	c.t.Helper()
	parent = user("explore the repo")
	id := c.send(parent)
	c.reply(id, "tool_use", usage(10, 20, 0, 0), agentTool("toolu_ag", "Find the tests", "Explore", false))
	c.agentID, c.tools = "a1b2c3", 5
	sub = user("Find the tests")
	id = c.send(sub)
	c.reply(id, "tool_use", usage(3, 4, 0, 0), tool("toolu_s1", "Glob"))
	return parent, sub
}

// endExplore sends, as the main agent again, the request carrying the Agent result of
// startExplore, and its final answer.
func (c *convo) endExplore(parent wire.Message) {
	c.t.Helper()
	c.agentID, c.tools = "", 20
	id := c.send(parent, assistant("toolu_ag"), results("toolu_ag"))
	c.reply(id, "end_turn", usage(10, 20, 0, 0))
}

func (c *convo) check(want string) {
	c.t.Helper()
	got := c.rec.traces()
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		c.t.Errorf("traces:\n%s\nwant:\n%s", got, strings.TrimSpace(want))
	}
}
