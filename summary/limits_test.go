package summary

import (
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/limits"
)

func TestStatusLimit(t *testing.T) {
	reset := t0.Add(3 * time.Hour)
	s := New(WithLimits(func(id string) (limits.Window, bool) {
		if id != "sess-limited" {
			return limits.Window{}, false
		}
		return limits.Window{Name: "5h", Utilization: 0.42, Reset: reset, Share: 0.01}, true
	}))
	for _, id := range []string{"sess-limited", "sess-key"} {
		b := newSpans(1, id)
		turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
		s.SpanStarted(turn)
	}
	st, ok := s.Status("sess-limited", Scope{})
	if !ok || st.Limit == nil || st.Limit.Name != "5h" || st.Limit.Utilization != 0.42 || !st.Limit.Reset.Equal(reset) {
		t.Errorf("status %+v %v, want the 5h window", st.Limit, ok)
	}
	if st, ok := s.Status("sess-key", Scope{}); !ok || st.Limit != nil {
		t.Errorf("an account without windows: %+v", st.Limit)
	}
}
