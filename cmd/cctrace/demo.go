package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/google/uuid"

	recorded "github.com/cctrace/cctrace"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/summary"
)

// demoMaxGap shortens the pauses of the recordings (Claude Code compacting, a tool running) so
// that the demo takes seconds; demoPause separates one session from the next.
const (
	demoMaxGap = 2 * time.Second
	demoPause  = time.Second
)

// demoSession is one recorded session the demo replays, under a session id of this run.
type demoSession struct {
	name      string
	id        string
	exchanges []*replay.Exchange
	api       *fakeapi.Server
}

// demo is `cctrace demo`: a fake Anthropic API on loopback, a cctrace in front of it, and the
// recorded Claude Code sessions of recorded.DemoSessions replayed through it, so that the turn
// lines, the turns page, the metrics and (with an OTLP endpoint) the traces can be seen without
// Claude Code, an API key or a network. It serves the page until SIGINT or SIGTERM.
func demo(args []string, stdout, stderr io.Writer) int {
	o, ok := demoOptions(args, stderr)
	if !ok {
		return 2
	}
	sessions, err := loadDemo()
	if err != nil {
		fmt.Fprintf(stderr, "cctrace demo: %v\n", err)
		return 1
	}
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(stderr, "cctrace demo: starting the fake API: %v\n", err)
		return 1
	}
	api := &http.Server{Handler: demoAPI(sessions), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = api.Serve(apiLn) }()
	defer api.Close()
	o.upstream = "http://" + apiLn.Addr().String()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := start(ctx, o, stdout, log)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace demo: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "cctrace demo: replaying %d Claude Code sessions recorded from the real CLI (tool calls, a subagent,\n"+
		"  a retry after two 529s, an automatic compaction) through cctrace to a fake Anthropic API on\n"+
		"  127.0.0.1: no API key, nothing leaves this machine. Watch them arrive on the turns page:\n"+
		"  %s/\n\n", len(sessions), a.metricsURL())

	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for i, s := range sessions {
		if i > 0 && sleepUntilDone(ctx, demoPause) != nil {
			break
		}
		err := replay.Send(ctx, a.proxyURL(), s.exchanges, replay.WithClient(client), replay.WithMaxGap(demoMaxGap), replay.WithSessionID(s.id))
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "cctrace demo: replaying %s: %v\n", s.name, err)
			a.stop(io.Discard)
			return 1
		}
		waitTracked(ctx, a.store, s)
	}
	if ctx.Err() == nil {
		traces := "not exported: set OTEL_EXPORTER_OTLP_ENDPOINT (a collector's, Jaeger's, Tempo's) and run the demo again"
		if a.tracing != nil {
			traces = "exported over OTLP to " + redactedURL(otlpEndpoint())
		}
		fmt.Fprintf(stdout, "\ncctrace demo: all %d sessions replayed.\n"+
			"  turns page  %s/\n"+
			"  metrics     %s/metrics\n"+
			"  traces      %s\n"+
			"Press Ctrl-C to stop; the session summaries come then.\n", len(sessions), a.metricsURL(), a.metricsURL(), traces)
		<-ctx.Done()
	}
	fmt.Fprintln(stdout)
	a.stop(stdout)
	return 0
}

// demoOptions are serve's defaults on free loopback ports, and the few flags the demo takes. The
// CCTRACE_* environment is not read: it configures the user's own cctrace, not the demo.
func demoOptions(args []string, stderr io.Writer) (options, bool) {
	var o options
	newFlagSet("serve", &o, "127.0.0.1:0", "127.0.0.1:0")
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.metricsListen, "metrics-listen", o.metricsListen, "address serving the turns page (/) and /metrics (port 0: a free one)")
	fs.StringVar(&o.listen, "listen", o.listen, "the demo's proxy address (port 0: a free one)")
	fs.StringVar(&o.uiURL, "trace-ui-url", "", "link each turn on the turns page to its trace in Jaeger or Grafana (see 'cctrace serve -h')")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stderr, "demo", fs)
			return o, false
		}
		fmt.Fprintf(stderr, "cctrace demo: %v (see 'cctrace demo -h')\n", err)
		return o, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cctrace demo: unexpected arguments %q\n", fs.Args())
		return o, false
	}
	// No credential passes through the demo: its fingerprint secret need not outlive it.
	o.teams.stateDir, o.teams.private = "", true
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "cctrace demo: %v\n", err)
		return o, false
	}
	return o, true
}

// loadDemo reads the embedded recordings, each with a fake API playing the scenario it was
// recorded against, and gives each session an id of its own.
func loadDemo() ([]*demoSession, error) {
	var out []*demoSession
	for _, name := range recorded.DemoSessions {
		exchanges, err := replay.LoadFS(recorded.DemoRecordings, path.Join("testdata/claude-code", name))
		if err != nil {
			return nil, err
		}
		scenario, provider := fakeapi.RecordedScenario(name)
		script, err := fakeapi.Scenario(scenario)
		if err != nil {
			return nil, err
		}
		out = append(out, &demoSession{
			name:      name,
			id:        uuid.NewString(),
			exchanges: exchanges,
			api:       fakeapi.New(script, fakeapi.WithProvider(provider, fakeapi.Auth{})),
		})
	}
	return out, nil
}

// demoAPI answers each session with the fake API of its scenario, told apart by the session id
// the demo gave it.
func demoAPI(sessions []*demoSession) http.Handler {
	bySession := make(map[string]*fakeapi.Server, len(sessions))
	for _, s := range sessions {
		bySession[s.id] = s.api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if api := bySession[r.Header.Get("X-Claude-Code-Session-Id")]; api != nil {
			api.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
}

// waitTracked waits until the turns of s have ended in store, every answer counted, so that its
// turn lines come before whatever the demo prints next: the pipeline tracks an exchange a moment
// after its answer has reached the client. It gives up after a while: the lines are only late.
func waitTracked(ctx context.Context, store *summary.Store, s *demoSession) {
	deadline := time.Now().Add(10 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if tot, ok := store.Session(s.id); ok && tot.Requests >= len(s.exchanges) &&
			!slices.ContainsFunc(store.TurnsWhere(summary.Filter{Session: s.id}), func(t summary.Turn) bool { return t.Running() }) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// otlpEndpoint is the trace endpoint the OTEL_* environment names.
func otlpEndpoint() string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// sleepUntilDone waits d, or until ctx is done, which it reports.
func sleepUntilDone(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
