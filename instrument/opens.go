package instrument

import (
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
)

// OpensTurn reports whether req, read on its own, carries a prompt a person typed and so starts a
// new turn of the main agent: its newest user or assistant message is a user message with human
// text that is not one of Claude Code's own texts (an interruption, which comes with what the
// user typed next, counts as human) and does not come with tool results. Subagents' requests,
// side requests without tools (titles), compaction summaries and continuations are no new turn.
//
// It is the tracker's rule without the tracker's state, for a decision that cannot wait for the
// tracker (refusing a request before it is forwarded): it cannot see that a request goes on with
// an answer cut short, so it errs towards "not a new turn" only where the text says so.
func OpensTurn(req *wire.Request) bool {
	b := req.Body
	if req.Endpoint != wire.EndpointMessages || b == nil {
		return false
	}
	if req.Headers.AgentID != "" || b.System.Subagent || b.Tools.Count == 0 || isCompactionSummary(b) {
		return false
	}
	last := lastConversational(b)
	if last == nil || last.Role != wire.RoleUser || !last.HumanText {
		return false
	}
	if strings.HasPrefix(strings.TrimSpace(last.Text), continuationPrefix) {
		return false
	}
	switch syntheticKind(last) {
	case SyntheticInterrupt:
		return true
	case "":
		return len(last.ToolResults) == 0
	}
	return false
}
