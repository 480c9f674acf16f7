package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// Plan is one benchmark run: every cell against every variant, Reps times, interleaved.
type Plan struct {
	Reps     int
	Cells    []Cell
	Variants []*Variant
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
}

// Sample is one run of one cell against one variant.
type Sample struct {
	Rep     int
	Variant string
	Cell    Cell
	Result
	// CPU is the user+system CPU the variant's processes used during the run; zero for
	// variants without a process of their own.
	CPU time.Duration
	// PeakRSS is the largest resident size of the variant's processes sampled every 50 ms during
	// the run; zero without a process.
	PeakRSS int64
	// Load is the 1-minute load average when the run started.
	Load float64
	// WarmUp is how many requests were sent to the variant just before the run, unmeasured.
	WarmUp int
	// Tracked is, for a cctrace variant (Variant.Metrics set), the chat spans it ended from the
	// start of the run until it had tracked every request of the run, or CellTrackWait after;
	// TrackErr says when its metrics could not be read. Zero for the other variants.
	Tracked  Tracked
	TrackErr error
}

// Execute runs plan against up with bodies grown from rec. For each repetition and cell it runs
// the variants one after another, rotating their order by one each repetition so that no variant
// always follows the same one; each run is preceded by one unmeasured request per client to open
// connections. It stops early when ctx ends.
func Execute(ctx context.Context, up *Upstream, rec *traffic.Recording, plan Plan) []Sample {
	logf := plan.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	maxConns := 1
	for _, c := range plan.Cells {
		maxConns = max(maxConns, c.Concurrency)
	}
	var ids atomic.Uint64
	bodies := map[int][]byte{}
	clients := map[string]*Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	client := func(v *Variant, size int) *Client {
		key := fmt.Sprintf("%s/%d", v.Name, size)
		if c, ok := clients[key]; ok {
			return c
		}
		if bodies[size] == nil {
			bodies[size] = rec.Body(size)
		}
		c := NewClient(up, bodies[size], maxConns, &ids)
		clients[key] = c
		return c
	}

	var samples []Sample
	for rep := range plan.Reps {
		for _, cell := range plan.Cells {
			for i := range plan.Variants {
				if ctx.Err() != nil {
					return samples
				}
				v := plan.Variants[(i+rep)%len(plan.Variants)]
				c := client(v, cell.BodySize)
				warm := Cell{BodySize: cell.BodySize, Concurrency: cell.Concurrency, MaxRequests: cell.Concurrency}
				w := c.Run(ctx, v.URL, warm)
				if w.Failed > 0 {
					logf("%s %s warm-up: %d failed: %s", v.Name, cell.Name(), w.Failed, w.Failures[0])
				}
				s := runSampled(ctx, c, v, cell, Sent(samples, v.Name)+int64(w.Requests+w.Failed))
				s.Rep, s.WarmUp = rep, w.Requests+w.Failed
				samples = append(samples, s)
				logf("rep %d %-22s %-14s %5d req %4d failed  ttfb p50 %7.3fms  total p50 %8.3fms  cpu %v",
					rep+1, cell.Name(), v.Name, s.Requests, s.Failed,
					ms(Percentile(s.TTFB, 50)), ms(Percentile(s.Total, 50)), s.CPU)
				for _, f := range s.Failures {
					logf("  failure: %s", f)
				}
			}
		}
	}
	return samples
}

// Sent is how many requests samples sent to variant, their warm-ups included.
func Sent(samples []Sample, variant string) int64 {
	var n int64
	for _, s := range samples {
		if s.Variant == variant {
			n += int64(s.WarmUp + s.Requests + s.Failed)
		}
	}
	return n
}

// runSampled runs cell against v while reading the variant's CPU before and after and sampling
// its resident size. For a cctrace variant, sent is how many requests it was sent before the
// run: the run starts once cctrace has tracked them all (so the warm-up's work is not measured;
// at most CellTrackWait), its CPU is read settleTime after the last stream (this run's decoding
// and tracking is measured), and Tracked is what it tracked from the start of the run until it
// had tracked the run's requests too (at most CellTrackWait).
func runSampled(ctx context.Context, c *Client, v *Variant, cell Cell, sent int64) Sample {
	s := Sample{Variant: v.Name, Cell: cell, Load: loadAverage()}
	var before Tracked
	if v.Metrics != "" {
		before, _, s.TrackErr = WaitTracked(ctx, v.Metrics, sent, CellTrackWait)
	}
	pids := v.PIDs()
	cpu0, _ := ReadCPU(pids)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if len(pids) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				if m, err := ReadMemory(pids); err == nil {
					s.PeakRSS = max(s.PeakRSS, m.RSS)
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	s.Result = c.Run(ctx, v.URL, cell)
	if v.Metrics != "" {
		// The pipeline decodes and tracks what the run's last exchanges left; give it that
		// time inside the measurement, and keep the scrapes below (each a few ms of cctrace's
		// CPU) out of it.
		select {
		case <-ctx.Done():
		case <-time.After(settleTime):
		}
	}
	close(stop)
	wg.Wait()
	if len(pids) > 0 {
		cpu1, _ := ReadCPU(pids)
		s.CPU = cpu1 - cpu0
	}
	if v.Metrics != "" && s.TrackErr == nil {
		after, _, err := WaitTracked(ctx, v.Metrics, sent+int64(s.Requests+s.Failed), CellTrackWait)
		s.Tracked = Tracked{Requests: after.Requests - before.Requests, NotDecoded: after.NotDecoded - before.NotDecoded}
		s.TrackErr = err
	}
	return s
}

// settleTime is how long a cctrace variant's run is measured past its last stream: long enough
// for cctrace's pipeline to decode and track the last exchanges.
const settleTime = 50 * time.Millisecond

// loadAverage returns the 1-minute load average, 0 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(strings.TrimSpace(string(b)), "%f", &l)
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
