package instrument

import (
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Claude Code writes some user-role texts itself. Each kind is recognised by how its text
// begins, as Claude Code 2.1.328 writes it (docs/wire.md, "Texts no person typed"); a later
// version may word them differently, and the tracker's rules do not depend on the words alone:
// a request that follows an answer cut before it stopped goes on with that turn whatever it
// says (see startConversational).
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
	{interruptMarker, SyntheticInterrupt},
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
	{compactionPrompt, SyntheticCompaction},
}

// syntheticKind returns the kind of Claude Code's own text that m, the newest user message of
// a request of body b, carries; "" for human text and for anything else. m.Text is the
// message's first text that is not a system reminder.
func syntheticKind(b *wire.Body, m *wire.Message) Synthetic {
	if m == nil || m.Role != wire.RoleUser {
		return ""
	}
	if b.TaskNotification {
		return SyntheticTaskNotification
	}
	text := strings.TrimSpace(m.Text)
	for _, p := range syntheticPrefixes {
		if strings.HasPrefix(text, p.prefix) {
			return p.kind
		}
	}
	return ""
}
