package instrument

// Joining the client's traces (WithJoinClientTrace): a turn goes into the trace that Claude
// Code's own tracing propagated with its first request, and chat spans run under the client's
// span that sent them.

// underClient makes a chat span just placed in a trace a child of the client's span that sent
// its request, when that request's traceparent is in the same trace and the tracker joins the
// client's traces. Its link would name its parent again: it goes.
func (t *Tracker) underClient(s *Span) {
	if l := s.Link; t.cfg.joinClient && l != nil && l.TraceID == s.TraceID {
		s.Parent, s.ClientParent, s.Link = l.SpanID, true, nil
	}
}
