package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/bench"
	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// replicaConfig is the replica benchmark's part of the flags.
type replicaConfig struct {
	counts   []int // replica counts
	sessions []int // concurrent sessions per run
	think    time.Duration
	size     int
	duration time.Duration
}

// guard is the replica benchmark's bound on time to first byte at p99 against the same nginx in
// front of as many bare proxies (BENCHMARKS.md, "Replicas").
const guard = 1.05

// runReplicas runs the replica benchmark: for each replica count, the team gateway as deploy/
// ships it (nginx with deploy/nginx/cctrace.conf) in front of that many cctrace replicas, and the
// same nginx in front of as many bare proxies, each driven by every number of concurrent
// sessions in turn, both kinds interleaved. Each session is one client with its own session id,
// sending a request, reading its stream, pausing for think (as Claude Code does while a tool
// runs or the human reads), and so on.
func runReplicas(ctx context.Context, cfg config, rc replicaConfig, dir string, w io.Writer) error {
	rec, err := traffic.FindRecording()
	if err != nil {
		return err
	}
	site, err := bench.FindSite()
	if err != nil {
		return err
	}
	up, err := bench.StartUpstream(traffic.NewStream(cfg.events))
	if err != nil {
		return err
	}
	defer up.Close()
	collector, err := bench.StartCollector()
	if err != nil {
		return err
	}
	defer collector.Close()

	writeMachine(w, "before")
	fmt.Fprintf(w, "\nsessions of %d KB requests, each followed by a %v pause, %v per run, %d repetitions\n\n",
		rc.size>>10, rc.think, rc.duration, cfg.reps)
	fmt.Fprintln(w, "| replicas | sessions | proxy | req/s | TTFB p50 ms | TTFB p99 ms | p99 ×bare | replicas' CPU ms/req | req/s per core | replicas' RSS MiB | failed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	var ids atomic.Uint64
	var failed int
	for _, n := range rc.counts {
		gws, rest, err := startGateways(ctx, cfg, dir, site, up.URL(), collector.Endpoint(), n)
		if err != nil {
			return err
		}
		var held, largest *bench.ReplicaSample
		var heldRatio float64
		for _, sessions := range rc.sessions {
			cell := bench.Cell{BodySize: rc.size, Concurrency: sessions, Think: rc.think, Duration: rc.duration, MaxRequests: 1 << 30}
			by := map[string][]bench.ReplicaSample{}
			for rep := range cfg.reps {
				order := []string{"bare", "cctrace"}
				if rep%2 == 1 {
					order = []string{"cctrace", "bare"}
				}
				for _, kind := range order {
					if ctx.Err() != nil {
						stopGateways(gws)
						return ctx.Err()
					}
					s := bench.RunSessions(ctx, up, rec, &ids, gws[kind], kind, cell)
					by[kind] = append(by[kind], s)
					failed += s.Failed
					for _, f := range s.Failures {
						fmt.Fprintf(w, "<!-- %s %d replicas %d sessions: %s -->\n", kind, n, sessions, f)
					}
				}
			}
			bare, cct := merge(by["bare"]), merge(by["cctrace"])
			ratio := ms(bench.Percentile(cct.TTFB, 99)) / ms(bench.Percentile(bare.TTFB, 99))
			for _, s := range []bench.ReplicaSample{bare, cct} {
				writeReplicaRow(w, s, ratio)
			}
			if cct.Failed == 0 && ratio <= guard {
				held, heldRatio = &cct, ratio
			}
			largest = &cct
		}
		// Memory per session from the largest run: at a few sessions the heap's own growth
		// would dominate the figure.
		perSession := float64(largest.RSS-rest) / float64(largest.Sessions)
		if held != nil {
			fmt.Fprintf(w, "| **%d** | **%d held** | cctrace | %.0f | | %.3f | %.2f× | %.3f | %.0f | %.1f | %.0f KiB a session at %d sessions, over %.1f MiB at rest |\n",
				n, held.Sessions, reqPerSec(*held), ms(bench.Percentile(held.TTFB, 99)), heldRatio,
				cpuPerReq(*held), perCore(*held), mib(held.RSS), perSession/1024, largest.Sessions, mib(rest))
		} else {
			fmt.Fprintf(w, "| **%d** | **none held** within %.2f× bare at p99 | | | | | | | | %.0f KiB a session at %d sessions, over %.1f MiB at rest | |\n",
				n, guard, perSession/1024, largest.Sessions, mib(rest))
		}
		stopGateways(gws)
	}
	fmt.Fprintln(w)
	writeMachine(w, "after")
	if failed > 0 {
		return fmt.Errorf("%d requests failed", failed)
	}
	var spans int64
	for i := range slices.Max(rc.counts) {
		spans += collector.Service("cctrace-" + strconv.Itoa(i)).Spans
	}
	if spans == 0 {
		return errors.New("the cctrace replicas exported no spans")
	}
	return nil
}

// startGateways starts n cctrace replicas and n bare proxies, each kind behind its own nginx,
// and returns them by kind with the cctrace replicas' resident size at rest.
func startGateways(ctx context.Context, cfg config, dir, site, upstream, otlp string, n int) (map[string]*bench.Gateway, int64, error) {
	gws := map[string]*bench.Gateway{}
	var cctrace, bare []*bench.Variant
	fail := func(err error) (map[string]*bench.Gateway, int64, error) {
		for _, v := range append(cctrace, bare...) {
			v.Stop()
		}
		stopGateways(gws)
		return nil, 0, err
	}
	for i := range n {
		v, err := bench.StartCctrace(ctx, "cctrace-"+strconv.Itoa(i), dir, cfg.cctrace, upstream, otlp)
		if err != nil {
			return fail(err)
		}
		cctrace = append(cctrace, v)
		b, err := bench.StartBare(ctx, "bare-"+strconv.Itoa(i), dir, cfg.bare, upstream)
		if err != nil {
			return fail(err)
		}
		bare = append(bare, b)
	}
	for kind, vs := range map[string][]*bench.Variant{"cctrace": cctrace, "bare": bare} {
		g, err := bench.StartGateway(ctx, "nginx-"+kind+"-"+strconv.Itoa(n), dir, cfg.nginx, site, vs)
		if err != nil {
			return fail(err)
		}
		gws[kind] = g
	}
	m, _ := bench.ReadMemory(gws["cctrace"].ReplicaPIDs())
	return gws, m.RSS, nil
}

func stopGateways(gws map[string]*bench.Gateway) {
	for _, g := range gws {
		g.Stop()
	}
}

// merge joins the repetitions of one run: their requests, timings and CPU; the last RSS.
func merge(ss []bench.ReplicaSample) bench.ReplicaSample {
	out := ss[0]
	out.TTFB = append([]time.Duration(nil), out.TTFB...)
	for _, s := range ss[1:] {
		out.Requests += s.Requests
		out.Failed += s.Failed
		out.Elapsed += s.Elapsed
		out.CPU += s.CPU
		out.TTFB = append(out.TTFB, s.TTFB...)
		out.RSS = s.RSS
		out.Load = max(out.Load, s.Load)
	}
	return out
}

func writeReplicaRow(w io.Writer, s bench.ReplicaSample, ratio float64) {
	r := ""
	if s.Kind == "cctrace" {
		r = fmt.Sprintf("%.2f×", ratio)
	}
	fmt.Fprintf(w, "| %d | %d | %s | %.0f | %.3f | %.3f | %s | %.3f | %.0f | %.1f | %d |\n",
		s.Replicas, s.Sessions, s.Kind, reqPerSec(s), ms(bench.Percentile(s.TTFB, 50)), ms(bench.Percentile(s.TTFB, 99)),
		r, cpuPerReq(s), perCore(s), mib(s.RSS), s.Failed)
}

func reqPerSec(s bench.ReplicaSample) float64 {
	return float64(s.Requests) / s.Elapsed.Seconds()
}

func cpuPerReq(s bench.ReplicaSample) float64 {
	if s.Requests == 0 {
		return 0
	}
	return ms(s.CPU) / float64(s.Requests)
}

// perCore is the requests one core of replica CPU served: requests per CPU-second.
func perCore(s bench.ReplicaSample) float64 {
	if s.CPU <= 0 {
		return 0
	}
	return float64(s.Requests) / s.CPU.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
