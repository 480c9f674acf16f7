package wire

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/zeebo/xxh3"
)

// countBlocks returns the counts in m.
func countBlocks(m map[BlockType]int) BlockCounts {
	var c BlockCounts
	for t, n := range m {
		c.Add(t, n)
	}
	return c
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawMessagesHash hashes the messages array as encoding/json delimits it, independently of the
// decoder under test.
func rawMessagesHash(t *testing.T, body []byte) uint64 {
	t.Helper()
	var top struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	return xxh3.Hash(top.Messages)
}

func TestParseBodyFixtures(t *testing.T) {
	agentResult := "The retry loop ignores Retry-After.\nagentId: a3f9c1d27b8e4c05 (use SendMessage with to: 'a3f9c1d27b8e4c05' to continue this agent)\n<usage>total_tokens: 18234\ntool_uses: 7\nduration_ms: 41234</usage>"
	imageBlock := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`
	continued := "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary: fixed TestRetry."
	billing := "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=cli;"
	tests := []struct {
		fixture string
		want    Body
	}{
		{
			fixture: "request_turn.json",
			want: Body{
				Model:             "claude-opus-4-6",
				MaxTokens:         32000,
				Stream:            true,
				UserID:            `{"device_id":"4b1f0c2e9d","account_uuid":"7d7a3c1e-1111-4a2b-9c3d-0123456789ab","session_id":"0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10"}`,
				MetadataSessionID: "0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10",
				AccountUUID:       "7d7a3c1e-1111-4a2b-9c3d-0123456789ab",
				Thinking:          "adaptive",
				Effort:            "high",
				ContextManagement: true,
				System: SystemInfo{
					Blocks: 3,
					Bytes: len(billing) + len("You are Claude Code, Anthropic's official CLI for Claude.") +
						len("\nYou are an interactive agent that helps users with software engineering tasks."),
					BillingHeader: billing,
				},
				Tools: ToolsInfo{
					Present: true, Count: 5, Deferred: 1,
					Names: []string{"Agent", "Bash", "Read", "mcp__github__get_issue", "WebSearch"},
				},
				Messages: []Message{{
					Role: RoleUser, Blocks: countBlocks(map[BlockType]int{BlockText: 2}), HumanText: true,
					Text: "Why does TestRetry fail on CI? Fix it.",
				}},
				CacheBreakpoints:   3,
				FirstHumanText:     "Why does TestRetry fail on CI? Fix it.",
				FirstHumanTextHash: HashText("Why does TestRetry fail on CI? Fix it."),
			},
		},
		{
			fixture: "request_tool_results.json",
			want: Body{
				Model:             "claude-opus-4-6",
				MaxTokens:         32000,
				Stream:            true,
				UserID:            "user_9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08_account_7d7a3c1e-1111-4a2b-9c3d-0123456789ab_session_0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10",
				MetadataSessionID: "0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10",
				AccountUUID:       "7d7a3c1e-1111-4a2b-9c3d-0123456789ab",
				System:            SystemInfo{Blocks: 1, Bytes: len("You are Claude Code.")},
				Tools:             ToolsInfo{Present: true},
				Messages: []Message{
					{
						Role: RoleUser, Blocks: countBlocks(map[BlockType]int{BlockText: 2}), HumanText: true,
						Text: "Audit the retry code, use an agent.",
					},
					{
						Role:       RoleAssistant,
						Blocks:     countBlocks(map[BlockType]int{BlockThinking: 1, BlockText: 1, BlockToolUse: 2}),
						ToolUseIDs: []string{"toolu_01AgentA", "toolu_01Ls"},
					},
					{
						Role:   RoleUser,
						Blocks: countBlocks(map[BlockType]int{BlockToolResult: 3}),
						ToolResults: []ToolResult{
							{ToolUseID: "toolu_01Ls", Bytes: len("go.mod\nmain.go\n"), Preview: "go.mod\nmain.go\n"},
							{
								ToolUseID: "toolu_01AgentA", Bytes: len(agentResult),
								AgentID: "a3f9c1d27b8e4c05", Preview: agentResult,
							},
							{ToolUseID: "toolu_01Img", IsError: true, Bytes: len(imageBlock)},
						},
					},
					{Role: RoleSystem, Blocks: countBlocks(map[BlockType]int{BlockText: 1})},
				},
				CacheBreakpoints:   1,
				FirstHumanText:     "Audit the retry code, use an agent.",
				FirstHumanTextHash: HashText("Audit the retry code, use an agent."),
			},
		},
		{
			fixture: "request_compact.json",
			want: Body{
				Model:     "claude-sonnet-4-6",
				MaxTokens: 20000,
				Stream:    true,
				System: SystemInfo{
					Blocks:        1,
					Bytes:         len("x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=sdk-cli; cc_is_subagent=true;"),
					BillingHeader: "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=sdk-cli; cc_is_subagent=true;",
					Subagent:      true,
				},
				Messages: []Message{
					{Role: RoleUser, Blocks: countBlocks(map[BlockType]int{BlockText: 1}), HumanText: true, Text: continued},
					{
						Role: RoleUser, Blocks: countBlocks(map[BlockType]int{BlockText: 2}), HumanText: true,
						Text: "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args></command-args>",
					},
					{Role: RoleOther, Blocks: countBlocks(map[BlockType]int{BlockOther: 1})},
				},
				FirstHumanText:     continued,
				FirstHumanTextHash: HashText(continued),
				CompactCommand:     true,
				PlanMode:           true,
				TurnOpener:         1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			raw := readFixture(t, tt.fixture)
			tt.want.HistoryHash = rawMessagesHash(t, raw)
			got, err := ParseBody(raw, "")
			if err != nil {
				t.Fatal(err)
			}
			got.Anatomy = Anatomy{} // anatomy_test.go checks it
			if !reflect.DeepEqual(*got, tt.want) {
				gotJSON, _ := json.MarshalIndent(got, "", "  ")
				wantJSON, _ := json.MarshalIndent(tt.want, "", "  ")
				t.Errorf("ParseBody mismatch\ngot:  %s\nwant: %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestParseBodyCases(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, beyond HumanTextLimit
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, b *Body)
	}{
		{
			name: "empty object",
			body: `{}`,
			check: func(t *testing.T, b *Body) {
				if !reflect.DeepEqual(*b, Body{TurnOpener: -1}) {
					t.Errorf("got %+v, want an empty Body", *b)
				}
			},
		},
		{
			name: "escapes decoded like encoding/json",
			body: `{"messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 \"q\" \/ \ud800x"}]}`,
			check: func(t *testing.T, b *Body) {
				want := "café 😀 \"q\" / \ufffdx"
				if b.FirstHumanText != want || b.FirstHumanTextHash != HashText(want) {
					t.Errorf("FirstHumanText = %q, want %q", b.FirstHumanText, want)
				}
			},
		},
		{
			name: "long human text truncated, hash of the whole",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"}]}]}`,
			check: func(t *testing.T, b *Body) {
				if want := long[:HumanTextLimit]; b.FirstHumanText != want {
					t.Errorf("FirstHumanText has %d bytes, want %d", len(b.FirstHumanText), len(want))
				}
				if b.FirstHumanTextHash != HashText(long) {
					t.Error("FirstHumanTextHash is not the hash of the whole text")
				}
				if b.Messages[0].Text != b.FirstHumanText {
					t.Errorf("Messages[0].Text = %q", b.Messages[0].Text)
				}
			},
		},
		{
			name: "indented reminder and blank text are not human text",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"  \n\t<system-reminder>x</system-reminder>"},{"type":"text","text":" \n "}]}]}`,
			check: func(t *testing.T, b *Body) {
				if b.Messages[0].HumanText || b.FirstHumanText != "" || b.FirstHumanTextHash != 0 {
					t.Errorf("got HumanText=%v FirstHumanText=%q", b.Messages[0].HumanText, b.FirstHumanText)
				}
			},
		},
		{
			name: "keys in any order",
			body: `{"messages":[{"content":[{"text":"hi","type":"text"},{"input":{},"id":"toolu_1","type":"tool_use"}],"role":"assistant"}],"model":"m"}`,
			check: func(t *testing.T, b *Body) {
				m := b.Messages[0]
				if m.Role != RoleAssistant || m.Text != "hi" || !reflect.DeepEqual(m.ToolUseIDs, []string{"toolu_1"}) || m.HumanText {
					t.Errorf("got %+v", m)
				}
			},
		},
		{
			name: "plan mode ends with the exit message that follows it",
			body: `{"messages":[{"role":"user","content":"plan it"},{"role":"system","content":"Plan mode is active. The user indicated that they do not want you to execute yet"},{"role":"assistant","content":"ok"},{"role":"user","content":"go ahead"},{"role":"system","content":"## Exited Plan Mode\n\nYou have exited plan mode."}]}`,
			check: func(t *testing.T, b *Body) {
				if b.PlanMode {
					t.Error("PlanMode = true, want false")
				}
				if b.Messages[3].Text != "go ahead" || b.Messages[2].Text != "" {
					t.Errorf("texts = %q, %q", b.Messages[2].Text, b.Messages[3].Text)
				}
			},
		},
		{
			name: "plan mode announced in a system message holds",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"plan it"}]},{"role":"system","content":[{"type":"text","text":"Plan mode is active. The user indicated that they do not want you to execute yet"}]},{"role":"assistant","content":"ok"},{"role":"user","content":"go ahead"}]}`,
			check: func(t *testing.T, b *Body) {
				if !b.PlanMode {
					t.Error("PlanMode = false, want true")
				}
				if b.Messages[3].Text != "go ahead" || b.Messages[0].Text != "plan it" {
					t.Errorf("texts = %q, %q", b.Messages[0].Text, b.Messages[3].Text)
				}
			},
		},
		{
			name: "compact command in an assistant message does not count",
			body: `{"messages":[{"role":"assistant","content":"<command-name>/compact</command-name>"}]}`,
			check: func(t *testing.T, b *Body) {
				if b.CompactCommand {
					t.Error("CompactCommand = true, want false")
				}
			},
		},
		{
			name: "output format, thinking disabled, null fields",
			body: `{"model":null,"max_tokens":1.5,"stream":null,"thinking":{"type":"disabled"},"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"context_management":null,"tools":null,"system":null,"metadata":{"user_id":null}}`,
			check: func(t *testing.T, b *Body) {
				want := Body{Thinking: "disabled", OutputFormat: "json_schema", Tools: ToolsInfo{Present: true}, TurnOpener: -1}
				if !reflect.DeepEqual(*b, want) {
					t.Errorf("got %+v, want %+v", *b, want)
				}
			},
		},
		{
			name: "tool names capped",
			body: `{"tools":[` + strings.TrimSuffix(strings.Repeat(`{"name":"t"},`, ToolNameLimit+5), ",") + `]}`,
			check: func(t *testing.T, b *Body) {
				if b.Tools.Count != ToolNameLimit+5 || len(b.Tools.Names) != ToolNameLimit {
					t.Errorf("Count=%d len(Names)=%d", b.Tools.Count, len(b.Tools.Names))
				}
			},
		},
		{
			name: "unknown metadata format has no session id",
			body: `{"metadata":{"user_id":"someone@example.com"}}`,
			check: func(t *testing.T, b *Body) {
				if b.UserID != "someone@example.com" || b.MetadataSessionID != "" {
					t.Errorf("UserID=%q MetadataSessionID=%q", b.UserID, b.MetadataSessionID)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBody([]byte(tt.body), "")
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, b)
		})
	}
}

func TestParseBodyErrors(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		encoding string
		want     string
	}{
		{"not JSON", "<html>502 Bad Gateway</html>", "", "decoding request body: jsontext: invalid character '<' at start of value"},
		{"truncated", `{"model":"claude-opus-4-6","messages":[{"role":"user","content":"hel`, "", `unexpected EOF within "/messages/0/content"`},
		{"array", `[1,2]`, "", "decoding request body: not a JSON object"},
		{"trailing garbage", `{} {}`, "", "after top-level value"},
		{"bad literal deep inside", `{"messages":[{"role":"user","content":[{"x":tru}]}]}`, "", "invalid character '}' in literal true"},
		{"missing colon", `{"a" 1}`, "", "after object name (expecting ':')"},
		{"bad escape", `{"a":"\x"}`, "", "invalid escape sequence `\\x` in string"},
		{"control character", "{\"a\":\"\x01\"}", "", `invalid character '\x01' in string`},
		{"empty", ``, "", "decoding request body: unexpected EOF"},
		{"unknown encoding", `{}`, "compress", "decoding request body: decompressing compress body"},
		{"bad gzip", `{}`, "gzip", "decompressing gzip body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBody([]byte(tt.body), tt.encoding)
			if err == nil || b != nil {
				t.Fatalf("ParseBody = %v, %v; want an error", b, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if json.Valid([]byte(tt.body)) && tt.encoding == "" && tt.name != "array" {
				t.Errorf("encoding/json accepts %q", tt.body)
			}
		})
	}
}

// TestParseBodyOwnsItsMessages checks that a Body's messages are its own, not the scratch
// array ParseBody decodes into and reuses (scratchPool): decoding other bodies, sequentially,
// after an error, and concurrently, leaves every Body returned before as it was.
func TestParseBodyOwnsItsMessages(t *testing.T) {
	bodies := [][]byte{
		readFixture(t, "request_turn.json"),
		readFixture(t, "request_tool_results.json"),
		readFixture(t, "request_compact.json"),
		claudeCodeBody(10 << 10),
		claudeCodeBody(200 << 10),
	}
	decode := func(b []byte) *Body {
		got, err := ParseBody(b, "")
		if err != nil {
			t.Error(err)
		}
		return got
	}
	first := make([]*Body, len(bodies))
	for i, b := range bodies {
		first[i] = decode(b)
		if len(first[i].Messages) == 0 {
			t.Fatalf("body %d: no messages decoded", i)
		}
		// An error halfway through a messages array leaves decoded messages behind.
		if _, err := ParseBody(b[:len(b)*3/4], ""); err == nil {
			t.Fatalf("body %d cut short: no error", i)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range 20 {
				decode(bodies[j%len(bodies)])
			}
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if again := decode(b); !reflect.DeepEqual(first[i], again) {
			t.Errorf("body %d: decoding other bodies changed the Body returned for it", i)
		}
	}
}

func TestParseBodyContentEncoding(t *testing.T) {
	raw := readFixture(t, "request_tool_results.json")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	plain, err := ParseBody(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBody(gz.Bytes(), "gzip")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, plain) {
		t.Error("gzip-encoded body decodes differently from the plain one")
	}
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	tests := []string{
		``, `plain`, `tab\there`, `\u00e9\u4e16`, `\ud83d\ude00`, `\ud83d`, `\ude00x`, `\ud83d\u0041`,
		`\"\\\/\b\f\n\r\t`, "caf\xc3\xa9", "bad\xffutf8", "cut\xe4\xb8",
	}
	for _, raw := range tests {
		t.Run(raw, func(t *testing.T) {
			checkUnquote(t, []byte(raw))
		})
	}
}

// checkUnquote compares unquote, unquotePrefix and decoded with encoding/json on one raw string
// body (between the quotes).
func checkUnquote(t *testing.T, raw []byte) {
	t.Helper()
	quoted := append(append([]byte{'"'}, raw...), '"')
	var want string
	if err := json.Unmarshal(quoted, &want); err != nil {
		return // not a valid JSON string: nothing to compare
	}
	if got := unquote(quoted); got != want {
		t.Errorf("unquote(%q) = %q, want %q", quoted, got, want)
	}
	for _, n := range []int{0, 1, 5, 64} {
		if got, w := unquotePrefix(quoted, n), truncate(want, n); got != w {
			t.Errorf("unquotePrefix(%q, %d) = %q, want %q", quoted, n, got, w)
		}
	}
	var buf []byte
	if got := decoded(quoted, &buf); string(got) != want {
		t.Errorf("decoded(%q) = %q, want %q", quoted, got, want)
	}
}

func FuzzParseBody(f *testing.F) {
	for _, name := range []string{"request_turn.json", "request_tool_results.json", "request_compact.json"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"\ud83d\ude00"}]}`))
	f.Add([]byte(`{"a":[1,-2.5e+3,true,false,null,{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := ParseBody(b, "")
		valid := json.Valid(b)
		isObject := valid && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
		switch {
		case err != nil && isObject:
			t.Fatalf("ParseBody rejected a valid object: %v", err)
		case err == nil && !isObject:
			t.Fatalf("ParseBody accepted input that is not a JSON object: %q", b)
		case err == nil && body == nil:
			t.Fatal("nil body without error")
		}
		if body != nil && len(body.FirstHumanText) > HumanTextLimit {
			t.Fatalf("FirstHumanText has %d bytes", len(body.FirstHumanText))
		}
		// A BodyCache decodes it the same, whole and then resumed from itself (a retry).
		c := NewBodyCache(0)
		parseBoth(t, c, "k", b, "")
		parseBoth(t, c, "k", b, "")
	})
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`a\u00e9`, `\ud83d\ude00`, `\ud83d`, `x\"y`, "\xff", `\ud800\udc00`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkUnquote(t, raw)
	})
}
