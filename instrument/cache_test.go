package instrument

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
)

// TestContextRecorded replays every recorded session: every request answered with usage carries
// its input tokens by part, and they add up exactly to the answer's input, cache reads and cache
// writes.
func TestContextRecorded(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rec, _ := replayed(t, dir)
			for _, s := range spansByRequest(rec) {
				c := s.Chat
				if c.Response == nil || c.Response.Message == nil || c.Request.Body == nil {
					continue
				}
				u := c.Response.Message.Usage
				if c.Context == nil {
					t.Fatalf("request %d (%s) has usage and no context estimate", c.Request.ExchangeID, c.Kind)
				}
				var read, write, uncached int
				for _, p := range c.Context.Parts {
					read += p.CacheRead
					write += p.CacheWrite
					uncached += p.Uncached
				}
				if read != u.CacheReadInputTokens || write != u.CacheCreationInputTokens || uncached != u.InputTokens {
					t.Errorf("request %d: parts add up to read %d write %d uncached %d, usage %+v", c.Request.ExchangeID, read, write, uncached, u)
				}
				if c.Request.Body.Anatomy.Runs != nil {
					t.Errorf("request %d: the span keeps the prompt's runs", c.Request.ExchangeID)
				}
				checked++
			}
		})
	}
	if checked == 0 {
		t.Fatal("no request checked")
	}
}

// promptBody is a Claude-Code-shaped request body: a billing header, an identity line and a
// prompt as system blocks (the last two with cache markers), tools, and messages whose last
// block carries the third marker.
type promptBody struct {
	model    string
	billing  string
	prompt   string
	tools    []string
	messages []string // alternating user and assistant texts
	ttl      string
}

func (p promptBody) json(t *testing.T) []byte {
	t.Helper()
	cc := map[string]any{"type": "ephemeral"}
	if p.ttl != "" {
		cc["ttl"] = p.ttl
	}
	system := []map[string]any{
		{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328." + p.billing + "; cc_entrypoint=cli;"},
		{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": cc},
		{"type": "text", "text": p.prompt, "cache_control": cc},
	}
	var tools []map[string]any
	for _, name := range p.tools {
		tools = append(tools, map[string]any{"name": name, "description": "the " + name + " tool, which does things at some length", "input_schema": map[string]any{"type": "object"}})
	}
	var msgs []map[string]any
	for i, text := range p.messages {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		block := map[string]any{"type": "text", "text": text}
		if i == len(p.messages)-1 {
			block["cache_control"] = cc
		}
		msgs = append(msgs, map[string]any{"role": role, "content": []any{block}})
	}
	b, err := json.Marshal(map[string]any{"model": p.model, "messages": msgs, "system": system, "tools": tools, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendBody tracks a request whose body is b, decoded as the pipeline decodes it.
func (c *convo) sendBody(b []byte) uint64 {
	c.t.Helper()
	body, err := wire.ParseBody(b, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return c.sendReq(&wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
		Headers: wire.Headers{SessionID: c.session}, Body: body})
}

// lastChat returns the chat span of exchange id.
func (c *convo) chatOf(id uint64) *Chat {
	c.t.Helper()
	for _, s := range c.rec.spans {
		if s.Chat != nil && s.Chat.Request.ExchangeID == id {
			return s.Chat
		}
	}
	c.t.Fatalf("no chat span of exchange %d", id)
	return nil
}

// TestCacheMissCauses sends a request, answers it with a cache write of the whole prompt, then
// sends a second one changed in one way and answered with what the cache would read; the miss
// is named by what changed.
func TestCacheMissCauses(t *testing.T) {
	first := promptBody{
		model: "claude-opus-5-5", billing: "a1b", prompt: "Be helpful.", tools: []string{"Bash", "Read"},
		messages: []string{"fix the bug", "I will look.", "thanks"},
	}
	tests := []struct {
		name   string
		change func(p *promptBody)
		wait   time.Duration
		read   int // what the second request reads of the 6000 the first left cached
		cause  CacheMissCause
		where  string
	}{
		{name: "a hit", change: func(p *promptBody) {}, read: 6000},
		{name: "a small miss", change: func(p *promptBody) {}, read: 6000 - MinCacheMiss + 1},
		{name: "the billing header changes with every request", change: func(p *promptBody) { p.billing = "c2d" }, read: 6000},
		{name: "model", change: func(p *promptBody) { p.model = "claude-sonnet-5" }, cause: CacheMissModel, where: "claude-opus-5-5 → claude-sonnet-5"},
		{name: "tools", change: func(p *promptBody) { p.tools = []string{"Bash", "mcp__github__search"} }, read: 1000,
			cause: CacheMissTools, where: "added mcp__github__search; removed Read"},
		{name: "tools reordered", change: func(p *promptBody) { p.tools = []string{"Read", "Bash"} }, cause: CacheMissTools, where: "reordered"},
		{name: "system", change: func(p *promptBody) { p.prompt = "Be brief." }, read: 2000, cause: CacheMissSystem, where: "system[2] (system_prompt) changed"},
		{name: "history", change: func(p *promptBody) { p.messages[1] = "I looked." }, read: 4000, cause: CacheMissHistory, where: "messages[1]"},
		{name: "ttl", change: func(p *promptBody) {}, wait: 6 * time.Minute, cause: CacheMissTTL, where: "idle 6m1s, TTL 5m0s"},
		{name: "ttl of an hour asked", change: func(p *promptBody) { p.ttl = "1h" }, wait: 6 * time.Minute, cause: CacheMissUnexplained},
		{name: "unexplained", change: func(p *promptBody) {}, cause: CacheMissUnexplained},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConvo(t, WithPricing(func(model string, u wire.Usage) (float64, bool) {
				// $1 per million uncached, 0.1 read, 1.25 written.
				return (float64(u.InputTokens) + 0.1*float64(u.CacheReadInputTokens) + 1.25*float64(u.CacheCreationInputTokens)) / 1e6, true
			}))
			p := first
			p.messages = append([]string(nil), first.messages...)
			if tt.name == "ttl of an hour asked" {
				p.ttl = "1h"
			}
			id := c.sendBody(p.json(t))
			c.reply(id, "end_turn", usage(10, 5, 0, 6000))
			tt.change(&p)
			p.messages = append(p.messages, "Done.", "and now?")
			c.tick(tt.wait)
			id = c.sendBody(p.json(t))
			c.reply(id, "end_turn", usage(10, 5, tt.read, 7000-tt.read))
			chat := c.chatOf(id)
			if chat.Change == nil || chat.Context == nil {
				t.Fatalf("no change or context: %+v", chat)
			}
			m := chat.CacheMiss
			switch {
			case tt.cause == "" && m != nil:
				t.Fatalf("a miss %+v", m)
			case tt.cause == "":
				return
			case m == nil:
				t.Fatalf("no miss, want %s", tt.cause)
			}
			if m.Cause != tt.cause || m.Where != tt.where || m.Expected != 6000 || m.Missed != 6000-tt.read {
				t.Errorf("miss %+v, want %s %q expected 6000 missed %d", m, tt.cause, tt.where, 6000-tt.read)
			}
			// The missed tokens were written at 1.25 instead of read at 0.1 a million.
			if want := float64(m.Missed) * 1.15 / 1e6; !m.Priced || fmt.Sprintf("%.9f", m.Cost) != fmt.Sprintf("%.9f", want) {
				t.Errorf("cost beyond a hit %v (priced %v), want %v", m.Cost, m.Priced, want)
			}
		})
	}
}

// TestChangeNew checks what a request carries beyond its chain's previous one, and that a
// request after a failed answer is compared with the last request answered.
func TestChangeNew(t *testing.T) {
	c := newConvo(t)
	p := promptBody{model: "m", prompt: "p", tools: []string{"Bash"}, messages: []string{"hello"}}
	id := c.sendBody(p.json(t))
	c.reply(id, "end_turn", usage(10, 5, 0, 3000))
	p.messages = append(p.messages, "Hi.", "what now?")
	id = c.sendBody(p.json(t))
	c.tr.Response(&wire.Response{ExchangeID: id, Status: 200, End: c.now, Streamed: true, ErrorType: "overloaded_error",
		Message: &wire.MessageInfo{Usage: usage(10, 0, 3000, 50)}})
	id = c.sendBody(p.json(t))
	c.reply(id, "end_turn", usage(10, 5, 3000, 50))
	ch := c.chatOf(id).Change
	want := []wire.PartSize{
		{Part: wire.Part{Kind: wire.PartAssistantText}, Bytes: 3, Blocks: 1},
		{Part: wire.Part{Kind: wire.PartHuman}, Bytes: 9, Blocks: 1},
	}
	if ch == nil || ch.PreviousMessages != 1 || ch.EditedAt != -1 || fmt.Sprint(ch.New) != fmt.Sprint(want) {
		t.Errorf("change %+v, want 1 message before, none edited, new %v", ch, want)
	}
}
