package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestControl(t *testing.T) {
	c1 := Cell{BodySize: 10 << 10, Concurrency: 1, Duration: time.Second}
	c16 := Cell{BodySize: 10 << 10, Concurrency: 16, Duration: time.Second}
	paced := Cell{BodySize: 200 << 10, Concurrency: 1, Pace: 5 * time.Millisecond}
	sum := func(variant string, cell Cell, ttfb50, ttfb99, cpu, event99 float64) Summary {
		return Summary{Variant: variant, Cell: cell, Figures: Figures{TTFB50: ttfb50, TTFB99: ttfb99, CPUPerReq: cpu, Event99: event99}}
	}
	sums := []Summary{
		sum("bare", c1, 1.0, 4.0, 2.0, 0),
		sum("bare-control", c1, 0.9, 5.0, 2.2, 0),
		sum("cctrace", c1, 3.0, 9.0, 9.0, 0), // not the control: ignored
		sum("bare", c16, 2.0, 8.0, 1.0, 0),
		sum("bare-control", c16, 2.5, 8.0, 0.0, 0), // no CPU figure: left out
		sum("bare", paced, 1.0, 1.0, 1.0, 0.5),
		sum("bare-control", paced, 1.2, 1.0, 1.0, 0.25),
	}
	got, ok := Control(sums, "bare-control", "bare")
	want := ControlRanges{
		TTFB50: "0.90–1.25×", TTFB99: "1.00–1.25×", CPUPerReq: "1.10×",
		PacedTTFB50: "1.20×", PacedEvent99: "0.50×",
	}
	if !ok || got != want {
		t.Errorf("Control = %+v, %v; want %+v, true", got, ok, want)
	}

	if got, ok := Control(sums[:1], "bare-control", "bare"); ok {
		t.Errorf("Control without a control variant = %+v, true; want false", got)
	}
	got, ok = Control(sums[5:], "bare-control", "bare")
	if !ok || got.TTFB50 != "–" || got.PacedTTFB50 != "1.20×" {
		t.Errorf("Control of paced cells only = %+v, %v; want unpaced ranges \"–\"", got, ok)
	}
}

func TestMedianRank(t *testing.T) {
	// The 95 % ranks for the median from binomial tables (e.g. Conover, Practical
	// Nonparametric Statistics): none below 6 samples.
	for n, want := range map[int]int{1: 0, 5: 0, 6: 1, 8: 1, 9: 2, 20: 6, 50: 18, 100: 40} {
		if got := medianRank(n); got != want {
			t.Errorf("medianRank(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestPairedRatios(t *testing.T) {
	cell := Cell{BodySize: 10 << 10, Concurrency: 1, Duration: time.Second}
	other := Cell{BodySize: 1 << 20, Concurrency: 1, Duration: time.Second}
	ttfb := func(d time.Duration) Result { return Result{Requests: 1, TTFB: []time.Duration{d}} }
	var samples []Sample
	for rep := range 8 {
		// bare's own TTFB moves from repetition to repetition; the variant's is 1.1 to 1.8
		// times it in the same repetition, whatever bare's was.
		b := time.Duration(rep+1) * time.Millisecond
		samples = append(samples,
			Sample{Rep: rep, Variant: "bare", Cell: cell, Result: ttfb(b)},
			Sample{Rep: rep, Variant: "cctrace", Cell: cell, Result: ttfb(b * time.Duration(11+rep) / 10)},
		)
	}
	// A repetition without bare counts for nothing; a cell with few repetitions has no interval.
	samples = append(samples,
		Sample{Rep: 9, Variant: "cctrace", Cell: cell, Result: ttfb(time.Hour)},
		Sample{Rep: 0, Variant: "bare", Cell: other, Result: ttfb(2 * time.Millisecond)},
		Sample{Rep: 0, Variant: "cctrace", Cell: other, Result: ttfb(3 * time.Millisecond)},
	)
	got := PairedRatios(samples, "bare", func(r Result) []time.Duration { return r.TTFB })
	if len(got) != 2 {
		t.Fatalf("PairedRatios = %+v, want one per cell", got)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if r := got[0]; r.Cell != cell || r.Variant != "cctrace" || r.Reps != 8 || !near(r.Median, 1.45) || !near(r.Lo, 1.1) || !near(r.Hi, 1.8) {
		t.Errorf("10 KB cell: %+v, want 8 reps, median 1.45 in 1.1–1.8", r)
	}
	if r := got[1]; r.Reps != 1 || !near(r.Median, 1.5) || r.Lo != 0 || r.Hi != 0 {
		t.Errorf("1 MB cell: %+v, want 1 rep, median 1.5, no interval", r)
	}

	var table strings.Builder
	WritePairedRatios(&table, got, "TTFB", "bare")
	for _, want := range []string{"| cell, TTFB p50 ×bare | cctrace |", "| 10KB c1 unpaced | 1.45× (1.10–1.80) |", "| 1MB c1 unpaced | 1.50× (n = 1) |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestWriteAgainstBase(t *testing.T) {
	c1 := Cell{BodySize: 200 << 10, Concurrency: 1, Duration: time.Second}
	paced := Cell{BodySize: 200 << 10, Concurrency: 1, Pace: 5 * time.Millisecond}
	sum := func(variant string, cell Cell, ttfb50, ttfb99, total50 float64) Summary {
		return Summary{Variant: variant, Cell: cell, Figures: Figures{TTFB50: ttfb50, TTFB99: ttfb99, Total50: total50}}
	}
	var out strings.Builder
	WriteAgainstBase(&out, []Summary{
		sum("bare", c1, 1.0, 4.0, 1.5),
		sum("cctrace", c1, 1.2, 5.0, 1.9),
		sum("cctrace-base", c1, 1.1, 6.0, 1.4),
		sum("bare", paced, 1.0, 1.0, 1.0), // paced cells have no guard here: left out
		sum("cctrace", paced, 9.0, 9.0, 9.0),
	}, "cctrace", "cctrace-base", "bare")
	want := "| 200KB c1 unpaced | 1.20× | 1.10× | 1.25× | 1.50× | +0.400 | -0.100 |\n"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "paced 5ms") {
		t.Errorf("table:\n%s\nwant the row %q and no paced row", out.String(), want)
	}
}
