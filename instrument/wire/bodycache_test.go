package wire

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// newBodyCache returns a BodyCache with the default bound, with ReuseMessages or without.
func newBodyCache(reuse bool) *BodyCache {
	if reuse {
		return NewBodyCache(0, ReuseMessages())
	}
	return NewBodyCache(0)
}

// parseBoth decodes body with the cache and with ParseBody and fails unless both give the same
// result (or the same error). It reports whether the cache resumed an earlier body.
func parseBoth(t testing.TB, c *BodyCache, key string, body []byte, encoding string) bool {
	t.Helper()
	before, _ := c.Stats()
	got, gotErr := c.Parse(key, body, encoding)
	want, wantErr := ParseBody(body, encoding)
	after, _ := c.Stats()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("BodyCache.Parse error %v, ParseBody error %v", gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("BodyCache.Parse differs from ParseBody (resumed %v)\ncache:     %s\nParseBody: %s", after > before, g, w)
	}
	return after > before
}

// TestBodyCacheRecorded decodes every request of every recorded Claude Code session in order,
// keyed as the pipeline keys them, and checks each against ParseBody.
func TestBodyCacheRecorded(t *testing.T) {
	dirs, err := filepath.Glob("../../testdata/claude-code/*/001.json")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuse=%v", reuse), func(t *testing.T) { bodyCacheRecorded(t, dirs, reuse) })
	}
}

// bodyCacheRecorded is TestBodyCacheRecorded with or without ReuseMessages.
func bodyCacheRecorded(t *testing.T, dirs []string, reuse bool) {
	c := newBodyCache(reuse)
	requests := 0
	for _, first := range dirs {
		paths, _ := filepath.Glob(filepath.Join(filepath.Dir(first), "[0-9][0-9][0-9].json"))
		sort.Strings(paths)
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Path            string              `json:"path"`
				Headers         map[string][]string `json:"headers"`
				ContentEncoding string              `json:"content_encoding"`
				Body            json.RawMessage     `json:"body"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(rec.Body) == 0 || !strings.HasPrefix(rec.Path, "/v1/messages") {
				continue
			}
			h := ParseHeaders(rec.Headers)
			parseBoth(t, c, h.SessionID+"\x00"+h.AgentID, rec.Body, rec.ContentEncoding)
			requests++
		}
	}
	resumed, whole := c.Stats()
	t.Logf("%d recorded requests: %d resumed, %d decoded whole", requests, resumed, whole)
	if resumed == 0 {
		t.Error("no recorded request was resumed from an earlier one of its session")
	}
}

// conversation builds Claude-Code-shaped request bodies of a growing conversation.
type conversation struct {
	msgs        []map[string]any
	systemFirst bool // put system and tools before messages
	lastCC      int  // how many of the last messages carry cache_control (Claude Code: 1)
	maxTokens   int  // max_tokens; 0: 32000
	moreTools   bool // one more tool, with a cache_control marker
}

func (cv *conversation) add(role string, blocks ...map[string]any) {
	cv.msgs = append(cv.msgs, map[string]any{"role": role, "content": blocks})
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func toolUse(id, name string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{"path": "/x/" + id}}
}

func toolResult(id, content string, isError bool) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isError}
}

// body encodes the conversation with cache_control on the last block of its last lastCC
// messages, as Claude Code moves it along.
func (cv *conversation) body(t testing.TB) []byte {
	t.Helper()
	msgs := make([]map[string]any, len(cv.msgs))
	for i, m := range cv.msgs {
		if i < len(cv.msgs)-max(cv.lastCC, 1) {
			msgs[i] = m
			continue
		}
		blocks := append([]map[string]any(nil), m["content"].([]map[string]any)...)
		lastBlock := map[string]any{}
		for k, v := range blocks[len(blocks)-1] {
			lastBlock[k] = v
		}
		lastBlock["cache_control"] = map[string]any{"type": "ephemeral"}
		blocks[len(blocks)-1] = lastBlock
		msgs[i] = map[string]any{"role": m["role"], "content": blocks}
	}
	system := []map[string]any{text("x-anthropic-billing-header: cc_version=2.1.328; cc_entrypoint=cli;"), text("You are Claude Code.")}
	tools := []map[string]any{{"name": "Read", "input_schema": map[string]any{"type": "object"}}, {"name": "Agent", "defer_loading": true, "cache_control": map[string]any{"type": "ephemeral"}}}
	if cv.moreTools {
		tools = append(tools, map[string]any{"name": "mcp__github__search", "cache_control": map[string]any{"type": "ephemeral"}})
	}
	var b bytes.Buffer
	enc := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('{')
	enc("model", "claude-opus-4-7")
	if cv.systemFirst {
		enc("system", system)
		enc("tools", tools)
		enc("messages", msgs)
	} else {
		enc("messages", msgs)
		enc("system", system)
		enc("tools", tools)
	}
	enc("metadata", map[string]any{"user_id": `{"session_id":"s-1"}`})
	enc("max_tokens", cmp.Or(cv.maxTokens, 32000))
	enc("stream", true)
	b.WriteByte('}')
	return b.Bytes()
}

func TestBodyCacheConversation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		systemFirst bool
		lastCC      int
		reuse       bool
	}{
		{"claude code order", false, 1, false},
		{"system first", true, 1, false},
		{"two cache markers", false, 2, false},
		{"claude code order, messages reused", false, 1, true},
		{"two cache markers, messages reused", false, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newBodyCache(tc.reuse)
			cv := &conversation{systemFirst: tc.systemFirst, lastCC: tc.lastCC}
			cv.add("user", text("<system-reminder>\nCLAUDE.md says hi\n</system-reminder>"), text("Fix the retry loop"))
			if parseBoth(t, c, "s", cv.body(t), "") {
				t.Fatal("first body resumed")
			}
			side := &conversation{}
			side.add("user", text("Write a title for: Fix the retry loop"))
			resumed := 0
			for i := range 12 {
				id := fmt.Sprintf("toolu_%02d", i)
				cv.add("assistant", text("Reading."), toolUse(id, "Read"))
				content := "package main\n\"quoted\" \\ ünï"
				if i == 3 {
					content = "Done.\nagentId: a3f9c1d27b8e4c05 (use SendMessage)"
				}
				cv.add("user", toolResult(id, content, i == 5))
				switch i {
				case 2:
					// A system-role message, as Claude Code sends for Plan Mode.
					cv.add("system", text("Plan mode is active. Do not edit."))
				case 4:
					cv.add("system", text("## Exited Plan Mode"))
					cv.add("user", text("<command-name>/compact</command-name>"))
				case 7:
					cv.add("user", text("<task-notification>agent finished</task-notification>"), text("carry on"))
				}
				if parseBoth(t, c, "s", cv.body(t), "") {
					resumed++
				}
				if i%4 == 1 {
					// A side request of the same session in between.
					parseBoth(t, c, "s", side.body(t), "")
					side.add("assistant", text("Retry loop fix"))
					side.add("user", text("again"))
				}
			}
			if resumed < 10 {
				t.Errorf("%d of 12 growing bodies resumed, want at least 10", resumed)
			}

			// A retry: the very same body.
			same := cv.body(t)
			if !parseBoth(t, c, "s", same, "") {
				t.Error("identical body not resumed")
			}
			// Gzip.
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, _ = zw.Write(same)
			_ = zw.Close()
			parseBoth(t, c, "s", gz.Bytes(), "gzip")
			// An early message rewritten (context editing): decoded whole, same result.
			cv.msgs[1] = map[string]any{"role": "assistant", "content": []map[string]any{text("[cleared]")}}
			parseBoth(t, c, "s", cv.body(t), "")
			// The history shrinks (a compaction) and grows again.
			cv.msgs = cv.msgs[:3]
			parseBoth(t, c, "s", cv.body(t), "")
			cv.add("assistant", text("ok"))
			cv.add("user", text("next"))
			parseBoth(t, c, "s", cv.body(t), "")
			// The last message alone changes.
			cv.msgs[len(cv.msgs)-1] = map[string]any{"role": "user", "content": []map[string]any{text("other")}}
			parseBoth(t, c, "s", cv.body(t), "")
			// Cut short, or broken after the shared prefix: the same errors as ParseBody.
			good := cv.body(t)
			parseBoth(t, c, "s", good[:len(good)-40], "")
			broken := bytes.Clone(good)
			broken[len(broken)-30] = '#'
			parseBoth(t, c, "s", broken, "")
			parseBoth(t, c, "s", append(bytes.Clone(good), `,"x":1`...), "")
			// The same bytes under another key: decoded whole.
			if parseBoth(t, c, "other", good, "") {
				t.Error("resumed across keys")
			}
		})
	}
}

// TestBodyCacheResumedInvalid decodes bodies that repeat a remembered one up to one of its
// checkpoints and are not JSON after it: a resumed decode reads the body from that point on
// behind a prefix of its own, and must reject what ParseBody rejects, with ParseBody's error.
func TestBodyCacheResumedInvalid(t *testing.T) {
	for _, roles := range [][2]string{{"user", "assistant"}, {"system", "system"}} {
		cv := &conversation{}
		for i := range 4 {
			cv.add(roles[0], text(fmt.Sprint("prompt ", i)))
			cv.add(roles[1], text(fmt.Sprint("answer ", i)))
		}
		bodyCacheResumedInvalid(t, cv.body(t))
	}
}

// bodyCacheResumedInvalid is TestBodyCacheResumedInvalid on one body.
func bodyCacheResumedInvalid(t *testing.T, good []byte) {
	last := bytes.LastIndex(good, []byte(`{"content"`))
	for _, body := range []string{
		string(good[:last]) + `]}`,                 // "[…, ]"
		string(good[:last]) + `}`,                  // the array never closes
		string(good[:last]) + `{"role":"user"}]`,   // nor the object
		string(good[:last]) + `{"role":"user"}]}}`, // one brace too many
		string(good[:last]) + `{"role":"user"}],}`, // a comma before the brace
		string(good[:last]) + `{"role":"user"}]} x`,
		string(good[:last]) + `{"role":"user"}], "stream": tru}`,
	} {
		c := NewBodyCache(0)
		parseBoth(t, c, "k", good, "")
		if parseBoth(t, c, "k", []byte(body), ""); json.Valid([]byte(body)) {
			t.Errorf("%q is JSON", body[last:])
		}
	}
}

// TestParseBodyEscapedNames checks that member names are compared decoded, as encoding/json
// compares them.
func TestParseBodyEscapedNames(t *testing.T) {
	b, err := ParseBody([]byte(`{"mod\u0065l":"m","m\u0065ssages":[{"r\u006fle":"user","content":[{"typ\u0065":"t\u0065xt","text":"hi"}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Model != "m" || len(b.Messages) != 1 || b.Messages[0].Role != RoleUser || b.Messages[0].Blocks.Get(BlockText) != 1 || b.FirstHumanText != "hi" {
		t.Errorf("got %+v", b)
	}
}

// TestBodyCacheShorterBody resumes bodies that end just after a checkpoint, so that the next
// body's checkpoints come partly from the entry.
func TestBodyCacheShorterBody(t *testing.T) {
	c := NewBodyCache(0)
	cv := &conversation{}
	for i := range 6 {
		cv.add("user", text(fmt.Sprintf("prompt %d", i)))
		cv.add("assistant", text(fmt.Sprintf("answer %d", i)))
	}
	full := append([]map[string]any(nil), cv.msgs...)
	for _, n := range []int{12, 11, 10, 12, 9, 12, 2, 3} {
		cv.msgs = full[:n]
		parseBoth(t, c, "k", cv.body(t), "")
	}
}

// TestBodyCacheLastAssistantBeforeWindow decodes a body whose last assistant message comes
// before the entry's window (the messages it keeps in full): when the user messages after it
// carry tool results the entry kept nothing of, it must be decoded whole, with them.
func TestBodyCacheLastAssistantBeforeWindow(t *testing.T) {
	c := NewBodyCache(0)
	cv := &conversation{}
	cv.add("user", text("start"))
	for i := range 3 {
		id := fmt.Sprint("toolu_", i)
		cv.add("assistant", text("calling"), toolUse(id, "Read"))
		cv.add("user", toolResult(id, "result", false))
	}
	// Claude Code sends queued prompts and hook output as more user messages.
	for i := range 4 {
		cv.add("user", text(fmt.Sprint("queued ", i)))
	}
	parseBoth(t, c, "k", cv.body(t), "")
	cv.add("user", text("one more"))
	if parseBoth(t, c, "k", cv.body(t), "") {
		t.Error("resumed without the tool results of the messages before the window")
	}
	b, _ := c.Parse("k", cv.body(t), "")
	if r := b.Messages[6].ToolResults; len(r) != 1 || r[0].ToolUseID != "toolu_2" {
		t.Fatalf("tool result after the last assistant message: %+v", r)
	}

	// Without tool results between, the body is resumed: a conversation of user messages only,
	// such as the bench's small requests.
	cv = &conversation{}
	for i := range 6 {
		cv.add("user", text(fmt.Sprint("prompt ", i)))
	}
	parseBoth(t, c, "users", cv.body(t), "")
	cv.add("user", text("one more"))
	if !parseBoth(t, c, "users", cv.body(t), "") {
		t.Error("a conversation without assistant messages was not resumed")
	}
}

// TestBodyCacheHoldsManyLongConversations checks that the default bound keeps 128 conversations
// of 1,100 messages each (a 1 MB Claude Code session has about that many) resumable: with a few
// hundred bytes per message the default bound held about 30 of them, and 128 sessions taking turns missed
// every time, each body decoded whole.
func TestBodyCacheHoldsManyLongConversations(t *testing.T) {
	c := NewBodyCache(0, ReuseMessages())
	bodies := make([][]byte, 128)
	for s := range bodies {
		cv := &conversation{}
		for i := range 550 {
			id := fmt.Sprintf("toolu_%d_%d", s, i)
			cv.add("assistant", toolUse(id, "Read"))
			cv.add("user", toolResult(id, "ok", false))
		}
		bodies[s] = cv.body(t)
		if _, err := c.Parse(fmt.Sprint(s), bodies[s], ""); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := c.Stats()
	for s, b := range bodies {
		if _, err := c.Parse(fmt.Sprint(s), b, ""); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := c.Stats(); after-before != len(bodies) {
		t.Fatalf("%d of %d conversations resumed (%d messages kept)", after-before, len(bodies), c.messages)
	}
}

// TestBodyCacheRepeatedKey decodes bodies with two messages arrays (JSON allows a repeated key;
// ParseBody reads both): the second array's checkpoints must not use the first one's offsets.
func TestBodyCacheRepeatedKey(t *testing.T) {
	c := NewBodyCache(0)
	msgs := `[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"},{"role":"user","content":"e"}]`
	for _, body := range []string{
		`{"messages":` + msgs + `,"messages":[{"role":"user","content":"f"}]}`,
		`{"messages":` + msgs + `,"messages":[{"role":"user","content":"f"}]}`,
		`{"messages":` + msgs + `}`,
		`{"messages":` + msgs + `,"messages":` + msgs + `}`,
	} {
		parseBoth(t, c, "k", []byte(body), "")
	}
}

func TestBodyCacheBounded(t *testing.T) {
	c := NewBodyCache(50)
	for s := range 20 {
		cv := &conversation{}
		for i := range 15 {
			cv.add("user", text(fmt.Sprintf("prompt %d", i)))
			cv.add("assistant", text("answer"))
			parseBoth(t, c, fmt.Sprint("session", s), cv.body(t), "")
		}
		if c.messages > 50 && c.lru.Len() > 1 {
			t.Fatalf("%d messages kept in %d entries, bound 50", c.messages, c.lru.Len())
		}
	}
	n := 0
	for _, els := range c.byKey {
		n += len(els)
	}
	if n != c.lru.Len() {
		t.Fatalf("%d entries by key, %d in the LRU list", n, c.lru.Len())
	}
}

// TestBodyCacheKeepsNoBody checks that nothing a BodyCache keeps refers to a body's bytes: a
// body overwritten after Parse (its buffer reused) changes nothing.
func TestBodyCacheKeepsNoBody(t *testing.T) {
	c := NewBodyCache(0)
	cv := &conversation{}
	for i := range 8 {
		cv.add("user", text(fmt.Sprintf("prompt %d", i)), toolResult(fmt.Sprint("t", i), "result text", false))
		cv.add("assistant", text("answer"), toolUse(fmt.Sprint("t", i+1), "Read"))
		body := cv.body(t)
		got, err := c.Parse("k", body, "")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ParseBody(cv.body(t), "")
		for j := range body {
			body[j] = 'x'
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded body changed when its bytes were overwritten")
		}
	}
}

// FuzzBodyCache decodes a sequence of bodies with BodyCaches, with ReuseMessages and without,
// and checks each against ParseBody: the bodies in data, split at NUL bytes (which JSON text
// never holds), then the first one cut at cut and ended with tail (sharing a prefix with it),
// then the first one again. Bit i of keys puts the i-th body under another key.
func FuzzBodyCache(f *testing.F) {
	join := func(bodies ...[]byte) []byte { return bytes.Join(bodies, []byte{0}) }
	grow := func(cv *conversation, steps int, each func(i int)) []byte {
		var bodies [][]byte
		for i := range steps {
			id := fmt.Sprint("toolu_", i)
			cv.add("assistant", text("reading"), toolUse(id, "Read"))
			cv.add("user", toolResult(id, "package main\n\"q\" \\ é", i == 2))
			if each != nil {
				each(i)
			}
			bodies = append(bodies, cv.body(f))
		}
		return join(bodies...)
	}
	cv := &conversation{}
	cv.add("user", text("hi"))
	cv.add("assistant", text("hello"), toolUse("t1", "Read"))
	cv.add("user", toolResult("t1", "x", false))
	cv.add("assistant", text("done"))
	seed := cv.body(f)
	f.Add(seed, uint(len(seed)-60), []byte(`{"role":"user","content":"more"}],"stream":true}`), uint8(0))
	f.Add(readFixture(f, "request_tool_results.json"), uint(200), []byte(`]}`), uint8(0))
	f.Add(seed, uint(len(seed)-1), []byte(`,"messages":[{"role":"user","content":"again"}]}`), uint8(0))
	f.Add(grow(&conversation{}, 5, nil), uint(0), []byte(nil), uint8(0))
	f.Add(grow(&conversation{systemFirst: true, lastCC: 2}, 5, nil), uint(300), []byte(`]}`), uint8(4))
	tailChanges := &conversation{}
	f.Add(grow(tailChanges, 6, func(i int) { tailChanges.maxTokens, tailChanges.moreTools = 1000*i, i%2 == 0 }), uint(0), []byte(nil), uint8(0))
	queued := &conversation{}
	f.Add(grow(queued, 4, func(i int) { queued.add("user", text(fmt.Sprint("queued ", i))) }), uint(0), []byte(nil), uint8(0))
	system := &conversation{}
	f.Add(grow(system, 4, func(i int) { system.add("system", text("Plan mode is active.")) }), uint(0), []byte(nil), uint8(2))
	retries := &conversation{}
	retries.add("user", text("hi"))
	first := retries.body(f)
	retries.add("assistant", text("hello"), toolUse("t1", "Read"))
	second := retries.body(f)
	f.Add(join(first, first, second, second, first), uint(0), []byte(nil), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint, tail []byte, keys uint8) {
		bodies := bytes.Split(data, []byte{0})
		first := bodies[0]
		bodies = append(bodies, append(bytes.Clone(first[:int(cut%uint(len(first)+1))]), tail...), first)
		for _, c := range []*BodyCache{newBodyCache(false), newBodyCache(true)} {
			for i, b := range bodies {
				key := "k"
				if keys>>(i%8)&1 != 0 {
					key = "other"
				}
				parseBoth(t, c, key, b, "")
			}
		}
	})
}

// TestBodyCacheReuseMessages checks that with ReuseMessages the next body's messages are
// decoded into the array of the last one's, and that without it every body has its own.
func TestBodyCacheReuseMessages(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		c := newBodyCache(reuse)
		cv := &conversation{}
		cv.add("user", text("Fix the retry loop"))
		var last *Message
		for i := range 6 {
			cv.add("assistant", text(fmt.Sprintf("step %d", i)), toolUse(fmt.Sprintf("t%d", i), "Read"))
			cv.add("user", toolResult(fmt.Sprintf("t%d", i), "package main", false))
			b, err := c.Parse("s", cv.body(t), "")
			if err != nil {
				t.Fatal(err)
			}
			first := &b.Messages[0]
			if i > 1 && (first == last) != reuse {
				t.Errorf("reuse %v, request %d: messages in the last body's array: %v", reuse, i, first == last)
			}
			last = first
		}
		if resumed, _ := c.Stats(); resumed == 0 {
			t.Errorf("reuse %v: nothing resumed", reuse)
		}
	}
}

// TestBodyCacheTail checks the members after the messages array (system prompt, tools,
// metadata, max_tokens, …), which a resumed decode takes from the last body when their bytes are
// the same: each body of a conversation whose tail changes, changes back or stays, with messages
// added in between, decodes as ParseBody decodes it.
func TestBodyCacheTail(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		c := newBodyCache(reuse)
		cv := &conversation{}
		cv.add("user", text("Fix the retry loop"))
		for i, step := range []struct {
			maxTokens int
			moreTools bool
		}{{0, false}, {0, false}, {64000, false}, {64000, false}, {64000, true}, {64000, true}, {0, false}, {0, true}} {
			cv.maxTokens, cv.moreTools = step.maxTokens, step.moreTools
			cv.add("assistant", text(fmt.Sprintf("step %d", i)), toolUse(fmt.Sprintf("t%d", i), "Read"))
			cv.add("user", toolResult(fmt.Sprintf("t%d", i), "package main", false))
			if resumed := parseBoth(t, c, "s", cv.body(t), ""); !resumed && i > 0 {
				t.Errorf("reuse %v, request %d: not resumed", reuse, i)
			}
		}
	}
}
