package bench

import (
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
