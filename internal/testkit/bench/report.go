package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Percentile returns the p-th percentile (nearest rank) of ds, 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Figures are one run's numbers.
type Figures struct {
	TTFB50, TTFB99     float64 // ms
	Outbound50, Back50 float64 // ms; see Result
	Total50            float64 // ms
	Event50, Event99   float64 // ms; paced cells only
	EventMax           float64 // ms
	RPS                float64
	CPUPerReq          float64 // ms; 0 without a process
	PeakRSS            float64 // MiB
	Requests, Failures int
}

func figuresOf(s Sample) Figures {
	f := Figures{
		TTFB50:     ms(Percentile(s.TTFB, 50)),
		TTFB99:     ms(Percentile(s.TTFB, 99)),
		Outbound50: ms(Percentile(s.Outbound, 50)),
		Back50:     ms(Percentile(s.Back, 50)),
		Total50:    ms(Percentile(s.Total, 50)),
		Event50:    ms(Percentile(s.EventDelay, 50)),
		Event99:    ms(Percentile(s.EventDelay, 99)),
		EventMax:   ms(Percentile(s.EventDelay, 100)),
		PeakRSS:    float64(s.PeakRSS) / (1 << 20),
		Requests:   s.Requests,
		Failures:   s.Failed,
	}
	if s.Elapsed > 0 {
		f.RPS = float64(s.Requests) / s.Elapsed.Seconds()
	}
	if s.Requests > 0 {
		f.CPUPerReq = ms(s.CPU) / float64(s.Requests)
	}
	return f
}

// Summary is the median over repetitions of one variant's figures in one cell, with the spread
// of its TTFB p50 over the repetitions.
type Summary struct {
	Variant string
	Cell    Cell
	Figures
	// Spread is (max-min)/median of TTFB p50 over the repetitions.
	Spread float64
	Reps   int
	// Tracked sums the repetitions' Sample.Tracked (cctrace variants only).
	Tracked Tracked
}

// cellVariant keys figures by cell and variant.
type cellVariant struct {
	cell    Cell
	variant string
}

// baselineOf returns the summaries of the baseline variant, by cell.
func baselineOf(sums []Summary, baseline string) map[Cell]Summary {
	base := map[Cell]Summary{}
	for _, s := range sums {
		if s.Variant == baseline {
			base[s.Cell] = s
		}
	}
	return base
}

// Summarise groups samples by cell and variant (in first-seen order) and takes medians.
func Summarise(samples []Sample) []Summary {
	var order []cellVariant
	groups := map[cellVariant][]Figures{}
	tracked := map[cellVariant]Tracked{}
	for _, s := range samples {
		k := cellVariant{s.Cell, s.Variant}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], figuresOf(s))
		t := tracked[k]
		t.Requests += s.Tracked.Requests
		t.NotDecoded += s.Tracked.NotDecoded
		tracked[k] = t
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		fs := groups[k]
		med := func(get func(Figures) float64) float64 {
			v := make([]float64, len(fs))
			for i, f := range fs {
				v[i] = get(f)
			}
			return median(v)
		}
		sum := Summary{Variant: k.variant, Cell: k.cell, Reps: len(fs), Tracked: tracked[k]}
		sum.TTFB50 = med(func(f Figures) float64 { return f.TTFB50 })
		sum.TTFB99 = med(func(f Figures) float64 { return f.TTFB99 })
		sum.Outbound50 = med(func(f Figures) float64 { return f.Outbound50 })
		sum.Back50 = med(func(f Figures) float64 { return f.Back50 })
		sum.Total50 = med(func(f Figures) float64 { return f.Total50 })
		sum.Event50 = med(func(f Figures) float64 { return f.Event50 })
		sum.Event99 = med(func(f Figures) float64 { return f.Event99 })
		sum.EventMax = med(func(f Figures) float64 { return f.EventMax })
		sum.RPS = med(func(f Figures) float64 { return f.RPS })
		sum.CPUPerReq = med(func(f Figures) float64 { return f.CPUPerReq })
		sum.PeakRSS = med(func(f Figures) float64 { return f.PeakRSS })
		lo, hi := fs[0].TTFB50, fs[0].TTFB50
		for _, f := range fs {
			lo, hi = min(lo, f.TTFB50), max(hi, f.TTFB50)
			sum.Requests += f.Requests
			sum.Failures += f.Failures
		}
		if sum.TTFB50 > 0 {
			sum.Spread = (hi - lo) / sum.TTFB50
		}
		out = append(out, sum)
	}
	return out
}

// ControlRanges are the ratios of a control variant, a second copy of the baseline, to the
// baseline over the cells, each as "lo–hi×" ("lo×" when they are one, "–" when there are none):
// how far two identical proxies measured apart in the run, so that a ratio of another variant
// inside them is not a difference.
type ControlRanges struct {
	TTFB50, TTFB99, CPUPerReq string // unpaced cells
	PacedTTFB50, PacedEvent99 string // paced cells
}

// Control returns the ranges of control's ratios to baseline, and false when sums have no cell
// with both.
func Control(sums []Summary, control, baseline string) (ControlRanges, bool) {
	base := baselineOf(sums, baseline)
	var ttfb50, ttfb99, cpu, pacedTTFB, pacedEvent []float64
	ratio := func(dst *[]float64, v, b float64) {
		if v > 0 && b > 0 {
			*dst = append(*dst, v/b)
		}
	}
	for _, s := range sums {
		b, ok := base[s.Cell]
		if s.Variant != control || !ok {
			continue
		}
		if s.Cell.Pace > 0 {
			ratio(&pacedTTFB, s.TTFB50, b.TTFB50)
			ratio(&pacedEvent, s.Event99, b.Event99)
		} else {
			ratio(&ttfb50, s.TTFB50, b.TTFB50)
			ratio(&ttfb99, s.TTFB99, b.TTFB99)
			ratio(&cpu, s.CPUPerReq, b.CPUPerReq)
		}
	}
	span := func(v []float64) string {
		if len(v) == 0 {
			return "–"
		}
		lo, hi := fmt.Sprintf("%.2f", slices.Min(v)), fmt.Sprintf("%.2f", slices.Max(v))
		if lo == hi {
			return lo + "×"
		}
		return lo + "–" + hi + "×"
	}
	c := ControlRanges{
		TTFB50: span(ttfb50), TTFB99: span(ttfb99), CPUPerReq: span(cpu),
		PacedTTFB50: span(pacedTTFB), PacedEvent99: span(pacedEvent),
	}
	return c, len(ttfb50)+len(pacedTTFB) > 0
}

// PairedRatio is the median over repetitions of one variant's p50 of a figure (TTFB, or one of
// its parts) divided by the baseline's in the same repetition and cell, with a 95 % interval for
// that median.
type PairedRatio struct {
	Cell    Cell
	Variant string
	Reps    int // repetitions with both figures
	Median  float64
	// Lo and Hi bound the median with at least 95 % confidence, from the order statistics of
	// the ratios (no assumption about their distribution); both 0 for fewer than 6
	// repetitions, where no such interval exists.
	Lo, Hi float64
}

// PairedRatios returns the PairedRatio of the p50 of figure (Result.TTFB, say) for every variant
// but baseline in every cell, in first-seen order. Repetitions vary independently of each other
// on a shared machine (two identical proxies measure apart), so a cell's ratio
// is only as good as the number of repetitions behind it; the interval says how good.
func PairedRatios(samples []Sample, baseline string, figure func(Result) []time.Duration) []PairedRatio {
	type repKey struct {
		cell Cell
		rep  int
	}
	base := map[repKey]float64{}
	for _, s := range samples {
		if s.Variant == baseline {
			base[repKey{s.Cell, s.Rep}] = ms(Percentile(figure(s.Result), 50))
		}
	}
	var order []cellVariant
	ratios := map[cellVariant][]float64{}
	for _, s := range samples {
		b := base[repKey{s.Cell, s.Rep}]
		v := ms(Percentile(figure(s.Result), 50))
		if s.Variant == baseline || b == 0 || v == 0 {
			continue
		}
		k := cellVariant{s.Cell, s.Variant}
		if _, ok := ratios[k]; !ok {
			order = append(order, k)
		}
		ratios[k] = append(ratios[k], v/b)
	}
	out := make([]PairedRatio, 0, len(order))
	for _, k := range order {
		r := ratios[k]
		slices.Sort(r)
		pr := PairedRatio{Cell: k.cell, Variant: k.variant, Reps: len(r), Median: median(r)}
		if j := medianRank(len(r)); j > 0 {
			pr.Lo, pr.Hi = r[j-1], r[len(r)-j]
		}
		out = append(out, pr)
	}
	return out
}

// medianRank returns the largest j such that the j-th smallest and the j-th largest of n
// samples bound their distribution's median with at least 95 % confidence: P(B < j) ≤ 2.5 %
// for B binomial with n trials of one half. It returns 0 when n is too small for any (n < 6).
func medianRank(n int) int {
	j, cdf := 0, 0.0 // cdf is P(B ≤ j-1) once j ≥ 1
	lc, _ := math.Lgamma(float64(n + 1))
	for i := 0; i < n; i++ {
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		cdf += math.Exp(lc - li - lr - float64(n)*math.Ln2) // P(B = i)
		if cdf > 0.025 {
			break
		}
		j = i + 1
	}
	return j
}

// WritePairedRatios writes PairedRatios of figure (a name, such as "TTFB") as a Markdown table,
// one row per cell and a column per variant, each "median× (lo–hi)", or "median× (n = reps)"
// where there is no interval.
func WritePairedRatios(w io.Writer, ratios []PairedRatio, figure, baseline string) {
	var cells []Cell
	var variants []string
	byKey := map[cellVariant]PairedRatio{}
	for _, r := range ratios {
		if !slices.Contains(cells, r.Cell) {
			cells = append(cells, r.Cell)
		}
		if !slices.Contains(variants, r.Variant) {
			variants = append(variants, r.Variant)
		}
		byKey[cellVariant{r.Cell, r.Variant}] = r
	}
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(w, "| cell, %s p50 ×%s | %s |\n", figure, baseline, strings.Join(variants, " | "))
	fmt.Fprintln(w, "|---"+strings.Repeat("|--:", len(variants))+"|")
	for _, c := range cells {
		fmt.Fprintf(w, "| %s |", c.Name())
		for _, v := range variants {
			r, ok := byKey[cellVariant{c, v}]
			switch {
			case !ok:
				fmt.Fprint(w, " – |")
			case r.Lo == 0:
				fmt.Fprintf(w, " %.2f× (n = %d) |", r.Median, r.Reps)
			default:
				fmt.Fprintf(w, " %.2f× (%.2f–%.2f) |", r.Median, r.Lo, r.Hi)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// notDecoded is the share of tracked requests whose bodies a cctrace variant did not decode,
// "–" for the other variants.
func notDecoded(t Tracked) string {
	if t.Requests == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(t.NotDecoded)/float64(t.Requests))
}

// ratioOf formats v/b as "1.23×", "–" when either is missing.
func ratioOf(v, b float64) string {
	if b == 0 || v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v/b)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteTables writes the summaries as Markdown: one table for unpaced cells (time to first byte,
// total time, throughput, CPU) and one for paced cells (per-event delay, memory in flight), each
// figure with its ratio to the baseline variant in the same cell.
func WriteTables(w io.Writer, sums []Summary, baseline string) {
	base := baselineOf(sums, baseline)
	num := func(v float64, format string) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	var unpaced, paced []Summary
	for _, s := range sums {
		if s.Cell.Pace > 0 {
			paced = append(paced, s)
		} else {
			unpaced = append(unpaced, s)
		}
	}
	if len(unpaced) > 0 {
		fmt.Fprintf(w, "| cell | variant | TTFB p50 ms | ×%[1]s | TTFB p99 ms | ×%[1]s | total p50 ms | ×%[1]s | req/s | ×%[1]s | CPU ms/req | ×%[1]s | spread | req (failed) | not decoded |\n", baseline)
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, s := range unpaced {
			b := base[s.Cell]
			fmt.Fprintf(w, "| %s | %s | %.3f | %s | %.3f | %s | %.2f | %s | %.0f | %s | %s | %s | ±%.0f%% | %d (%d) | %s |\n",
				s.Cell.Name(), s.Variant,
				s.TTFB50, ratioOf(s.TTFB50, b.TTFB50), s.TTFB99, ratioOf(s.TTFB99, b.TTFB99),
				s.Total50, ratioOf(s.Total50, b.Total50), s.RPS, ratioOf(s.RPS, b.RPS),
				num(s.CPUPerReq, "%.3f"), ratioOf(s.CPUPerReq, b.CPUPerReq), s.Spread*50, s.Requests, s.Failures,
				notDecoded(s.Tracked))
		}
		fmt.Fprintln(w)
	}
	if len(paced) > 0 {
		fmt.Fprintf(w, "| cell | variant | TTFB p50 ms | ×%[1]s | TTFB p99 ms | ×%[1]s | event delay p50 ms | p99 ms | max ms | total p50 ms | CPU ms/req | ×%[1]s | peak RSS MiB | req (failed) |\n", baseline)
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, s := range paced {
			b := base[s.Cell]
			fmt.Fprintf(w, "| %s | %s | %.3f | %s | %.3f | %s | %.3f | %.3f | %.3f | %.1f | %s | %s | %s | %d (%d) |\n",
				s.Cell.Name(), s.Variant,
				s.TTFB50, ratioOf(s.TTFB50, b.TTFB50), s.TTFB99, ratioOf(s.TTFB99, b.TTFB99),
				s.Event50, s.Event99, s.EventMax, s.Total50,
				num(s.CPUPerReq, "%.3f"), ratioOf(s.CPUPerReq, b.CPUPerReq), num(s.PeakRSS, "%.1f"), s.Requests, s.Failures)
		}
		fmt.Fprintln(w)
	}
}

// WriteLegs writes, as a Markdown table, the two parts of TTFB a proxy lies on (see
// Result.Outbound and Result.Back), with their ratios to the baseline variant in the same cell:
// which way through a proxy its added time to first byte is spent.
func WriteLegs(w io.Writer, sums []Summary, baseline string) {
	base := baselineOf(sums, baseline)
	fmt.Fprintf(w, "| cell | variant | TTFB p50 ms | outbound p50 ms | ×%[1]s | back p50 ms | ×%[1]s |\n", baseline)
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|")
	for _, s := range sums {
		b := base[s.Cell]
		fmt.Fprintf(w, "| %s | %s | %.3f | %.3f | %s | %.3f | %s |\n",
			s.Cell.Name(), s.Variant, s.TTFB50,
			s.Outbound50, ratioOf(s.Outbound50, b.Outbound50),
			s.Back50, ratioOf(s.Back50, b.Back50))
	}
	fmt.Fprintln(w)
}

// WriteAgainstBase writes, as a Markdown table with a row per unpaced cell, the figures the
// guards are judged by for variant and for base (the same program built at a base commit, run
// in the same repetitions), each against the baseline variant in the same cell: TTFB p50 and
// p99 as ratios, total time p50 (to the stream's last byte) as a difference. A change is judged
// by both pairs, measured under the same load.
func WriteAgainstBase(w io.Writer, sums []Summary, variant, base, baseline string) {
	bl := baselineOf(sums, baseline)
	of := map[cellVariant]Summary{}
	var cells []Cell
	for _, s := range sums {
		if s.Cell.Pace > 0 || (s.Variant != variant && s.Variant != base) {
			continue
		}
		if !slices.Contains(cells, s.Cell) {
			cells = append(cells, s.Cell)
		}
		of[cellVariant{s.Cell, s.Variant}] = s
	}
	if len(cells) == 0 {
		return
	}
	diff := func(v, b float64) string {
		if v == 0 || b == 0 {
			return "–"
		}
		return fmt.Sprintf("%+.3f", v-b)
	}
	fmt.Fprintf(w, "| cell | TTFB p50 %[1]s ×%[3]s | %[2]s ×%[3]s | TTFB p99 %[1]s ×%[3]s | %[2]s ×%[3]s | total p50 %[1]s − %[3]s ms | %[2]s − %[3]s ms |\n",
		variant, base, baseline)
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	for _, c := range cells {
		v, b, r := of[cellVariant{c, variant}], of[cellVariant{c, base}], bl[c]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Name(),
			ratioOf(v.TTFB50, r.TTFB50), ratioOf(b.TTFB50, r.TTFB50),
			ratioOf(v.TTFB99, r.TTFB99), ratioOf(b.TTFB99, r.TTFB99),
			diff(v.Total50, r.Total50), diff(b.Total50, r.Total50))
	}
	fmt.Fprintln(w)
}
