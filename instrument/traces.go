package instrument

// maxTurnTraces is how many trace ids of turns the tracker remembers: far more turns than a sink
// such as summary.Store keeps, at a few dozen bytes each.
const maxTurnTraces = 8192

// traceSet is a bounded set of trace ids, forgetting the oldest first. The zero value is empty
// and ready to use. The tracker keeps the trace ids its turns went into in one: a trace takes one
// turn, since sinks key turns by trace id (/api/turns, the turns page).
type traceSet struct {
	ids   map[TraceID]struct{}
	order []TraceID // in the order claimed, a ring once full
	next  int       // the oldest entry of a full ring
}

// claim adds id to the set, and reports whether it was not there yet.
func (s *traceSet) claim(id TraceID) bool {
	if _, taken := s.ids[id]; taken {
		return false
	}
	if s.ids == nil {
		s.ids = make(map[TraceID]struct{})
	}
	if len(s.order) < maxTurnTraces {
		s.order = append(s.order, id)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxTurnTraces
	}
	s.ids[id] = struct{}{}
	return true
}

// release takes id out of the set, so that a turn may go into it again. (Its place in the ring
// stays: claimed again, it may be forgotten before its turn.)
func (s *traceSet) release(id TraceID) { delete(s.ids, id) }
