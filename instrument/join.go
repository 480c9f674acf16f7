package instrument

// Joining the client's traces (WithJoinClientTrace): a turn goes into the trace that Claude
// Code's own tracing propagated with its first request, and chat spans run under the client's
// span that sent them.

// maxClientTraces is how many of the client's traces the tracker remembers having put a turn
// into: far more turns than a sink keeps (summary.Store holds 200).
const maxClientTraces = 1024

// clientTraces is a bounded set of the client's trace ids, forgetting the oldest first. The
// zero value is empty and ready to use.
type clientTraces struct {
	ids   map[TraceID]struct{}
	order []TraceID // in the order claimed, a ring once full
	next  int       // the oldest entry of a full ring
}

// claimClientTrace reports whether a new turn may go into the client's trace id, and claims it
// if so. A trace takes one turn, since sinks key turns by trace id: when several turns name the
// same client trace (sessions run under one TRACEPARENT, a Stop hook's feedback in the same
// interaction), the first goes into it and the later ones are traces of their own, linked.
func (t *Tracker) claimClientTrace(id TraceID) bool {
	j := &t.joined
	if _, taken := j.ids[id]; taken {
		return false
	}
	if j.ids == nil {
		j.ids = make(map[TraceID]struct{})
	}
	if len(j.order) < maxClientTraces {
		j.order = append(j.order, id)
	} else {
		delete(j.ids, j.order[j.next])
		j.order[j.next] = id
		j.next = (j.next + 1) % maxClientTraces
	}
	j.ids[id] = struct{}{}
	return true
}

// underClient makes a chat span just placed in a trace a child of the client's span that sent
// its request, when that request's traceparent is in the same trace and the tracker joins the
// client's traces. Its link would name its parent again: it goes.
func (t *Tracker) underClient(s *Span) {
	if l := s.Link; t.cfg.joinClient && l != nil && l.TraceID == s.TraceID {
		s.Parent, s.ClientParent, s.Link = l.SpanID, true, nil
	}
}
