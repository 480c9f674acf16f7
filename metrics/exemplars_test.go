package metrics

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// exemplarTrace returns the trace_id label of an exemplar, "" without one.
func exemplarTrace(ex *dto.Exemplar) string {
	for _, lp := range ex.GetLabel() {
		if lp.GetName() == "trace_id" {
			return lp.GetValue()
		}
	}
	return ""
}

// TestExemplarInterval checks that a series (a counter, or one bucket of a histogram) takes a
// new exemplar at most once per interval, that other series and buckets are not held back by it,
// and that every observation is still counted.
func TestExemplarInterval(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func(cfg *config) { cfg.now = func() time.Time { return now } }
	m, reg := newMetrics(t, WithExemplarInterval(time.Second), clock)

	steps := []struct {
		advance time.Duration
		trace   byte
		tool    string
		ms      int // the tool call's duration
	}{
		{0, 1, "Read", 5},                      // Read's first: exemplar 1, bucket le=0.01
		{500 * time.Millisecond, 2, "Read", 6}, // within the interval, same bucket: still 1
		{0, 3, "Read", 70},                     // another bucket (le=0.1) of Read's histogram: 3
		{0, 4, "Grep", 5},                      // another series: 4
		{600 * time.Millisecond, 5, "Read", 7}, // 1.1 s after Read's first exemplar: 5
		{100 * time.Millisecond, 6, "Read", 8}, // within the new interval: still 5
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		feed(m, toolSpan(st.trace, st.tool, "success", 0, st.ms))
	}

	calls := map[string]string{}
	for _, mt := range gatherFamily(t, reg, nameToolCalls).GetMetric() {
		calls[mt.GetLabel()[1].GetValue()] = exemplarTrace(mt.GetCounter().GetExemplar())
		if mt.GetLabel()[1].GetValue() == "Read" && mt.GetCounter().GetValue() != 5 {
			t.Errorf("Read counted %v times, want 5", mt.GetCounter().GetValue())
		}
	}
	if want := traceID(5).String(); calls["Read"] != want {
		t.Errorf("Read calls exemplar %q, want %s (the first after the interval, not the last)", calls["Read"], want)
	}
	if want := traceID(4).String(); calls["Grep"] != want {
		t.Errorf("Grep calls exemplar %q, want %s", calls["Grep"], want)
	}

	buckets := map[float64]string{}
	for _, mt := range gatherFamily(t, reg, nameToolDuration).GetMetric() {
		if mt.GetLabel()[0].GetValue() != "Read" {
			continue
		}
		for _, b := range mt.GetHistogram().GetBucket() {
			if ex := b.GetExemplar(); ex != nil {
				buckets[b.GetUpperBound()] = exemplarTrace(ex)
			}
		}
		if n := mt.GetHistogram().GetSampleCount(); n != 5 {
			t.Errorf("Read durations observed %d times, want 5", n)
		}
	}
	if want := traceID(5).String(); buckets[0.01] != want {
		t.Errorf("Read duration le=0.01 exemplar %q, want %s", buckets[0.01], want)
	}
	if want := traceID(3).String(); buckets[0.1] != want {
		t.Errorf("Read duration le=0.1 exemplar %q, want %s (its own bucket, not held back by le=0.01)", buckets[0.1], want)
	}
}
