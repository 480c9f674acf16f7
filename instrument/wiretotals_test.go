package instrument

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
)

// The tests in this file check the tracker's figures against the recorded traffic itself, read
// with encoding/json and nothing of wire: what each request body contains, and what each
// subagent's exchanges carried.

// rawBody is a request body as encoding/json reads it.
type rawBody struct {
	Model    string            `json:"model"`
	System   json.RawMessage   `json:"system"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []rawMessage      `json:"messages"`
}

type rawMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type rawBlock struct {
	Type         string          `json:"type"`
	ID           string          `json:"id"`
	ToolUseID    string          `json:"tool_use_id"`
	IsError      bool            `json:"is_error"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// blocks returns a message content's blocks; a string is one text block.
func (m rawMessage) blocks(t *testing.T) []rawBlock {
	t.Helper()
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []rawBlock{{Type: "text"}}
	}
	var bs []rawBlock
	if err := json.Unmarshal(m.Content, &bs); err != nil {
		t.Fatalf("content %s: %v", m.Content, err)
	}
	return bs
}

// knownTypes are the block types and roles wire tells apart; anything else is "other".
var (
	knownTypes = map[string]bool{"text": true, "tool_use": true, "tool_result": true, "thinking": true, "redacted_thinking": true, "image": true, "document": true}
	knownRoles = map[string]bool{"user": true, "assistant": true, "system": true}
)

func blockKey(role, typ string) BlockKey {
	if !knownRoles[role] {
		role = "other"
	}
	if !knownTypes[typ] {
		typ = "other"
	}
	return BlockKey{Role: wire.Role(role), Type: wire.BlockType(typ)}
}

// isObject reports whether raw is a JSON object (cache_control: null does not count).
func isObject(raw json.RawMessage) bool {
	return strings.HasPrefix(strings.TrimSpace(string(raw)), "{")
}

// anatomy is what a chat span says of its request body.
type anatomy struct {
	messages, systemBlocks, tools, cacheBreakpoints int
	newBlocks                                       map[BlockKey]int
}

// anatomyOf computes a body's anatomy; prev is the message count of its chain's previous
// request (-1 for none): the blocks of the messages beyond it are new, all of them when the
// history got shorter.
func anatomyOf(t *testing.T, b *rawBody, prev int) anatomy {
	t.Helper()
	a := anatomy{messages: len(b.Messages), tools: len(b.Tools), newBlocks: map[BlockKey]int{}}
	var sys []rawBlock
	var s string
	switch {
	case len(b.System) == 0:
	case json.Unmarshal(b.System, &s) == nil:
		a.systemBlocks = 1
	default:
		if err := json.Unmarshal(b.System, &sys); err != nil {
			t.Fatalf("system: %v", err)
		}
	}
	for _, blk := range sys {
		if blk.Type == "text" {
			a.systemBlocks++
		}
		if isObject(blk.CacheControl) {
			a.cacheBreakpoints++
		}
	}
	for _, raw := range b.Tools {
		var tool rawBlock
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatalf("tool: %v", err)
		}
		if isObject(tool.CacheControl) {
			a.cacheBreakpoints++
		}
	}
	from := prev
	if from < 0 || from > len(b.Messages) {
		from = 0
	}
	for i, m := range b.Messages {
		for _, blk := range m.blocks(t) {
			if isObject(blk.CacheControl) {
				a.cacheBreakpoints++
			}
			if blk.Type == "tool_result" {
				var inner []rawBlock
				if json.Unmarshal(blk.Content, &inner) == nil {
					for _, in := range inner {
						if isObject(in.CacheControl) {
							a.cacheBreakpoints++
						}
					}
				}
			}
			if i >= from {
				a.newBlocks[blockKey(m.Role, blk.Type)]++
			}
		}
	}
	return a
}

// replayed replays a recorded session through a fresh tracker and returns its spans and the
// session's exchanges by sequence number (a request's ExchangeID).
func replayed(t *testing.T, dir string, opts ...Option) (*recorder, map[uint64]*replay.Exchange) {
	t.Helper()
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[uint64]*replay.Exchange{}
	for _, ex := range exchanges {
		bySeq[uint64(ex.Seq)] = ex
	}
	rec := newRecorder(t)
	var seed uint64
	tr := New(rec, append([]Option{WithIDSource(func() uint64 { seed++; return seed })}, opts...)...)
	replay.Play(tr, exchanges)
	tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	return rec, bySeq
}

// conversational are the request kinds of a chain: the others are side requests.
var conversational = map[RequestKind]bool{
	RequestTurn: true, RequestToolResults: true, RequestSubagent: true, RequestCompaction: true, RequestResumption: true,
}

// TestRequestAnatomyMatchesBody replays every recorded session and checks that each chat span's
// request anatomy (messages, system blocks, tools, cache breakpoints, new blocks by role and type)
// is what its request body contains, recomputed from the body with encoding/json.
func TestRequestAnatomyMatchesBody(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rec, bySeq := replayed(t, dir)
			// prev is the message count of each chain's last request, by chain (the agent id,
			// "" for the main agent's).
			prev := map[string]int{}
			checked := 0
			for _, s := range spansByRequest(rec) {
				c := s.Chat
				ex := bySeq[c.Request.ExchangeID]
				if ex == nil || c.Request.Body == nil {
					continue
				}
				var b rawBody
				if err := json.Unmarshal(ex.Body, &b); err != nil {
					t.Fatalf("request %d: %v", ex.Seq, err)
				}
				chain := ex.Header.Get("X-Claude-Code-Agent-Id")
				p, seen := prev[chain]
				if !seen {
					p = -1
				}
				want := anatomyOf(t, &b, p)
				if !conversational[c.Kind] {
					want.newBlocks = map[BlockKey]int{}
				} else {
					prev[chain] = len(b.Messages)
				}
				got := anatomy{
					messages: c.Messages, systemBlocks: c.Request.Body.System.Blocks, tools: c.Request.Body.Tools.Count,
					cacheBreakpoints: c.Request.Body.CacheBreakpoints, newBlocks: map[BlockKey]int{},
				}
				for k, n := range c.NewBlocks {
					if n != 0 {
						got.newBlocks[k] = n
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("request %d (%s): anatomy %+v, the body has %+v", ex.Seq, c.Kind, got, want)
				}
				checked++
			}
			if checked == 0 {
				t.Fatal("no request checked")
			}
		})
	}
}

// spansByRequest returns the chat spans of rec in the order their requests arrived.
func spansByRequest(rec *recorder) []*Span {
	var out []*Span
	for _, s := range rec.spans {
		if s.Chat != nil {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Chat.Request.ExchangeID < out[j-1].Chat.Request.ExchangeID; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// testPrice prices usage at made-up rates per model family, so that every field counts.
func testPrice(model string, u wire.Usage) (float64, bool) {
	if !strings.HasPrefix(model, "claude-") {
		return 0, false
	}
	return (3*float64(u.InputTokens) + 15*float64(u.OutputTokens) + 0.3*float64(u.CacheReadInputTokens) +
		3.75*float64(u.CacheCreationInputTokens)) / 1e6, true
}

// subagentTotals is what a subagent's exchanges carried.
type subagentTotals struct {
	requests, toolCalls, toolErrors int
	usage                           wire.Usage
	cost                            float64
}

// wireUsage reads a response's usage: a JSON message's, or a stream's message_start and
// message_delta usage, each field as last reported. It also returns its tool_use ids.
func wireUsage(t *testing.T, resp string) (wire.Usage, []string) {
	t.Helper()
	type usage struct {
		Input         *int `json:"input_tokens"`
		Output        *int `json:"output_tokens"`
		CacheRead     *int `json:"cache_read_input_tokens"`
		CacheCreation *int `json:"cache_creation_input_tokens"`
	}
	var u wire.Usage
	apply := func(x *usage) {
		if x == nil {
			return
		}
		for _, f := range []struct {
			v   *int
			dst *int
		}{{x.Input, &u.InputTokens}, {x.Output, &u.OutputTokens}, {x.CacheRead, &u.CacheReadInputTokens}, {x.CacheCreation, &u.CacheCreationInputTokens}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
	}
	type message struct {
		Usage   *usage     `json:"usage"`
		Content []rawBlock `json:"content"`
	}
	var tools []string
	if !strings.HasPrefix(resp, "event:") && !strings.HasPrefix(resp, "data:") {
		var m message
		if err := json.Unmarshal([]byte(resp), &m); err != nil {
			t.Fatalf("response: %v", err)
		}
		apply(m.Usage)
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				tools = append(tools, b.ID)
			}
		}
		return u, tools
	}
	sc := bufio.NewScanner(strings.NewReader(resp))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string    `json:"type"`
			Message      *message  `json:"message"`
			Usage        *usage    `json:"usage"`
			ContentBlock *rawBlock `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch ev.Type {
		case "message_start":
			apply(ev.Message.Usage)
		case "message_delta":
			apply(ev.Usage)
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				tools = append(tools, ev.ContentBlock.ID)
			}
		}
	}
	return u, tools
}

// TestSubagentTotalsMatchTheWire checks every subagent span's totals (requests, tool calls, tool
// errors, tokens by type, cost) against what that subagent's exchanges carried: one subagent,
// two run in parallel by one answer, and one in the background that outlives its turn.
func TestSubagentTotalsMatchTheWire(t *testing.T) {
	for _, name := range []string{"subagent", "parallel_subagents", "subagent_background"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("../testdata/claude-code", name)
			rec, bySeq := replayed(t, dir, WithPricing(testPrice))
			want := map[string]*subagentTotals{}
			calls := map[string]string{} // tool_use id -> agent id
			for seq := uint64(1); bySeq[seq] != nil; seq++ {
				ex := bySeq[seq]
				agent := ex.Header.Get("X-Claude-Code-Agent-Id")
				if agent == "" {
					continue
				}
				w := want[agent]
				if w == nil {
					w = &subagentTotals{}
					want[agent] = w
				}
				var b rawBody
				if err := json.Unmarshal(ex.Body, &b); err != nil {
					t.Fatal(err)
				}
				// Results of this agent's calls: the tool_result blocks after its last answer.
				for i := len(b.Messages) - 1; i >= 0 && b.Messages[i].Role != "assistant"; i-- {
					for _, blk := range b.Messages[i].blocks(t) {
						if blk.Type == "tool_result" && blk.IsError && calls[blk.ToolUseID] == agent {
							w.toolErrors++
						}
					}
				}
				u, tools := wireUsage(t, ex.RawResponse())
				w.requests++
				w.toolCalls += len(tools)
				for _, id := range tools {
					calls[id] = agent
				}
				w.usage = addUsage(w.usage, u)
				usd, _ := testPrice(b.Model, u)
				w.cost += usd
			}
			if len(want) == 0 {
				t.Fatal("no subagent requests in the recording")
			}
			got := 0
			for _, s := range rec.spans {
				sa := s.Subagent
				if sa == nil {
					continue
				}
				got++
				w := want[sa.AgentID]
				if w == nil {
					t.Fatalf("subagent span for agent %q, which sent nothing", sa.AgentID)
				}
				if sa.Requests != w.requests || sa.ToolCalls != w.toolCalls || sa.ToolErrors != w.toolErrors ||
					sa.Usage.InputTokens != w.usage.InputTokens || sa.Usage.OutputTokens != w.usage.OutputTokens ||
					sa.Usage.CacheReadInputTokens != w.usage.CacheReadInputTokens ||
					sa.Usage.CacheCreationInputTokens != w.usage.CacheCreationInputTokens ||
					math.Abs(sa.Cost-w.cost) > 1e-12 || sa.Unpriced != 0 {
					t.Errorf("subagent %s: requests %d, tools %d, tool errors %d, usage %+v, cost %v, unpriced %d;\n"+
						"the wire: requests %d, tools %d, tool errors %d, usage %+v, cost %v",
						sa.AgentID, sa.Requests, sa.ToolCalls, sa.ToolErrors, sa.Usage, sa.Cost, sa.Unpriced,
						w.requests, w.toolCalls, w.toolErrors, w.usage, w.cost)
				}
			}
			if got != len(want) {
				t.Errorf("%d subagent spans, %d subagents on the wire", got, len(want))
			}
		})
	}
}
