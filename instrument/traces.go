package instrument

// maxTurnTraces is how many trace ids of turns the tracker remembers: far more turns than a sink
// such as summary.Store keeps, at a few dozen bytes each.
const maxTurnTraces = 8192

// traceSet is a bounded set of trace ids, forgetting the oldest first. The zero value is empty
// and ready to use. The tracker keeps the trace ids its turns went into in one: a trace takes one
// turn, since sinks key turns by trace id (/api/turns, the turns page).
type traceSet struct {
	ids   map[TraceID]uint64 // how many times each was asked for again (see again)
	order []TraceID          // in the order claimed, a ring once full
	next  int                // the oldest entry of a full ring
}

// claim adds id to the set, and reports whether it was not there yet.
func (s *traceSet) claim(id TraceID) bool {
	if _, taken := s.ids[id]; taken {
		return false
	}
	if s.ids == nil {
		s.ids = make(map[TraceID]uint64)
	}
	if len(s.order) < maxTurnTraces {
		s.order = append(s.order, id)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxTurnTraces
	}
	s.ids[id] = 0
	return true
}

// again counts one more turn that would have gone into id, which the set holds, and returns
// that count, from 1: a number to tell that turn's trace id from id's.
func (s *traceSet) again(id TraceID) uint64 {
	s.ids[id]++
	return s.ids[id]
}

// release takes id out of the set, so that a turn may go into it again. (Its place in the ring
// stays: claimed again, it may be forgotten before its turn.)
func (s *traceSet) release(id TraceID) { delete(s.ids, id) }
