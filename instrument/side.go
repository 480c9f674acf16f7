package instrument

import (
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Side requests: titles, count_tokens and anything else that is not part of a conversation
// ride inside the open turn, or wait a moment for the next one.

// startSide places a side request (title, count_tokens, anything not part of a conversation) in
// the open turn, or holds it for the next turn for a short while.
func (t *Tracker) startSide(ex *exchange) {
	if ex.span.Chat.Kind == RequestOther && ex.span.Chat.Request.Endpoint == wire.EndpointMessages {
		ex.span.Chat.Kind = RequestAuxiliary
	}
	if tr := ex.sess.turn; tr != nil {
		t.startChild(ex, tr.span, tr)
		return
	}
	ex.orphan = true
	ex.sess.orphans = append(ex.sess.orphans, ex)
}

// startChild starts ex's chat span under parent, counting into tr.
func (t *Tracker) startChild(ex *exchange, parent *Span, tr *turn) {
	ex.turn = tr
	ex.span.TraceID, ex.span.Parent, ex.span.ID = parent.TraceID, parent.ID, t.spanID()
	t.underClient(ex.span)
	ex.span.TurnIndex, ex.span.TurnTotals = parent.TurnIndex, turnTotals(tr)
	t.sink.SpanStarted(ex.span)
}

// flushOrphans emits side requests that waited for a turn in vain as traces of their own: all
// of them when force is set, else those older than the adoption window.
func (t *Tracker) flushOrphans(sess *session, now time.Time, force bool) {
	kept := sess.orphans[:0]
	for _, o := range sess.orphans {
		if !force && now.Sub(o.since) <= t.cfg.adoptWindow {
			kept = append(kept, o)
			continue
		}
		o.orphan = false
		o.span.TraceID, o.span.ID = t.traceID(), t.spanID()
		t.emitLate(o)
	}
	for i := len(kept); i < len(sess.orphans); i++ {
		sess.orphans[i] = nil
	}
	sess.orphans = kept
}

// emitLate starts the span of a side request that waited for a turn, and ends it too when its
// response has already ended.
func (t *Tracker) emitLate(o *exchange) {
	end := o.span.End
	o.span.End = time.Time{}
	t.sink.SpanStarted(o.span)
	if o.done {
		o.span.End = end
		t.sink.SpanEnded(o.span)
	}
}
