package instrument

// Sinks hands every call to each of its sinks, in order. The zero value drops everything.
type Sinks []Sink

var _ Sink = Sinks(nil)

// SpanStarted implements Sink.
func (ss Sinks) SpanStarted(s *Span) {
	for _, k := range ss {
		k.SpanStarted(s)
	}
}

// SpanEnded implements Sink.
func (ss Sinks) SpanEnded(s *Span) {
	for _, k := range ss {
		k.SpanEnded(s)
	}
}

// SessionsActive implements Sink.
func (ss Sinks) SessionsActive(n int) {
	for _, k := range ss {
		k.SessionsActive(n)
	}
}
