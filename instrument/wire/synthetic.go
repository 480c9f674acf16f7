package wire

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// Synthetic names a kind of user-role text that Claude Code writes itself rather than a person
// typing it (docs/wire.md, "Texts no person typed", lists each with its text). The zero value
// is human text, or none.
type Synthetic string

// Kinds of synthetic user text that open or continue a turn.
const (
	// SyntheticCutOff asks the model to resume an answer whose stream was cut mid-way ("Your
	// response above was cut off mid-stream.").
	SyntheticCutOff Synthetic = "cut_off"
	// SyntheticOutputLimit asks the model to go on after an answer ran out of output tokens
	// ("Output token limit hit.").
	SyntheticOutputLimit Synthetic = "output_limit"
	// SyntheticHookFeedback carries what a Stop (or TeammateIdle, TaskCreated, TaskCompleted)
	// hook said when it blocked the end of a turn ("Stop hook feedback:").
	SyntheticHookFeedback Synthetic = "hook_feedback"
	// SyntheticTaskNotification reports that a background task, such as a background subagent,
	// finished (<task-notification>).
	SyntheticTaskNotification Synthetic = "task_notification"
	// SyntheticInterrupt says the user interrupted the turn ("[Request interrupted by user");
	// what the user typed next comes with it, so it always starts a new turn.
	SyntheticInterrupt Synthetic = "interrupt"
	// SyntheticCorrection asks the model to redo an answer Claude Code could not use: a
	// malformed tool call, no visible output, a turn-ending call beside a failed one, a missing
	// StructuredOutput or SendUserMessage call, links it did not send.
	SyntheticCorrection Synthetic = "correction"
	// SyntheticSafetyStop says a safety classifier stopped the answer.
	SyntheticSafetyStop Synthetic = "safety_stop"
	// SyntheticScheduled is a prompt the user configured to fire on a schedule.
	SyntheticScheduled Synthetic = "scheduled"
	// SyntheticCompaction asks for the summary of a compaction ("CRITICAL: Respond with TEXT
	// ONLY").
	SyntheticCompaction Synthetic = "compaction"
)

// Claude Code writes some user-role texts itself. Each kind is recognised by how its text
// begins, as Claude Code 2.1.328 writes it; a later version may word them differently, and the
// tracker's rules do not depend on the words alone (a request that follows an answer cut before
// it stopped goes on with that turn whatever it says).
var syntheticPrefixes = []struct {
	prefix string
	kind   Synthetic
}{
	{"Your response above was cut off mid-stream", SyntheticCutOff},
	{"Output token limit hit", SyntheticOutputLimit},
	{"Your response was cut off because it exceeded the output token limit", SyntheticOutputLimit},
	{"[Your previous response reached the output limit", SyntheticOutputLimit},
	{"Stop hook feedback:", SyntheticHookFeedback},
	{"TeammateIdle hook feedback:", SyntheticHookFeedback},
	{"TaskCreated hook feedback:", SyntheticHookFeedback},
	{"TaskCompleted hook feedback:", SyntheticHookFeedback},
	{"[Request interrupted by user", SyntheticInterrupt},
	// A resumed session whose process stopped mid-turn: what the user types next comes with it.
	{"[Request interrupted: ", SyntheticInterrupt},
	{"The previous response failed to produce a valid tool call", SyntheticCorrection},
	{"Your tool call was malformed and could not be parsed", SyntheticCorrection},
	{"[Your previous response had no visible output", SyntheticCorrection},
	{"The turn did not end: a tool call in your last message asked to end it", SyntheticCorrection},
	{"The PermissionDenied hook indicated you may retry", SyntheticCorrection},
	{"[structured-output-enforce]", SyntheticCorrection},
	{"You ended the turn without calling SendUserMessage", SyntheticCorrection},
	{"[projects-reply-gate]", SyntheticCorrection},
	{"Linked in your reply but not sent:", SyntheticCorrection},
	{"[SCHEDULED TASK - AUTOMATED FIRING OF A CONFIGURED PROMPT]", SyntheticScheduled},
	{"Your response above was stopped by a safety classifier", SyntheticSafetyStop},
	{"CRITICAL: Respond with TEXT ONLY", SyntheticCompaction},
}

// syntheticWindow is how much of a text syntheticOf decodes: room for white space and the
// longest prefix.
const syntheticWindow = 160

// syntheticOf returns the kind of Claude Code's own text that a message whose first human text
// block is raw (still JSON-escaped) carries; taskNotification says a text block of the message
// carries a <task-notification>. A message with text a person typed is "", whatever else it
// carries.
func syntheticOf(raw []byte, taskNotification bool) Synthetic {
	if raw == nil {
		if taskNotification {
			return SyntheticTaskNotification
		}
		return ""
	}
	var buf [2 * syntheticWindow]byte
	head, _ := jsontext.AppendUnquote(buf[:0], raw[:min(len(raw), syntheticWindow)]) // a cut string decodes to its start
	return syntheticPrefix(head)
}

// SyntheticText returns the kind of Claude Code's own text that text, the first human text of
// a user message, is; "" for anything else.
func SyntheticText(text string) Synthetic { return syntheticPrefix([]byte(text)) }

// syntheticPrefix returns the kind whose prefix text begins with, after white space.
func syntheticPrefix(text []byte) Synthetic {
	text = bytes.TrimLeft(text, " \t\r\n")
	for _, p := range syntheticPrefixes {
		if bytes.HasPrefix(text, []byte(p.prefix)) {
			return p.kind
		}
	}
	return ""
}

// opensTurns reports whether a user message of kind k can be the one that opened its turn:
// every kind but the resumptions of an answer cut before it stopped.
func opensTurns(k Synthetic) bool { return k != SyntheticCutOff && k != SyntheticOutputLimit }

// syntheticKinds numbers the kinds for a BodyCache's compact past; 0 is "".
var syntheticKinds = [...]Synthetic{"", SyntheticCutOff, SyntheticOutputLimit, SyntheticHookFeedback,
	SyntheticTaskNotification, SyntheticInterrupt, SyntheticCorrection, SyntheticSafetyStop,
	SyntheticScheduled, SyntheticCompaction}
