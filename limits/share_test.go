package limits_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/limits"
)

var t0 = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func trace(b byte) instrument.TraceID { return instrument.TraceID{15: b} }

// answer is a chat span of session s in turn tr, from start to end (seconds after t0), whose
// headers reported the 5h window at util (resetting at reset), and which cost usd.
func answer(s string, tr byte, start, end, util float64, reset time.Time, usd float64) *instrument.Span {
	h := http.Header{
		"Anthropic-Ratelimit-Unified-Status":               {"allowed"},
		"Anthropic-Ratelimit-Unified-Representative-Claim": {"five_hour"},
		"Anthropic-Ratelimit-Unified-5h-Utilization":       {strconv.FormatFloat(util, 'f', -1, 64)},
		"Anthropic-Ratelimit-Unified-5h-Reset":             {strconv.FormatInt(reset.Unix(), 10)},
		"Anthropic-Ratelimit-Unified-5h-Status":            {"allowed"},
	}
	return &instrument.Span{
		TraceID: trace(tr), ID: instrument.SpanID{7: byte(start)}, Kind: instrument.KindChat,
		Start: at(start), End: at(end), SessionID: s,
		Chat: &instrument.Chat{
			Request: wire.Request{Identity: wire.Identity{Account: account}},
			Response: &wire.Response{
				Status: 200, HeaderTime: at(start + 0.1), End: at(end),
				RateLimit: wire.ParseRateLimit(h),
				Message:   &wire.MessageInfo{StopReason: "end_turn", Usage: wire.Usage{InputTokens: 100, OutputTokens: 10}},
			},
			Priced: usd > 0, Cost: usd,
		},
	}
}

func turnEnd(tr byte, end float64) *instrument.Span {
	return &instrument.Span{TraceID: trace(tr), Kind: instrument.KindTurn, End: at(end), Turn: &instrument.Turn{}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestApportioning follows one account's 5h window through two sessions that overlap: each
// rise of the window goes to the requests that ended since the reading before it, by cost.
func TestApportioning(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	sink, err := limits.New(reg, nil, limits.WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	reset := t0.Add(3 * time.Hour)
	for _, sp := range []*instrument.Span{
		answer("a", 1, 0, 10, 0.40, reset, 0.30),  // baseline; a's request costs 0.30
		answer("b", 2, 5, 12, 0.40, reset, 0.10),  // read before a's request ended: no growth yet
		answer("a", 1, 20, 30, 0.44, reset, 0.20), // +0.04 for a (0.03) and b (0.01)
		turnEnd(1, 31),
		answer("b", 2, 40, 45, 0.46, reset, 0.05), // +0.02, all a's
		answer("b", 2, 50, 52, 0.50, reset, 0.05), // +0.04, all b's
		answer("c", 3, 60, 61, 0.55, reset, 0),    // +0.05, b's; c's answer was not priced
		answer("c", 3, 70, 71, 0.55, reset, 0),    // nothing new
		answer("c", 3, 80, 81, 0.57, reset, 0),    // +0.02: c's two answers, by tokens
	} {
		sink.SpanEnded(sp)
	}
	sums := map[string]float64{}
	for _, s := range rec.shares {
		if s.Window != "5h" || s.Account != account {
			t.Errorf("share %+v", s)
		}
		sums[s.SessionID] += s.Growth
	}
	for session, want := range map[string]float64{"a": 0.03 + 0.02, "b": 0.01 + 0.04 + 0.05, "c": 0.02} {
		if !near(sums[session], want) {
			t.Errorf("session %s's share %v, want %v", session, sums[session], want)
		}
	}
	w, ok := sink.Session("b")
	if !ok || w.Name != "5h" || !near(w.Utilization, 0.57) || !w.Reset.Equal(reset) || w.Status != "allowed" || !near(w.Share, 0.10) {
		t.Errorf("Session(b) = %+v, %v", w, ok)
	}
	if _, ok := sink.Session("nobody"); ok {
		t.Error("a session never seen has a window")
	}
	// Turn 1 ended at 31 and the reading at 40 settled it: a's share of the rises at 20 and 40,
	// 0.03 + 0.02.
	const wantHist = `
# HELP cctrace_ratelimit_turn_share Each finished turn's share of a subscription window's growth (1 is the whole window), by window; the exemplars are the turns' trace ids.
# TYPE cctrace_ratelimit_turn_share histogram
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.0001"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.0005"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.001"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.0025"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.005"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.01"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.025"} 0
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.05"} 1
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.1"} 1
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.25"} 1
cctrace_ratelimit_turn_share_bucket{window="5h",le="0.5"} 1
cctrace_ratelimit_turn_share_bucket{window="5h",le="1"} 1
cctrace_ratelimit_turn_share_bucket{window="5h",le="+Inf"} 1
cctrace_ratelimit_turn_share_sum{window="5h"} 0.05
cctrace_ratelimit_turn_share_count{window="5h"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantHist), "cctrace_ratelimit_turn_share"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(growth(t, reg, "true")); !near(got, 0.17) {
		t.Errorf("attributed growth %v, want 0.17", got)
	}
}

func growth(t *testing.T, reg *prometheus.Registry, attributed string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	for _, mf := range mfs {
		if mf.GetName() != "cctrace_ratelimit_growth_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "attributed" && l.GetValue() == attributed {
					g.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return g
}

// A window that starts over counts all of its new utilization; growth while no request of
// cctrace's ended came from elsewhere.
func TestResetAndElsewhere(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	sink, err := limits.New(reg, nil, limits.WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	first, next := t0.Add(time.Hour), t0.Add(6*time.Hour)
	sink.SpanEnded(answer("a", 1, 0, 1, 0.90, first, 0.1))
	sink.SpanEnded(answer("a", 1, 2, 3, 0.05, next, 0.1)) // started over: 0.05 is a's
	if len(rec.shares) != 1 || !near(rec.shares[0].Growth, 0.05) {
		t.Errorf("shares after a reset: %+v", rec.shares)
	}
	// A reading in the same window whose rise came while nothing of cctrace's ended.
	sink.SpanEnded(answer("a", 1, 2.5, 2.6, 0.05, next, 0)) // no new request ended before 2.6
	sink.SpanEnded(answer("a", 1, 2.55, 2.7, 0.09, next, 0))
	if got := testutil.ToFloat64(growth(t, reg, "false")); !near(got, 0.04) {
		t.Errorf("growth from elsewhere %v, want 0.04", got)
	}
	if len(rec.readings) == 0 || rec.readings[0].Window != "5h" || rec.readings[0].Account != account {
		t.Errorf("readings %+v", rec.readings)
	}
}
