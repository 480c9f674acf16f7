package instrument

import "testing"

// TestTraceSetForgetsOldest checks the bound on the turns' trace ids the tracker remembers.
func TestTraceSetForgetsOldest(t *testing.T) {
	var s traceSet
	id := func(i int) TraceID { return TraceID{byte(i >> 8), byte(i), 1} }
	for i := range maxTurnTraces + 10 {
		if !s.claim(id(i)) {
			t.Fatalf("trace %d refused the first time", i)
		}
	}
	if s.claim(id(maxTurnTraces + 5)) {
		t.Error("a trace claimed twice")
	}
	if !s.claim(id(3)) {
		t.Error("an old trace is still remembered past the bound")
	}
	if n := len(s.ids); n != maxTurnTraces {
		t.Errorf("%d traces remembered, want %d", n, maxTurnTraces)
	}
	s.release(id(maxTurnTraces + 5))
	if !s.claim(id(maxTurnTraces + 5)) {
		t.Error("a released trace refused")
	}
}

// TestTraceSetCountsAgain: again numbers the turns that would have gone into a trace id already
// taken, so a trace id for each is one hash away, however many came before.
func TestTraceSetCountsAgain(t *testing.T) {
	var s traceSet
	id := TraceID{1}
	s.claim(id)
	for want := uint64(1); want <= 3; want++ {
		if got := s.again(id); got != want {
			t.Fatalf("again = %d, want %d", got, want)
		}
	}
}
