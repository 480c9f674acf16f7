package wire

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// refAnatomy computes a request body's parts and breakpoints with encoding/json, independently
// of the parser: its own walk, its own byte counts, its own decoding of texts (the prefixes
// that tell Claude Code's texts apart are the one table both read).
func refAnatomy(t *testing.T, body []byte) (parts []PartSize, bps []Breakpoint) {
	t.Helper()
	var top struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		System json.RawMessage   `json:"system"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	index := map[Part]int{}
	offset := 0
	add := func(p Part, n, blocks int) {
		k, ok := index[p]
		if !ok {
			k = len(parts)
			index[p] = k
			parts = append(parts, PartSize{Part: p})
		}
		parts[k].Bytes += n
		parts[k].Blocks += blocks
		offset += n
	}
	mark := func(at Location, cc json.RawMessage) {
		if !cacheMarker(cc) {
			return
		}
		var c struct {
			TTL string `json:"ttl"`
		}
		_ = json.Unmarshal(cc, &c)
		if c.TTL == "" {
			c.TTL = "5m"
		}
		bps = append(bps, Breakpoint{At: at, Offset: offset, TTL: c.TTL})
	}
	for i, raw := range top.Tools {
		var tool struct {
			Name         string          `json:"name"`
			DeferLoading bool            `json:"defer_loading"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		server := ""
		if rest, ok := strings.CutPrefix(tool.Name, "mcp__"); ok {
			if s, _, ok := strings.Cut(rest, "__"); ok {
				server = s
			}
		}
		switch {
		case tool.DeferLoading:
			add(Part{Kind: PartDeferredTools, Name: server}, len(raw), 1)
		case server != "":
			add(Part{Kind: PartMCPTools, Name: server}, len(raw), 1)
		default:
			add(Part{Kind: PartBuiltinTools}, len(raw), 1)
		}
		mark(Location{Section: SectionTools, Index: i}, tool.CacheControl)
	}
	if len(top.System) > 0 {
		prompt := false
		for i, blk := range refBlocks(t, top.System) {
			text := *blk.Text
			switch {
			case strings.HasPrefix(text, billingHeaderPrefix):
				add(Part{Kind: PartBillingHeader}, len(text), 1)
			case !prompt && strings.HasPrefix(text, "You are ") && !strings.Contains(text, "\n") && len(text) < 150:
				add(Part{Kind: PartIdentity}, len(text), 1)
			case !prompt:
				prompt = true
				add(Part{Kind: PartSystemPrompt}, len(text), 1)
			default:
				add(Part{Kind: PartAppendedPrompt}, len(text), 1)
			}
			mark(Location{Section: SectionSystem, Index: i}, blk.CacheControl)
		}
	}
	tools := map[string]string{}
	for i, m := range top.Messages {
		var blocks []json.RawMessage
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			blocks = []json.RawMessage{b}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			t.Fatal(err)
		}
		for k, raw := range blocks {
			var blk struct {
				Type         string          `json:"type"`
				Text         string          `json:"text"`
				ID           string          `json:"id"`
				Name         string          `json:"name"`
				ToolUseID    string          `json:"tool_use_id"`
				Input        json.RawMessage `json:"input"`
				Content      json.RawMessage `json:"content"`
				Thinking     string          `json:"thinking"`
				Data         json.RawMessage `json:"data"`
				Source       json.RawMessage `json:"source"`
				CacheControl json.RawMessage `json:"cache_control"`
			}
			if err := json.Unmarshal(raw, &blk); err != nil {
				t.Fatal(err)
			}
			switch blk.Type {
			case "text":
				add(refTextPart(m.Role, blk.Text), len(blk.Text), 1)
			case "tool_use":
				tools[blk.ID] = blk.Name
				add(Part{Kind: PartToolUse, Name: blk.Name}, len(blk.Input), 1)
			case "tool_result":
				text, images, imageBytes := 0, 0, 0
				if json.Unmarshal(blk.Content, &s) == nil {
					text = len(s)
				} else {
					var inner []json.RawMessage
					_ = json.Unmarshal(blk.Content, &inner)
					for _, ib := range inner {
						var b struct {
							Type   string          `json:"type"`
							Text   *string         `json:"text"`
							Source json.RawMessage `json:"source"`
						}
						_ = json.Unmarshal(ib, &b)
						switch {
						case b.Type == "text" && b.Text != nil:
							text += len(*b.Text)
						case b.Type == "image":
							images++
							imageBytes += len(b.Source)
						default:
							text += len(ib)
						}
					}
				}
				add(Part{Kind: PartToolResult, Name: tools[blk.ToolUseID]}, text, 1)
				if images > 0 {
					add(Part{Kind: PartImage}, imageBytes, images)
				}
			case "thinking":
				add(Part{Kind: PartThinking}, len(blk.Thinking), 1)
			case "redacted_thinking":
				add(Part{Kind: PartThinking}, len(blk.Data), 1)
			case "image":
				add(Part{Kind: PartImage}, len(blk.Source), 1)
			case "document":
				add(Part{Kind: PartDocument}, len(blk.Source), 1)
			default:
				add(Part{Kind: PartOther}, len(raw), 1)
			}
			mark(Location{Section: SectionMessages, Index: i, Block: k}, blk.CacheControl)
		}
	}
	return parts, bps
}

// refTextPart is the part of a text in a message of role, from the decoded text.
func refTextPart(role, text string) Part {
	switch role {
	case "assistant":
		return Part{Kind: PartAssistantText}
	case "user", "system":
	default:
		return Part{Kind: PartOther}
	}
	rest := strings.TrimLeft(text, " \t\r\n")
	reminder := strings.HasPrefix(rest, systemReminderTag)
	rest = strings.TrimLeft(strings.TrimPrefix(rest, systemReminderTag), " \t\r\n")
	kind := ""
	for _, p := range clientPrefixes {
		if strings.HasPrefix(rest, p.prefix) {
			kind = p.kind
			break
		}
	}
	window := rest[:min(len(rest), markerWindow)]
	switch {
	case kind == ClientContext && (strings.Contains(window, "# claudeMd") || strings.Contains(window, "Codebase and user instructions")):
		kind = ClientClaudeMd
	case kind == "" && strings.Contains(window, "<task-notification>"):
		kind = string(SyntheticTaskNotification)
	case kind == "":
		kind = string(SyntheticText(rest))
	}
	if kind == "" && reminder {
		kind = ClientReminder
	}
	if role == "system" {
		if kind == "" || kind == ClientReminder {
			kind = ClientOther
		}
		return Part{Kind: PartSystemMessage, Name: kind}
	}
	if kind == "" {
		return Part{Kind: PartHuman}
	}
	return Part{Kind: PartClient, Name: kind}
}

// TestAnatomyRecordedAgainstEncodingJSON is the property test of the anatomy: for every
// recorded Claude Code request body, the parts, their bytes and blocks, and the breakpoints with
// their offsets recomputed with encoding/json equal ParseBody's; the parts add up to the runs,
// and the runs to the whole.
func TestAnatomyRecordedAgainstEncodingJSON(t *testing.T) {
	kinds := map[PartKind]bool{}
	for path, body := range recordedBodies(t) {
		b, err := ParseBody(body, "")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		a := &b.Anatomy
		wantParts, wantBPs := refAnatomy(t, body)
		if !reflect.DeepEqual(a.Parts, wantParts) {
			t.Errorf("%s: parts\ngot  %v\nwant %v", path, a.Parts, wantParts)
		}
		if !reflect.DeepEqual(a.Breakpoints, wantBPs) {
			t.Errorf("%s: breakpoints\ngot  %v\nwant %v", path, a.Breakpoints, wantBPs)
		}
		if len(a.Breakpoints) != b.CacheBreakpoints {
			t.Errorf("%s: %d breakpoints, %d cache_control markers", path, len(a.Breakpoints), b.CacheBreakpoints)
		}
		checkRuns(t, path, a)
		if len(a.Messages) != len(b.Messages) {
			t.Errorf("%s: %d message hashes for %d messages", path, len(a.Messages), len(b.Messages))
		}
		for _, p := range a.Parts {
			kinds[p.Kind] = true
		}
	}
	for _, k := range []PartKind{PartBillingHeader, PartIdentity, PartSystemPrompt, PartBuiltinTools, PartDeferredTools,
		PartHuman, PartClient, PartAssistantText, PartToolUse, PartToolResult, PartSystemMessage} {
		if !kinds[k] {
			t.Errorf("no recording has a %s part", k)
		}
	}
}

// checkRuns checks that a's runs add up to its parts, in prompt order.
func checkRuns(t *testing.T, name string, a *Anatomy) {
	t.Helper()
	sums := make([]PartSize, len(a.Parts))
	seen := -1
	for _, r := range a.Runs {
		if int(r.Part) > seen+1 {
			t.Errorf("%s: part %d appears before part %d", name, r.Part, seen+1)
		}
		seen = max(seen, int(r.Part))
		sums[r.Part].Bytes += int(r.Bytes)
		sums[r.Part].Blocks += int(r.Blocks)
	}
	for i, p := range a.Parts {
		if sums[i].Bytes != p.Bytes || sums[i].Blocks != p.Blocks {
			t.Errorf("%s: part %v: runs add up to %d bytes, %d blocks", name, p, sums[i].Bytes, sums[i].Blocks)
		}
	}
	last := 0
	for _, bp := range a.Breakpoints {
		if bp.Offset < last || bp.Offset > a.Bytes() {
			t.Errorf("%s: breakpoint %v out of order or beyond %d bytes", name, bp, a.Bytes())
		}
		last = bp.Offset
	}
}

// TestApportionRecorded checks, for every recorded exchange that got an answer with usage, that
// the tokens apportioned to its request's parts add up exactly to the answer's input, cache
// reads and cache writes.
func TestApportionRecorded(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/claude-code/*/[0-9][0-9][0-9].json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	n := 0
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Path            string              `json:"path"`
			Body            json.RawMessage     `json:"body"`
			ResponseHeaders map[string][]string `json:"response_headers"`
			Response        string              `json:"response"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		contentType := strings.Join(rec.ResponseHeaders["Content-Type"], "")
		if len(rec.Body) == 0 || !strings.HasPrefix(rec.Path, "/v1/messages") || !IsEventStream(contentType) {
			continue
		}
		b, err := ParseBody(rec.Body, "")
		if err != nil {
			t.Fatal(err)
		}
		resp := Response{ContentType: contentType}
		DecodeResponse(&resp, EndpointMessages, []byte(rec.Response))
		if resp.Message == nil {
			continue
		}
		n++
		checkEstimate(t, p, &b.Anatomy, resp.Message.Usage)
	}
	if n == 0 {
		t.Fatal("no recorded answer with usage")
	}
}

// checkEstimate checks that a's estimate for u adds up exactly, part by part and in total.
func checkEstimate(t *testing.T, name string, a *Anatomy, u Usage) {
	t.Helper()
	e := a.Apportion(u)
	if len(e.Parts) != len(a.Parts) {
		t.Fatalf("%s: %d parts estimated of %d", name, len(e.Parts), len(a.Parts))
	}
	var read, write, uncached, total int
	for i, p := range e.Parts {
		if p.PartSize != a.Parts[i] {
			t.Errorf("%s: estimate of part %v is of %v", name, a.Parts[i], p.PartSize)
		}
		if p.CacheRead < 0 || p.CacheWrite < 0 || p.Uncached < 0 {
			t.Errorf("%s: %v has negative tokens %+v", name, p.Part, p)
		}
		read += p.CacheRead
		write += p.CacheWrite
		uncached += p.Uncached
		total += p.Tokens()
	}
	if len(a.Parts) > 0 && (read != u.CacheReadInputTokens || write != u.CacheCreationInputTokens ||
		uncached != u.InputTokens || total != u.TotalInput()) {
		t.Errorf("%s: parts add up to read %d write %d uncached %d (total %d); usage %+v (total %d)",
			name, read, write, uncached, total, u, u.TotalInput())
	}
}

// TestApportionProperties apportions random usages over random prompts: the sums are always
// exact, no part gets a negative share, and a part without bytes (deferred tools aside) gets
// nothing while others have bytes.
func TestApportionProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []PartKind{PartBuiltinTools, PartDeferredTools, PartSystemPrompt, PartHuman, PartToolResult, PartImage, PartThinking}
	for i := 0; i < 2000; i++ {
		var a Anatomy
		for k := range 1 + rng.IntN(6) {
			a.Parts = append(a.Parts, PartSize{Part: Part{Kind: kinds[rng.IntN(len(kinds))], Name: fmt.Sprint(k)}})
		}
		for range 1 + rng.IntN(40) {
			p := rng.IntN(len(a.Parts))
			r := Run{Part: int32(p), Message: int32(rng.IntN(5)) - 1, Bytes: int32(rng.IntN(3) * rng.IntN(50000)), Blocks: 1 + int32(rng.IntN(3))}
			a.Runs = append(a.Runs, r)
			a.Parts[p].Bytes += int(r.Bytes)
			a.Parts[p].Blocks += int(r.Blocks)
		}
		u := Usage{InputTokens: rng.IntN(3) * rng.IntN(2000), CacheReadInputTokens: rng.IntN(2) * rng.IntN(200000),
			CacheCreationInputTokens: rng.IntN(2) * rng.IntN(50000)}
		checkEstimate(t, fmt.Sprintf("case %d", i), &a, u)
		e := a.Apportion(u)
		bytes := a.Bytes()
		for k, p := range e.Parts {
			kind := a.Parts[k].Kind
			if p.Bytes == 0 && kind != PartImage && bytes > 0 && p.Tokens() > 0 {
				t.Fatalf("case %d: part %v without bytes got %d tokens", i, p.Part, p.Tokens())
			}
		}
	}
}

// TestApportionOrder checks that cache reads go to the start of the prompt and uncached tokens
// to its end, and where the estimate places the cache's boundaries.
func TestApportionOrder(t *testing.T) {
	a := Anatomy{
		Parts: []PartSize{
			{Part: Part{Kind: PartBuiltinTools}, Bytes: 4000, Blocks: 10},
			{Part: Part{Kind: PartSystemPrompt}, Bytes: 4000, Blocks: 1},
			{Part: Part{Kind: PartHuman}, Bytes: 400, Blocks: 2},
			{Part: Part{Kind: PartToolResult, Name: "Read"}, Bytes: 1600, Blocks: 1},
		},
		Runs: []Run{
			{Part: 0, Message: -1, Bytes: 4000, Blocks: 10},
			{Part: 1, Message: -1, Bytes: 4000, Blocks: 1},
			{Part: 2, Message: 0, Bytes: 200, Blocks: 1},
			{Part: 3, Message: 1, Bytes: 1600, Blocks: 1},
			{Part: 2, Message: 2, Bytes: 200, Blocks: 1},
		},
	}
	// 10,000 bytes for 2,500 tokens: 4 bytes a token. Read: tools and system (2,000); written:
	// message 0 and the result (450); uncached: the last prompt (50).
	e := a.Apportion(Usage{CacheReadInputTokens: 2000, CacheCreationInputTokens: 450, InputTokens: 50})
	want := []PartTokens{
		{PartSize: a.Parts[0], CacheRead: 1000},
		{PartSize: a.Parts[1], CacheRead: 1000},
		{PartSize: a.Parts[2], CacheWrite: 50, Uncached: 50},
		{PartSize: a.Parts[3], CacheWrite: 400},
	}
	if !reflect.DeepEqual(e.Parts, want) {
		t.Errorf("parts\ngot  %+v\nwant %+v", e.Parts, want)
	}
	if e.ReadTo == nil || e.ReadTo.String() != "system" || e.WrittenTo == nil || e.WrittenTo.String() != "messages[1]" {
		t.Errorf("read to %v, written to %v; want system, messages[1]", e.ReadTo, e.WrittenTo)
	}
	// An image counts ImageTokens, whatever its bytes; deferred tools nothing.
	img := Anatomy{
		Parts: []PartSize{{Part: Part{Kind: PartDeferredTools}, Bytes: 9000, Blocks: 3}, {Part: Part{Kind: PartImage}, Bytes: 900000, Blocks: 1}, {Part: Part{Kind: PartHuman}, Bytes: 400, Blocks: 1}},
		Runs:  []Run{{Part: 0, Message: -1, Bytes: 9000, Blocks: 3}, {Part: 1, Message: 0, Bytes: 900000, Blocks: 1}, {Part: 2, Message: 0, Bytes: 400, Blocks: 1}},
	}
	e = img.Apportion(Usage{InputTokens: ImageTokens + 100})
	if got := []int{e.Parts[0].Tokens(), e.Parts[1].Tokens(), e.Parts[2].Tokens()}; !reflect.DeepEqual(got, []int{0, ImageTokens, 100}) {
		t.Errorf("deferred tools, image, text got %v tokens", got)
	}
}

// TestAnatomyCases checks the parts of shapes the recordings do not have.
func TestAnatomyCases(t *testing.T) {
	read := `{"name":"Read","input_schema":{}}`
	issue := `{"name":"mcp__github__get_issue","input_schema":{}}`
	search := `{"name":"mcp__github__search","input_schema":{}}`
	linear := `{"name":"mcp__linear__list","defer_loading":true}`
	fetch := `{"name":"WebFetch","defer_loading":true,"cache_control":{"type":"ephemeral","ttl":"1h"}}`
	claudeMd := "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nCodebase and user instructions are shown below.</system-reminder>"
	hook := "<system-reminder>\nUserPromptSubmit hook additional context: be nice\n</system-reminder>"
	other := "<system-reminder>\nsomething new\n</system-reminder>"
	feedback := "Stop hook feedback:\n[x]: no"
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	tests := []struct {
		name string
		body string
		want []PartSize
		bps  []Breakpoint
	}{
		{
			name: "MCP servers, deferred and built-in tools",
			body: `{"tools":[` + read + "," + issue + "," + search + "," + linear + "," + fetch + `]}`,
			want: []PartSize{
				{Part: Part{Kind: PartBuiltinTools}, Bytes: len(read), Blocks: 1},
				{Part: Part{Kind: PartMCPTools, Name: "github"}, Bytes: len(issue) + len(search), Blocks: 2},
				{Part: Part{Kind: PartDeferredTools, Name: "linear"}, Bytes: len(linear), Blocks: 1},
				{Part: Part{Kind: PartDeferredTools}, Bytes: len(fetch), Blocks: 1},
			},
			bps: []Breakpoint{{At: Location{Section: SectionTools, Index: 4}, Offset: len(read + issue + search + linear + fetch), TTL: "1h"}},
		},
		{
			name: "images in a tool result and in a prompt, redacted thinking, a document, an unknown block",
			body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"data":"AAAA"}},{"type":"text","text":"what is this?"}]},` +
				`{"role":"assistant","content":[{"type":"redacted_thinking","data":"xyz"},{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"t1","name":"Read","input":{"p":1}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a png"},{"type":"image","source":{"data":"BB"}}]},` +
				`{"type":"document","source":{"d":1}},{"type":"server_tool_use","id":"s"}]}]}`,
			want: []PartSize{
				{Part: Part{Kind: PartImage}, Bytes: len(`{"data":"AAAA"}`) + len(`{"data":"BB"}`), Blocks: 2},
				{Part: Part{Kind: PartHuman}, Bytes: 13, Blocks: 1},
				{Part: Part{Kind: PartThinking}, Bytes: 5 + 2, Blocks: 2},
				{Part: Part{Kind: PartToolUse, Name: "Read"}, Bytes: 7, Blocks: 1},
				{Part: Part{Kind: PartToolResult, Name: "Read"}, Bytes: 5, Blocks: 1},
				{Part: Part{Kind: PartDocument}, Bytes: 7, Blocks: 1},
				{Part: Part{Kind: PartOther}, Bytes: len(`{"type":"server_tool_use","id":"s"}`), Blocks: 1},
			},
		},
		{
			name: "role after content, an unknown role, a result of an unknown call",
			body: `{"messages":[{"content":"I answered","role":"assistant"},{"role":"developer","content":"be brief"},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"x","cache_control":{"type":"ephemeral"}}]}]}`,
			want: []PartSize{
				{Part: Part{Kind: PartAssistantText}, Bytes: 10, Blocks: 1},
				{Part: Part{Kind: PartOther}, Bytes: 8, Blocks: 1},
				{Part: Part{Kind: PartToolResult}, Bytes: 1, Blocks: 1},
			},
			bps: []Breakpoint{{At: Location{Section: SectionMessages, Index: 2}, Offset: 19, TTL: "5m"}},
		},
		{
			name: "Claude Code's own texts by kind",
			body: `{"messages":[{"role":"user","content":[` +
				`{"type":"text","text":` + quote(claudeMd) + `},{"type":"text","text":` + quote(hook) + `},` +
				`{"type":"text","text":` + quote(other) + `},{"type":"text","text":` + quote(feedback) + `},` +
				`{"type":"text","text":"<bash-input>ls</bash-input>"},{"type":"text","text":"  "}]},` +
				`{"role":"system","content":"Today's date is 2026-12-06."},{"role":"system","content":"Remember this."}]}`,
			want: []PartSize{
				{Part: Part{Kind: PartClient, Name: ClientClaudeMd}, Bytes: len(claudeMd), Blocks: 1},
				{Part: Part{Kind: PartClient, Name: ClientHook}, Bytes: len(hook), Blocks: 1},
				{Part: Part{Kind: PartClient, Name: ClientReminder}, Bytes: len(other), Blocks: 1},
				{Part: Part{Kind: PartClient, Name: string(SyntheticHookFeedback)}, Bytes: len(feedback), Blocks: 1},
				{Part: Part{Kind: PartClient, Name: ClientCommand}, Bytes: 27, Blocks: 1},
				{Part: Part{Kind: PartHuman}, Bytes: 2, Blocks: 1},
				{Part: Part{Kind: PartSystemMessage, Name: ClientDate}, Bytes: 27, Blocks: 1},
				{Part: Part{Kind: PartSystemMessage, Name: ClientOther}, Bytes: 14, Blocks: 1},
			},
		},
		{
			name: "a string system prompt, escapes counted decoded",
			body: `{"system":"caf\u00e9 \ud83d\ude00 \"q\"\n \ud800"}`,
			want: []PartSize{{Part: Part{Kind: PartSystemPrompt}, Bytes: len("café 😀 \"q\"\n \uFFFD"), Blocks: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBody([]byte(tt.body), "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(b.Anatomy.Parts, tt.want) {
				t.Errorf("parts\ngot  %+v\nwant %+v", b.Anatomy.Parts, tt.want)
			}
			if !reflect.DeepEqual(b.Anatomy.Breakpoints, tt.bps) {
				t.Errorf("breakpoints\ngot  %+v\nwant %+v", b.Anatomy.Breakpoints, tt.bps)
			}
			checkRuns(t, tt.name, &b.Anatomy)
		})
	}
}

// TestAnatomyMessageHashes checks that a message hashes the same when Claude Code resends it as
// a string instead of a list of one text block, or with its cache marker moved, and differently
// when its content or role changes.
func TestAnatomyMessageHashes(t *testing.T) {
	hashes := func(body string) []uint64 {
		t.Helper()
		b, err := ParseBody([]byte(body), "")
		if err != nil {
			t.Fatal(err)
		}
		return b.Anatomy.Messages
	}
	list := hashes(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Bash","input":{}}]}]}`)
	str := hashes(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Bash","input":{},"cache_control":{"type":"ephemeral"}}]}]}`)
	edited := hashes(`{"messages":[{"role":"user","content":"hi!"},{"role":"user","content":[{"type":"tool_use","id":"a","name":"Bash","input":{}}]}]}`)
	if !reflect.DeepEqual(list, str) {
		t.Errorf("the same messages hash differently: %v, %v", list, str)
	}
	if edited[0] == str[0] || edited[1] == str[1] {
		t.Errorf("edited messages hash the same: %v, %v", edited, str)
	}
	sys := func(body string) []SystemHash {
		b, _ := ParseBody([]byte(body), "")
		return b.Anatomy.System
	}
	if a, b := sys(`{"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}`), sys(`{"system":[{"type":"text","text":"x"}]}`); !reflect.DeepEqual(a, b) {
		t.Errorf("a system block hashes differently with a cache marker: %v, %v", a, b)
	}
}

// FuzzTextLen checks textLen against the length of the text encoding/json decodes, for strings
// of valid UTF-8 (textLen counts an invalid byte once, encoding/json as U+FFFD) given as the
// decoder hands them over: one string token, with no white space around it.
func FuzzTextLen(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\n"`, `"\ud83d\ude00"`, `"\ud800\u0041"`, `"\udc00"`, `"\\\""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s string
		if !utf8.Valid(raw) || json.Unmarshal(raw, &s) != nil || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return
		}
		if got := textLen(raw); got != len(s) {
			t.Fatalf("textLen(%s) = %d, want %d", raw, got, len(s))
		}
	})
}
