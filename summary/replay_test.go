package summary

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/metrics"
)

// replayed plays the recorded Claude Code session in testdata/claude-code/name into a tracker
// whose only sink is a store, and returns the store and what it printed.
func replayed(t *testing.T, name string, opts ...Option) (*Store, string) {
	t.Helper()
	dir := filepath.Join("..", "testdata", "claude-code", name)
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	store := New(append([]Option{WithOutput(&out)}, opts...)...)
	var seed uint64
	tr := instrument.New(store, instrument.WithIDSource(func() uint64 { seed++; return seed }),
		instrument.WithPricing(testPrices.Cost))
	replay.Play(tr, exchanges)
	tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	return store, out.String()
}

// testPrices prices only claude-opus-5-5, at round rates, so that other models show as unpriced
// and the expected costs do not move when the embedded table is updated.
var testPrices = func() *metrics.Prices {
	p, err := metrics.ParsePrices([]byte(`{"version":"test","models":[{"ids":["claude-opus-5-5"],
		"input":10,"output":100,"cache_read":1,"cache_write_5m":10,"cache_write_1h":20}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// TestReplayedSessions checks the per-turn lines and the closing summary of recorded Claude Code
// sessions: retries, parallel tools with a failure, a subagent, and a manual compaction.
func TestReplayedSessions(t *testing.T) {
	tests := []struct {
		scenario     string
		lines        []string
		summary      []string
		messages     Messages
		turnsInStore int
	}{
		{
			scenario: "subagent",
			lines: []string{
				"cctrace 488d20f6 turn 1 · 2.4s · 4 req · Agent×1 Bash×1 · 1 subagent · input 17.3k (258 uncached + 8.4k cache read + 8.6k cache write) · output 182 · hit 49% · $0.1155 · end_turn",
			},
			summary: []string{
				"cctrace session 488d20f6: 1 turn · 4 req · 2 tool calls · 1 subagent · input 17.3k (258 uncached + 8.4k cache read + 8.6k cache write) · output 182 · hit 49% · $0.1155",
				"cctrace session 488d20f6: 2 prompts, 2 rounds of tool results · answers: 2 with text, 1 with tool calls, 1 with text and tool calls",
			},
			messages:     Messages{HumanText: 2, ToolResults: 2, AssistantText: 2, ToolCalls: 1, TextAndToolCalls: 1},
			turnsInStore: 1,
		},
		{
			scenario: "parallel_tools",
			lines: []string{
				"cctrace 1172a797 turn 1 · 1.5s · 2 req · Bash×2 Read×1 (failed Read×1) · input 10.4k (72 uncached + 5.1k cache read + 5.2k cache write) · output 116 · hit 49% · $0.0695 · end_turn",
			},
			summary: []string{
				"cctrace session 1172a797: 1 turn · 2 req · 3 tool calls (1 failed) · input 10.4k (72 uncached + 5.1k cache read + 5.2k cache write) · output 116 · hit 49% · $0.0695",
				"cctrace session 1172a797: 1 prompt, 1 round of tool results · answers: 1 with text, 1 with tool calls",
			},
			messages:     Messages{HumanText: 1, ToolResults: 1, AssistantText: 1, ToolCalls: 1},
			turnsInStore: 1,
		},
		{
			scenario: "retry_529",
			lines: []string{
				"cctrace e92fbde9 turn 1 · 2.0s · 3 req (2 retried) · input 4.5k (19 uncached + 0 cache read + 4.5k cache write) · output 13 · hit 0% · $0.0466 · end_turn",
			},
			summary: []string{
				"cctrace session e92fbde9: 1 turn · 3 req (2 retried) · input 4.5k (19 uncached + 0 cache read + 4.5k cache write) · output 13 · hit 0% · $0.0466",
				"cctrace session e92fbde9: 1 prompt · answers: 1 with text",
			},
			messages:     Messages{HumanText: 1, AssistantText: 1},
			turnsInStore: 1,
		},
		{
			scenario: "compaction",
			lines: []string{
				"cctrace c8f26a66 turn 1 · 0.0s · 1 req · input 4.2k (17 uncached + 4.0k cache read + 203 cache write) · output 11 · hit 95% · $0.0073 · end_turn",
				"cctrace c8f26a66 turn 2 · 0.0s · 1 req · input 4.2k (17 uncached + 4.0k cache read + 203 cache write) · output 11 · hit 95% · $0.0073 · end_turn",
				"cctrace c8f26a66 turn 3 (/compact manual) · 0.0s · 1 req · input 9.0k (37 uncached + 9.0k cache read + 0 cache write) · output 401 · hit 100% · $0.0495 · compaction",
				"cctrace c8f26a66 turn 4 · 0.0s · 1 req · input 4.2k (17 uncached + 4.0k cache read + 203 cache write) · output 11 · hit 95% · $0.0073 · end_turn · compacted (manual)",
			},
			summary: []string{
				"cctrace session c8f26a66: 4 turns · 4 req · 1 compaction · input 21.7k (88 uncached + 21.0k cache read + 609 cache write) · output 434 · hit 97% · $0.0714",
				"cctrace session c8f26a66: 3 prompts · answers: 4 with text",
			},
			messages:     Messages{HumanText: 3, AssistantText: 4},
			turnsInStore: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			store, out := replayed(t, tt.scenario)
			if got, want := strings.Split(strings.TrimSpace(out), "\n"), tt.lines; !slices.Equal(got, want) {
				t.Errorf("turn lines:\n got %q\nwant %q", got, want)
			}
			var b bytes.Buffer
			if err := store.WriteSummary(&b); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Split(strings.TrimSpace(b.String()), "\n"), tt.summary; !slices.Equal(got, want) {
				t.Errorf("summary:\n got %q\nwant %q", got, want)
			}
			turns := store.TurnsWhere(Filter{})
			if len(turns) != tt.turnsInStore {
				t.Fatalf("store holds %d turns, want %d", len(turns), tt.turnsInStore)
			}
			sess, ok := store.Session(turns[0].SessionID)
			if !ok {
				t.Fatalf("session %s unknown", turns[0].SessionID)
			}
			if sess.Messages != tt.messages {
				t.Errorf("messages = %+v, want %+v", sess.Messages, tt.messages)
			}
			for _, turn := range turns {
				if turn.Running() {
					t.Errorf("turn %d still running after the replay", turn.Index)
				}
				var sum float64
				for _, r := range turn.Spans {
					if r.Running() {
						t.Errorf("span %s %s still open", r.Kind, r.Name)
					}
					if r.Cost != nil {
						sum += *r.Cost
					}
				}
				if math.Abs(sum-turn.Cost) > 1e-9 {
					t.Errorf("turn %d: spans cost %v, turn %v", turn.Index, sum, turn.Cost)
				}
			}
		})
	}
}

// TestReplayedDefaultPrices checks that the embedded price table prices the model Claude Code
// 2.1.328 uses, so that a user without --pricing sees a cost.
func TestReplayedDefaultPrices(t *testing.T) {
	store, out := replayed(t, "tool_roundtrip")
	if strings.Contains(out, "cost ?") || strings.Contains(out, "unpriced") {
		t.Errorf("default prices left the turn unpriced: %s", out)
	}
	turns := store.TurnsWhere(Filter{})
	if len(turns) != 1 || turns[0].Cost <= 0 {
		t.Fatalf("turns = %+v, want one with a positive cost", turns)
	}
}
