// Command cctrace-bench measures what cctrace adds to a Claude Code request, side by side with
// what users would otherwise run: the same Claude-Code-shaped traffic, in one run, interleaved,
// sent directly to a fast local upstream, through a bare httputil.ReverseProxy (and through a
// second one, a control that shows how far two identical proxies differ in the run), through nginx,
// through cctrace exporting to an OTLP receiver that drops spans, and through cctrace exporting
// to a real Jaeger.
//
// Usage:
//
//	cctrace-bench -cctrace PATH -bare PATH [-cctrace-base PATH] [-reps 5] [-short] [-out results.md] [-variants …]
//	cctrace-bench -cctrace PATH -bare PATH -replicas 1,2,3 [-sessions 8,32,128] [-session-think 1s]
//
// With -replicas it runs the replica benchmark instead: the team gateway as deploy/ ships it
// (nginx with deploy/nginx/cctrace.conf, consistent hashing on the session header) in front of
// 1, 2 and 3 cctrace replicas, against the same nginx in front of as many bare proxies, with
// every number of concurrent Claude-Code-shaped sessions, each pausing between its requests.
//
// With -cctrace-base, a cctrace built at a base commit runs beside cctrace as variant
// cctrace-base, in the same repetitions, and the report gives both against bare: how a change
// compares with the commit before it under the same load (scripts/bench.sh -base COMMIT builds
// it from a temporary git worktree).
//
// -bare is internal/testkit/bench/bareproxy, the baseline proxy, built as a program of its own (its doc
// says why). scripts/bench.sh builds the binaries and runs it. -short is the CI mode: a few
// seconds, no timing assertions; it fails only when something is functionally broken (a stream
// or body not byte-identical, a request failing, no spans exported).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/testkit/bench"
	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cctrace-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	home, _ := os.UserHomeDir()
	nginxDefault, _ := exec.LookPath("nginx")
	if nginxDefault == "" {
		nginxDefault = "/usr/sbin/nginx"
	}
	fs := flag.NewFlagSet("cctrace-bench", flag.ContinueOnError)
	var (
		short      = fs.Bool("short", false, "CI mode: a few seconds, fail only on functional breakage")
		reps       = fs.Int("reps", 5, "repetitions of the whole matrix")
		cctraceBin = fs.String("cctrace", "", "cctrace binary (go build ./cmd/cctrace)")
		bareBin    = fs.String("bare", "", "the baseline proxy's binary, for bare, bare-control, cctrace-proxy and go-raw (go build ./internal/testkit/bench/bareproxy)")
		baseBin    = fs.String("cctrace-base", "", "cctrace built at a base commit, run as variant cctrace-base (exporting to the no-op receiver) to judge cctrace against it")
		nginxBin   = fs.String("nginx", nginxDefault, "nginx binary")
		jaegerBin  = fs.String("jaeger", filepath.Join(home, ".cache/cctrace/jaeger-v1.76.0/jaeger"), "Jaeger v2 binary")
		variants   = fs.String("variants", "direct,bare,bare-control,nginx,cctrace-proxy,cctrace,cctrace-jaeger", "variants to compare, in order (also: go-raw; cctrace-base is added with -cctrace-base); bare-control is a second bare proxy, whose ratios to bare are the run's noise")
		sizes      = fs.String("sizes", "10240,204800,1048576", "request body sizes in bytes")
		concs      = fs.String("concurrency", "1,16,128", "client concurrency levels")
		pacedSizes = fs.String("paced-sizes", "204800", "body sizes also run with a paced stream")
		pace       = fs.Duration("pace", 5*time.Millisecond, "gap between events of a paced stream")
		events     = fs.Int("events", 500, "SSE events per reply")
		duration   = fs.Duration("duration", time.Second, "time per unpaced run")
		think      = fs.Duration("think", 0, "pause of each client between the end of a stream and its next request, in the unpaced runs (0: back to back)")
		maxReq     = fs.Int("max-requests", 3000, "requests per run at most")
		outPath    = fs.String("out", "", "also write the Markdown report to this file")
		workDir    = fs.String("dir", "", "directory for configs and logs (default: a new temporary one, removed afterwards)")
		replicas   = fs.String("replicas", "", "run the replica benchmark with these replica counts behind nginx (e.g. 1,2,3) instead of the side-by-side one")
		sessions   = fs.String("sessions", "8,32,128", "replica benchmark: concurrent sessions of each run")
		sessThink  = fs.Duration("session-think", time.Second, "replica benchmark: each session's pause between the end of a stream and its next request")
		sessSize   = fs.Int("session-size", 200<<10, "replica benchmark: request body size in bytes")
		sessDur    = fs.Duration("session-duration", 10*time.Second, "replica benchmark: time per run")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}

	cfg := config{
		reps: *reps, bare: *bareBin, cctrace: *cctraceBin, base: *baseBin, nginx: *nginxBin, jaeger: *jaegerBin,
		variants: strings.Split(*variants, ","), events: *events, short: *short,
	}
	if cfg.base != "" && !slices.Contains(cfg.variants, "cctrace-base") {
		cfg.variants = append(cfg.variants, "cctrace-base")
	}
	var err error
	if cfg.cells, err = cells(*sizes, *concs, *pacedSizes, *pace, *duration, *think, *maxReq); err != nil {
		return err
	}
	if *short {
		cfg.reps = 1
		cfg.cells = []bench.Cell{
			{BodySize: 10 << 10, Concurrency: 1, Duration: 200 * time.Millisecond, MaxRequests: 20},
			{BodySize: 1 << 20, Concurrency: 4, Duration: 200 * time.Millisecond, MaxRequests: 8},
			{BodySize: 200 << 10, Concurrency: 4, Pace: time.Millisecond, Duration: 100 * time.Millisecond, MaxRequests: 4},
		}
	}
	dir := *workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cctrace-bench-"); err != nil {
			return fmt.Errorf("creating work dir: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	for _, v := range cfg.variants {
		if (v == "bare" || v == "bare-control" || v == "cctrace-proxy" || v == "go-raw") && cfg.bare == "" {
			return fmt.Errorf("variant %s needs -bare (go build -o bareproxy ./internal/testkit/bench/bareproxy)", v)
		}
	}

	var report strings.Builder
	w := io.MultiWriter(out, &report)
	if *replicas != "" {
		rc := replicaConfig{think: *sessThink, size: *sessSize, duration: *sessDur}
		if rc.counts, err = positiveInts(*replicas); err != nil {
			return fmt.Errorf("-replicas: %w", err)
		}
		if rc.sessions, err = positiveInts(*sessions); err != nil {
			return fmt.Errorf("-sessions: %w", err)
		}
		if *short {
			rc.sessions, rc.duration, rc.think = []int{4}, time.Second, 100*time.Millisecond
		}
		if cfg.bare == "" {
			return errors.New("the replica benchmark needs -bare (go build -o bareproxy ./internal/testkit/bench/bareproxy)")
		}
		err = runReplicas(ctx, cfg, rc, dir, w)
	} else {
		err = runBench(ctx, cfg, dir, w)
	}
	if *outPath != "" {
		if werr := os.WriteFile(*outPath, []byte(report.String()), 0o644); werr != nil {
			err = errors.Join(err, fmt.Errorf("writing report: %w", werr))
		}
	}
	return err
}

// positiveInts parses a comma-separated list of positive integers.
func positiveInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

type config struct {
	reps          int
	cells         []bench.Cell
	bare, cctrace string
	base          string // -cctrace-base
	nginx, jaeger string
	variants      []string
	events        int
	short         bool
}

// cells builds the matrix: every size and concurrency unpaced (with think time between a
// client's requests), then the paced sizes at every concurrency. A paced run lasts one stream per
// client.
func cells(sizes, concs, pacedSizes string, pace, duration, think time.Duration, maxReq int) ([]bench.Cell, error) {
	ints := func(s string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
				return nil, fmt.Errorf("invalid number %q", f)
			}
			out = append(out, n)
		}
		return out, nil
	}
	ss, err := ints(sizes)
	if err != nil {
		return nil, fmt.Errorf("-sizes: %w", err)
	}
	cs, err := ints(concs)
	if err != nil {
		return nil, fmt.Errorf("-concurrency: %w", err)
	}
	ps, err := ints(pacedSizes)
	if err != nil {
		return nil, fmt.Errorf("-paced-sizes: %w", err)
	}
	var out []bench.Cell
	for _, s := range ss {
		for _, c := range cs {
			out = append(out, bench.Cell{BodySize: s, Concurrency: c, Duration: duration, MaxRequests: maxReq, Think: think})
		}
	}
	for _, s := range ps {
		for _, c := range cs {
			out = append(out, bench.Cell{BodySize: s, Concurrency: c, Pace: pace, Duration: pace, MaxRequests: c})
		}
	}
	return out, nil
}

// runBench starts the upstream, the collectors and the variants, runs the plan, and writes the
// report to w.
func runBench(ctx context.Context, cfg config, dir string, w io.Writer) error {
	rec, err := traffic.FindRecording()
	if err != nil {
		return err
	}
	stream := traffic.NewStream(cfg.events)
	up, err := bench.StartUpstream(stream)
	if err != nil {
		return err
	}
	defer up.Close()
	collector, err := bench.StartCollector()
	if err != nil {
		return err
	}
	defer collector.Close()

	var (
		vs     []*bench.Variant
		jaeger *harness.Jaeger
		rest   = map[string]bench.Memory{}
	)
	defer func() {
		for _, v := range vs {
			v.Stop()
		}
		if jaeger != nil {
			jaeger.Stop()
		}
	}()
	for _, name := range cfg.variants {
		var v *bench.Variant
		switch name {
		case "direct":
			v = bench.Direct(up)
		case "bare", "bare-control":
			v, err = bench.StartBare(ctx, name, dir, cfg.bare, up.URL())
		case "cctrace-proxy":
			v, err = bench.StartProxyOnly(ctx, dir, cfg.bare, up.URL())
		case "go-raw":
			v, err = bench.StartGoRaw(ctx, dir, cfg.bare, up.URL())
		case "nginx":
			if _, serr := os.Stat(cfg.nginx); serr != nil && cfg.short {
				fmt.Fprintf(w, "skipping nginx: %v\n", serr)
				continue
			}
			v, err = bench.StartNginx(ctx, dir, cfg.nginx, up.URL())
		case "cctrace":
			v, err = bench.StartCctrace(ctx, "cctrace", dir, cfg.cctrace, up.URL(), collector.Endpoint())
		case "cctrace-base":
			if v, err = bench.StartCctrace(ctx, "cctrace-base", dir, cfg.base, up.URL(), collector.Endpoint()); err == nil {
				// Measured, not checked: an older build may lack the metrics the checks read.
				v.Metrics = ""
			}
		case "cctrace-jaeger":
			if _, serr := os.Stat(cfg.jaeger); serr != nil && cfg.short {
				fmt.Fprintf(w, "skipping cctrace-jaeger: %v\n", serr)
				continue
			}
			if jaeger, err = harness.RunJaeger(ctx, cfg.jaeger, dir); err == nil {
				v, err = bench.StartCctrace(ctx, "cctrace-jaeger", dir, cfg.cctrace, up.URL(), jaeger.OTLPEndpoint())
			}
		default:
			err = fmt.Errorf("unknown variant %q", name)
		}
		if err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		vs = append(vs, v)
		if pids := v.PIDs(); len(pids) > 0 {
			if m, err := bench.ReadMemory(pids); err == nil {
				rest[v.Name] = m
			}
		}
	}

	writeMachine(w, "before")
	samples := bench.Execute(ctx, up, rec, bench.Plan{
		Reps: cfg.reps, Cells: cfg.cells, Variants: vs,
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	// Let the proxies settle (idle connections, exporter batches) before reading memory at rest.
	idle := map[string]bench.Memory{}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	for _, v := range vs {
		if pids := v.PIDs(); len(pids) > 0 {
			if m, err := bench.ReadMemory(pids); err == nil {
				idle[v.Name] = m
			}
		}
	}
	writeMachine(w, "after")
	fmt.Fprintf(w, "\n%d repetitions, %d SSE events per reply (%d bytes); medians over repetitions; spread is ± half the range of TTFB p50 over repetitions.\n\n",
		cfg.reps, len(stream.Events), len(stream.Bytes))
	sums := bench.Summarise(samples)
	bench.WriteTables(w, sums, "bare")
	fmt.Fprintln(w, "TTFB in its parts (medians of p50s): outbound, from sending the request to the upstream having read its body; "+
		"back, from the upstream starting to write its first event to the client's first byte. The rest of TTFB is the upstream's own time.")
	fmt.Fprintln(w)
	bench.WriteLegs(w, sums, "bare")
	if cfg.base != "" {
		fmt.Fprintln(w, "cctrace and the base commit's build (cctrace-base), each against bare in the same run: the figures the guards judge.")
		fmt.Fprintln(w)
		bench.WriteAgainstBase(w, sums, "cctrace", "cctrace-base", "bare")
	}
	if cfg.reps >= 6 {
		fmt.Fprintln(w, "p50s against bare's in the same repetition and cell: the median over the repetitions, and the interval holding that median with 95 % confidence (order statistics):")
		fmt.Fprintln(w)
		for _, f := range []struct {
			name string
			of   func(bench.Result) []time.Duration
		}{
			{"TTFB", func(r bench.Result) []time.Duration { return r.TTFB }},
			{"outbound", func(r bench.Result) []time.Duration { return r.Outbound }},
			{"back", func(r bench.Result) []time.Duration { return r.Back }},
		} {
			bench.WritePairedRatios(w, bench.PairedRatios(samples, "bare", f.of), f.name, "bare")
		}
	}
	if c, ok := bench.Control(sums, "bare-control", "bare"); ok {
		fmt.Fprintf(w, "bare-control, a second bare proxy (the same binary, in its own process), against bare: the noise of this run. "+
			"Unpaced cells: TTFB p50 %s, p99 %s, CPU per request %s. Paced cells: TTFB p50 %s, event delay p99 %s.\n\n",
			c.TTFB50, c.TTFB99, c.CPUPerReq, c.PacedTTFB50, c.PacedEvent99)
	}

	fmt.Fprintln(w, "| variant | RSS at start MiB | RSS idle after load MiB | peak RSS sampled in flight MiB | VmHWM MiB |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, v := range vs {
		if v.Proc == nil {
			continue
		}
		peak := 0.0
		for _, s := range sums {
			if s.Variant == v.Name {
				peak = max(peak, s.PeakRSS)
			}
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.1f |\n", v.Name, mib(rest[v.Name].RSS), mib(idle[v.Name].RSS), peak, mib(idle[v.Name].HWM))
	}
	fmt.Fprintln(w)

	// Every request a cctrace variant was sent must be tracked, body decoded or not: once it
	// has ended the spans it holds back for a turn to adopt.
	trackErrs := checkTracked(ctx, w, samples, vs)

	// Stop the proxies now: cctrace flushes its spans on the way out, and the checks below need
	// them.
	for _, v := range vs {
		v.Stop()
		if v.Proc == nil {
			continue
		}
		if err := v.Proc.Err(); err != nil && !isSignalExit(err) {
			return fmt.Errorf("%s exited with %v:\n%s", v.Name, err, v.Proc.LogTail())
		}
	}
	return errors.Join(trackErrs, check(ctx, w, samples, vs, collector, jaeger))
}

// checkTracked waits until each cctrace variant's metrics count every request it was sent
// (warm-ups included) and fails for those that do not within instrument.AdoptWindow and a few
// seconds more.
func checkTracked(ctx context.Context, w io.Writer, samples []bench.Sample, vs []*bench.Variant) error {
	var errs []error
	for _, v := range vs {
		if v.Metrics == "" {
			continue
		}
		sent := bench.Sent(samples, v.Name)
		t, ok, err := bench.WaitTracked(ctx, v.Metrics, sent, instrument.AdoptWindow+5*time.Second)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: reading what cctrace tracked: %w", v.Name, err))
		case !ok:
			errs = append(errs, fmt.Errorf("%s: cctrace tracked %d requests of the %d sent to it", v.Name, t.Requests, sent))
		default:
			fmt.Fprintf(w, "%s: tracked all %d requests sent to it; %d (%.1f%%) with their body not decoded (cctrace_bodies_not_decoded_total): %d by the decode queue, %d by the copy budget\n",
				v.Name, t.Requests, t.NotDecoded, 100*float64(t.NotDecoded)/float64(max(t.Requests, 1)), t.QueueFull, t.NotDecoded-t.QueueFull)
		}
	}
	return errors.Join(errs...)
}

// check fails the run when anything was functionally broken.
func check(ctx context.Context, w io.Writer, samples []bench.Sample, vs []*bench.Variant, collector *bench.Collector, jaeger *harness.Jaeger) error {
	var errs []error
	for _, s := range samples {
		if s.Failed > 0 {
			errs = append(errs, fmt.Errorf("%s %s: %d requests failed, first: %s", s.Variant, s.Cell.Name(), s.Failed, s.Failures[0]))
		}
		if s.Requests == 0 && s.Failed == 0 {
			errs = append(errs, fmt.Errorf("%s %s: no request completed", s.Variant, s.Cell.Name()))
		}
		if s.TrackErr != nil {
			errs = append(errs, fmt.Errorf("%s %s: reading what cctrace tracked: %w", s.Variant, s.Cell.Name(), s.TrackErr))
		}
	}
	for _, v := range vs {
		switch v.Name {
		case "cctrace":
			s := collector.Service(v.Name)
			fmt.Fprintf(w, "%s: %d spans received by the no-op collector; %d of its %d requests (%.1f%%) tracked without their body decoded (over a memory budget)\n",
				v.Name, s.Spans, s.Undecoded, s.Chat, 100*float64(s.Undecoded)/float64(max(s.Chat, 1)))
			if s.Spans == 0 {
				errs = append(errs, fmt.Errorf("%s exported no spans to the no-op collector", v.Name))
			}
		case "cctrace-jaeger":
			services, err := jaeger.Services()
			if err != nil || !slices.Contains(services, v.Name) {
				errs = append(errs, fmt.Errorf("jaeger has no %s spans (services %v, %v)", v.Name, services, err))
			}
		}
	}
	return errors.Join(errs...)
}

func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	return false
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// writeMachine describes the machine and its load.
func writeMachine(w io.Writer, when string) {
	if when == "before" {
		model := "unknown"
		if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
					model = strings.TrimSpace(v)
					break
				}
			}
		}
		kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
		fmt.Fprintf(w, "machine: %d CPUs (%s), Linux %s, %s %s/%s\n", runtime.NumCPU(), model,
			strings.TrimSpace(string(kernel)), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "load average %s the run: %s\n", when, strings.TrimSpace(string(load)))
}
