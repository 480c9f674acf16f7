package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// userBody returns a request body whose messages are a first prompt, an answer and a user
// message of the given content blocks.
func userBody(t *testing.T, blocks ...map[string]any) []byte {
	t.Helper()
	return mustJSON(t, map[string]any{
		"model": "claude-opus-5-5",
		"messages": []any{
			map[string]any{"role": "user", "content": "Fix the tests"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Done."}}},
			map[string]any{"role": "user", "content": blocks},
		},
	})
}

func tb(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// TestSyntheticKinds: each kind of text Claude Code writes itself is recognised by how its first
// human text block begins (docs/wire.md, "Texts no person typed"), after system reminders and
// white space, JSON escapes and all; text a person typed is not, even when it mentions a marker
// or comes with a task notification.
func TestSyntheticKinds(t *testing.T) {
	const reminder = "<system-reminder>\nNote.\n</system-reminder>"
	const notification = "<system-reminder><task-notification><status>completed</status></task-notification></system-reminder>"
	for _, tc := range []struct {
		name   string
		blocks []map[string]any
		want   Synthetic
	}{
		{"cut off", []map[string]any{tb("Your response above was cut off mid-stream. Resume directly from where it stops — no apology.")}, SyntheticCutOff},
		{"cut off, rewrite", []map[string]any{tb("Your response above was cut off mid-stream and only your next message is delivered.")}, SyntheticCutOff},
		{"output limit", []map[string]any{tb("Output token limit hit. Resume directly")}, SyntheticOutputLimit},
		{"output limit, no output", []map[string]any{tb("[Your previous response reached the output limit with no visible output.")}, SyntheticOutputLimit},
		{"stop hook", []map[string]any{tb("Stop hook feedback:\n[check.sh]: say goodbye\n")}, SyntheticHookFeedback},
		{"task hook", []map[string]any{tb("TaskCompleted hook feedback:\nmore")}, SyntheticHookFeedback},
		{"interrupt", []map[string]any{tb("[Request interrupted by user]\n"), tb("Run it")}, SyntheticInterrupt},
		{"interrupt after a stop", []map[string]any{tb("[Request interrupted: the session ended before this agent finished. Nobody asked it to stop.]")}, SyntheticInterrupt},
		{"structured output", []map[string]any{tb("[structured-output-enforce] You MUST call the StructuredOutput tool")}, SyntheticCorrection},
		{"no visible output", []map[string]any{tb("[Your previous response had no visible output. Please continue")}, SyntheticCorrection},
		{"safety", []map[string]any{tb("Your response above was stopped by a safety classifier")}, SyntheticSafetyStop},
		{"scheduled", []map[string]any{tb("[SCHEDULED TASK - AUTOMATED FIRING OF A CONFIGURED PROMPT]\nThis turn was started")}, SyntheticScheduled},
		{"compaction", []map[string]any{tb("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.")}, SyntheticCompaction},
		{"after a reminder and white space", []map[string]any{tb(reminder), tb("\n  Output token limit hit.")}, SyntheticOutputLimit},
		{"task notification", []map[string]any{tb(notification)}, SyntheticTaskNotification},
		{"task notification and a prompt", []map[string]any{tb(notification), tb("And now the docs")}, ""},
		{"a prompt", []map[string]any{tb("Fix the tests")}, ""},
		{"a prompt that mentions a marker", []map[string]any{tb("Why did I get 'Output token limit hit'?")}, ""},
		{"reminders only", []map[string]any{tb(reminder)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseBody(userBody(t, tc.blocks...), "")
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Messages[2].Synthetic; got != tc.want {
				t.Errorf("kind %q, want %q", got, tc.want)
			}
			if got := SyntheticText(unquote(mustJSON(t, tc.blocks[len(tc.blocks)-1]["text"]))); tc.want != SyntheticTaskNotification && len(tc.blocks) == 1 && got != tc.want {
				t.Errorf("SyntheticText: kind %q, want %q", got, tc.want)
			}
		})
	}
}

// mustJSON marshals v as Claude Code does, without escaping <, > and &.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// TestTurnOpener: the message that opened a request's turn is the last user message with human
// text or Claude Code's own text that opens turns, skipping tool results and resumptions.
func TestTurnOpener(t *testing.T) {
	result := map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
	toolUse := map[string]any{"type": "tool_use", "id": "t1", "name": "Bash", "input": map[string]any{}}
	msg := func(role string, blocks ...map[string]any) map[string]any {
		return map[string]any{"role": role, "content": blocks}
	}
	for _, tc := range []struct {
		name string
		msgs []any
		want int
	}{
		{"a prompt", []any{msg("user", tb("Fix the tests"))}, 0},
		{"tool results", []any{msg("user", tb("Fix it")), msg("assistant", toolUse), msg("user", result)}, 0},
		{"results with queued text", []any{msg("user", tb("Fix it")), msg("assistant", toolUse), msg("user", result, tb("also the docs"))}, 0},
		{"a resumption", []any{msg("user", tb("Fix it")), msg("assistant", tb("Let me")), msg("user", tb("Your response above was cut off mid-stream."))}, 0},
		{"an interrupted call", []any{msg("user", tb("Fix it")), msg("assistant", toolUse), msg("user", result, tb("[Request interrupted by user for tool use]"), tb("Stop"))}, 2},
		{"hook feedback", []any{msg("user", tb("Fix it")), msg("assistant", tb("Done")), msg("user", tb("Stop hook feedback:\nno"))}, 2},
		{"a second prompt after a system message", []any{msg("user", tb("Fix it")), msg("assistant", tb("Done")), msg("user", tb("Now the docs")), msg("system", tb("env"))}, 2},
		{"none", []any{msg("user", tb("<system-reminder>x</system-reminder>"))}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := mustJSON(t, map[string]any{"messages": tc.msgs})
			b, err := ParseBody(raw, "")
			if err != nil {
				t.Fatal(err)
			}
			if b.TurnOpener != tc.want {
				t.Errorf("TurnOpener = %d, want %d", b.TurnOpener, tc.want)
			}
			c := NewBodyCache(0)
			for range 2 { // whole, then resumed from the first
				cb, err := c.Parse("k", raw, "")
				if err != nil || cb.TurnOpener != tc.want {
					t.Errorf("BodyCache: TurnOpener %d (%v), want %d", cb.TurnOpener, err, tc.want)
				}
			}
		})
	}
}
