package instrument

import (
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Compactions: the summary request is a span of the open turn (automatic) or a trace of its own
// (/compact); the first request after it carries what the compaction did.

const continuationPrefix = "This session is being continued from a previous conversation"

// outputJSONSchema is output_config.format.type of an answer in a JSON schema: Claude Code's
// session title asks for one.
const outputJSONSchema = "json_schema"

// pendingCompaction is what the tracker remembers between a compaction summary and the
// continuation request.
type pendingCompaction struct {
	messagesBefore int
	contextBefore  int
	midTurn        bool // it happened inside an open turn (an automatic compaction)
}

// startCompaction handles a compaction summary request: inside an open turn it is a span of that
// turn (an automatic compaction); otherwise it is a trace of its own (a /compact command).
func (t *Tracker) startCompaction(ex *exchange) {
	sess := ex.sess
	ex.chain = &sess.main
	body := ex.span.Chat.Request.Body
	ex.span.Chat.Synthetic = SyntheticCompaction
	t.closeTools(sess, body, ex.span.Start)
	t.countNewBlocks(ex.span.Chat, ex.chain, body)
	ex.chain.seen, ex.chain.lastHash, ex.chain.lastKind = true, ex.hash, RequestCompaction
	ex.chain.messages, ex.chain.first = len(body.Messages), body.FirstHumanTextHash
	if tr := sess.turn; tr != nil && !tr.compactionOnly {
		t.joinTurn(ex, tr, ex.span.Start)
		return
	}
	tr := t.startTurn(sess, ex.span.Start, ex)
	tr.compactionOnly = true
	tr.span.Turn.Compaction = "manual"
	tr.span.Turn.Trigger = TriggerCompaction
	t.startChild(ex, tr.span, tr)
}

// compactionFor recognises the first request after a compaction: its first human text is the
// continuation summary, and either a summary was just produced, or the chain is new (a resumed
// session), or the history shrank. Later requests repeat the same first message with a growing
// history, so they do not match.
func (t *Tracker) compactionFor(sess *session, ch *chain, body *wire.Body, retry bool) *pendingCompaction {
	if retry || ch.sub != nil || !strings.HasPrefix(body.FirstHumanText, continuationPrefix) {
		return nil
	}
	if c := sess.compacting; c != nil {
		sess.compacting = nil
		return c
	}
	if !ch.seen || len(body.Messages) < ch.messages {
		return &pendingCompaction{messagesBefore: ch.messages, contextBefore: ch.context}
	}
	return nil
}

func isCompactionSummary(b *wire.Body) bool {
	last := lastConversational(b)
	return last != nil && last.Role == wire.RoleUser && last.Synthetic == wire.SyntheticCompaction
}
