package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/provider"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/internal/redact"
	"github.com/cctrace/cctrace/internal/stack"
	"github.com/cctrace/cctrace/internal/ui"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
	"github.com/cctrace/cctrace/tracing"
)

// maxHeaderBytes bounds a request's header block on the proxy listener.
const maxHeaderBytes = 1 << 20

// app is one running cctrace: the proxy and metrics listeners, the pipeline and the sinks.
type app struct {
	opts     options
	upstream *provider.Upstream
	log      *slog.Logger
	out      io.Writer
	store    *summary.Store
	tracing  *tracing.Sink // nil when no OTLP endpoint is configured
	// history writes ended turns and limit readings to the history store, off the tracker.
	history     *history.Writer
	stopHistory context.CancelFunc

	proxyLn, metricsLn   net.Listener
	proxyScheme          string // "https" with --tls-cert
	proxySrv, metricsSrv *http.Server
	// metricsOnlyLn and metricsOnlySrv serve /metrics and /healthz alone (--metrics-only-listen);
	// nil without it.
	metricsOnlyLn  net.Listener
	metricsOnlySrv *http.Server
	teams          *teams
	pipe           *pipeline.Pipeline
	stopPipe       context.CancelFunc
	stopProbes     context.CancelFunc
	wg             sync.WaitGroup
}

// start builds everything and starts serving. On error nothing is left running.
func start(ctx context.Context, o options, out io.Writer, log *slog.Logger) (*app, error) {
	a := &app{opts: o, log: log, out: out, proxyScheme: "http"}
	up, err := newUpstream(ctx, o, log)
	if err != nil {
		return nil, err
	}
	a.upstream = up
	upstream := up.URL()

	traceUI, err := ui.ParseTraceUI(o.uiURL)
	if err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(thisBuild()))
	prices := metrics.DefaultPrices()
	if o.pricing != "" {
		if prices, err = metrics.LoadPrices(o.pricing); err != nil {
			return nil, fmt.Errorf("loading --pricing: %w", err)
		}
	}
	mopts := []metrics.Option{metrics.WithMaxUsers(o.teams.maxUsers), metrics.WithMaxTeams(o.teams.maxTeams)}
	if o.replica {
		mopts = append(mopts, metrics.WithReplica())
	}
	if o.teams.enforceBudgets {
		mopts = append(mopts, metrics.WithBudgetEnforcement())
	}
	latest := genAILatest(os.Getenv)
	if latest {
		mopts = append(mopts, metrics.WithGenAILatest())
	}
	m, err := metrics.New(reg, mopts...)
	if err != nil {
		return nil, fmt.Errorf("creating metrics: %w", err)
	}
	if a.teams, err = newTeams(o.teams, m, log); err != nil {
		return nil, err
	}
	a.history, err = history.OpenWriter(ctx, historyStore(o), reg, history.WithLogger(log),
		history.WithRetention(history.Retention{MaxAge: o.historyMaxAge, MaxBytes: o.historyMaxSize}))
	if err != nil {
		return nil, fmt.Errorf("opening history: %w", err)
	}
	lim, err := limits.New(reg, m, limits.WithMaxAccounts(o.teams.maxUsers), limits.WithMaxTracked(o.maxSessions), limits.WithRecorder(a.history))
	if err != nil {
		a.closeSinks()
		return nil, fmt.Errorf("creating limit metrics: %w", err)
	}
	a.store = summary.New(summary.WithOutput(out), summary.WithSpend(a.teams.spend), summary.WithLimits(lim.Session),
		summary.WithTurnEnded(a.history.TurnEnded), summary.WithTitles(o.captureContent))
	sinks := instrument.Sinks{m, a.store, a.teams.ledger, lim}

	topts := []tracing.Option{tracing.WithExporterFromEnv(ctx), tracing.WithLogger(log), tracing.WithContentCapture(o.captureContent), tracing.WithProvider(up.Provider())}
	if host, port := hostPort(upstream); host != "" {
		topts = append(topts, tracing.WithServer(host, port))
	}
	if latest {
		topts = append(topts, tracing.WithGenAILatest())
	}
	ts, err := tracing.New(topts...)
	if err != nil {
		a.closeSinks()
		return nil, fmt.Errorf("configuring OTLP export: %w", err)
	}
	if ts.Exporting() {
		a.tracing = ts
		sinks = append(sinks, ts)
	} else {
		_ = ts.Shutdown(ctx)
	}

	tropts := []instrument.Option{
		instrument.WithToolTimeout(o.toolTimeout),
		instrument.WithSessionTimeout(o.sessionTimeout),
		instrument.WithMaxSessions(o.maxSessions),
		instrument.WithPricing(prices.ProviderCost(up.Provider(), strings.EqualFold(providerRegion(o), "global"))),
	}
	if o.captureContent {
		tropts = append(tropts, instrument.WithContentCapture(redact.Scrub))
	}
	if o.replica {
		tropts = append(tropts, instrument.WithReplica())
	}
	if o.joinClient {
		tropts = append(tropts, instrument.WithJoinClientTrace())
	}
	// A cctrace that serves others keeps its turns in flight in its history store when it
	// stops, and the next one goes on with them: a restart or an upgrade splits no turn. A
	// private one (run, demo) ends with its only client. A replica does so only in a store it
	// was given (PostgreSQL the replicas share, a file in a --state-dir or --history given):
	// the default state directory is its own, often gone with its container, where a turn kept
	// would be lost rather than handed off.
	var inFlight instrument.InFlightStore
	if db := a.history.Store(); !o.teams.private && db.Kind() != history.KindMemory &&
		(!o.replica || db.Kind() == history.KindPostgres || o.history != "" || o.teams.stateDir != stateDir(os.Getenv)) {
		inFlight = db
		tropts = append(tropts, instrument.WithInFlight(db))
	}
	tr := instrument.New(sinks, tropts...)
	p, pipe, err := stack.New(upstream, tr, log, a.teams.resolve,
		append(a.teams.proxyOptions(!up.ReplacesCredentials()), proxy.WithParseLimit(o.parseLimit), proxy.WithMaxRequestBody(o.maxRequestBody),
			proxy.WithProvider(up.Provider()), proxy.WithRoute(up.Route), proxy.WithUpstreamAuth(up.Transport))...)
	if err != nil {
		a.closeSinks()
		return nil, fmt.Errorf("creating proxy: %w", err)
	}
	a.pipe, a.teams.pipe = pipe, pipe

	var tlsConfig *tls.Config
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			a.closeSinks()
			return nil, fmt.Errorf("loading --tls-cert and --tls-key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if a.proxyLn, err = listen("--listen", o.listen); err != nil {
		a.closeSinks()
		return nil, err
	}
	a.proxyLn = proxy.AcceptOnFirstByte(a.proxyLn, proxyIdleTimeout)
	if a.metricsLn, err = listen("--metrics-listen", o.metricsListen); err != nil {
		a.proxyLn.Close()
		a.closeSinks()
		return nil, err
	}
	if o.teams.metricsOnlyListen != "" {
		if a.metricsOnlyLn, err = listen("--metrics-only-listen", o.teams.metricsOnlyListen); err != nil {
			a.proxyLn.Close()
			a.metricsLn.Close()
			a.closeSinks()
			return nil, err
		}
	}

	healthz := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg))
	mux.HandleFunc("/healthz", healthz)
	mux.Handle("/api/turns", a.store)
	mux.HandleFunc("GET /api/sessions/{id}/status", a.store.ServeStatus)
	mux.Handle("/", ui.New(a.store, ui.WithTraceUI(traceUI), ui.WithLogger(log), ui.WithPeople(a.teams.people), ui.WithHistory(a.history.Store)))

	a.proxySrv = &http.Server{
		Handler: p,
		// Bounds for what a client can make cctrace hold: headers must arrive within 30 s of
		// their first byte and fit in 1 MiB (larger ones get 431; Claude Code's are a few KiB),
		// and a connection idle for 10 minutes, new (proxy.AcceptOnFirstByte) or kept alive, is
		// closed. No read or write timeout: a stream may rightly last many minutes.
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       proxyIdleTimeout,
		TLSConfig:         tlsConfig,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	a.metricsSrv = &http.Server{Handler: a.teams.guard(mux), ReadHeaderTimeout: 10 * time.Second}
	if a.metricsOnlyLn != nil {
		only := http.NewServeMux()
		only.Handle("/metrics", metrics.Handler(reg))
		only.HandleFunc("/healthz", healthz)
		a.metricsOnlySrv = &http.Server{Handler: only, ReadHeaderTimeout: 10 * time.Second}
	}

	if inFlight != nil {
		// Before the pipeline runs: the tracker is its goroutine's from then on.
		n, err := tr.Resume(ctx)
		if err != nil {
			log.Warn("some turns in flight at the last stop could not be resumed", "error", err)
		}
		if n > 0 {
			log.Info("resumed turns in flight at the last stop", "turns", n)
		}
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopPipe = cancel
	hctx, stopHistory := context.WithCancel(context.WithoutCancel(ctx))
	a.stopHistory = stopHistory
	go a.history.Run(hctx)
	a.wg.Add(3)
	go func() { defer a.wg.Done(); a.pipe.Run(pctx) }()
	a.teams.run(pctx, &a.wg)
	if tlsConfig != nil {
		a.proxyScheme = "https"
	} else if !isLoopback(a.proxyLn.Addr()) {
		log.Warn("the proxy listens beyond this machine without TLS: API keys cross the network in the clear; give --tls-cert and --tls-key, or --listen 127.0.0.1:PORT",
			"listen", a.proxyLn.Addr().String())
	}
	a.teams.logStart()
	if !isLoopback(a.metricsLn.Addr()) && !o.teams.accessControl() {
		log.Warn("the turns page and /api/turns are open to anyone who reaches "+a.metricsLn.Addr().String()+
			": everyone's turns and spend; give --access-file or --trusted-user-header (with --metrics-only-listen for Prometheus), or --metrics-listen 127.0.0.1:PORT",
			"metrics_listen", a.metricsLn.Addr().String())
	}
	go a.serve(a.proxySrv, a.proxyLn)
	go a.serve(a.metricsSrv, a.metricsLn)
	if a.metricsOnlySrv != nil {
		a.wg.Add(1)
		go a.serve(a.metricsOnlySrv, a.metricsOnlyLn)
	}
	if a.tracing == nil {
		log.Debug("no OTLP endpoint configured: traces are not exported")
	}
	a.startProbes(upstream)
	return a, nil
}

// proxyIdleTimeout is how long the proxy keeps a connection that sends nothing, before its
// first request and between requests.
const proxyIdleTimeout = 10 * time.Minute

func (a *app) serve(srv *http.Server, ln net.Listener) {
	defer a.wg.Done()
	var err error
	if srv.TLSConfig != nil {
		// ServeTLS takes the certificate from TLSConfig and offers HTTP/2 as well.
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("listener stopped", "addr", ln.Addr().String(), "error", err)
	}
}

// proxyURL is the base URL Claude Code should use.
func (a *app) proxyURL() string { return a.proxyScheme + "://" + a.proxyLn.Addr().String() }

// metricsURL is the base URL of the metrics listener.
func (a *app) metricsURL() string { return "http://" + a.metricsLn.Addr().String() }

// shutdown stops accepting, lets in-flight exchanges finish within the grace period, ends open
// spans and flushes the exporter.
func (a *app) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.shutdownGrace)
	defer cancel()
	var errs []error
	if err := a.proxySrv.Shutdown(ctx); err != nil {
		// Streams still running after the grace period are cut; their spans end as "shutdown".
		errs = append(errs, fmt.Errorf("stopping proxy: %w", err))
		_ = a.proxySrv.Close()
	}
	a.stopProbes()
	a.stopPipe()
	<-a.pipe.Done()
	// The tracker has ended every turn: what the history has queued is the last of it.
	a.stopHistory()
	<-a.history.Done()
	if err := a.history.Store().Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing history: %w", err))
	}
	_ = a.metricsSrv.Shutdown(ctx)
	if a.metricsOnlySrv != nil {
		_ = a.metricsOnlySrv.Shutdown(ctx)
	}
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelFlush()
	if a.tracing != nil {
		if err := a.tracing.Shutdown(flushCtx); err != nil {
			errs = append(errs, fmt.Errorf("flushing traces: %w", err))
		}
	}
	a.wg.Wait()
	return errors.Join(errs...)
}

// stop shuts down (see shutdown) and prints the summary of every session to summary; it logs
// what failed.
func (a *app) stop(summary io.Writer) {
	if err := a.shutdown(); err != nil {
		a.log.Warn("shutdown", "error", err)
	}
	if err := a.store.WriteSummary(summary); err != nil {
		a.log.Warn("session summary", "error", err)
	}
}

// closeSinks lets go of what the sinks hold, when start fails: the exporter and the history.
func (a *app) closeSinks() {
	if a.tracing != nil {
		_ = a.tracing.Shutdown(context.Background())
	}
	_ = a.history.Store().Close()
}

// listen opens a TCP listener with an error message that says what to do about it.
func listen(flagName, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("cannot listen on %s: address already in use (is another cctrace running? pick a free address with %s, e.g. %s 127.0.0.1:0)", addr, flagName, flagName)
	}
	return nil, fmt.Errorf("cannot listen on %s (%s): %w", addr, flagName, err)
}

// isLoopback reports whether a listener's address is reachable only from this machine.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func hostPort(u *url.URL) (string, int) {
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = 443
		if u.Scheme == "http" {
			port = 80
		}
	}
	return u.Hostname(), port
}

// genAILatest reports whether OTEL_SEMCONV_STABILITY_OPT_IN, a comma-separated list, asks for
// gen_ai_latest_experimental: the names of the GenAI conventions' latest experimental version on
// metrics and spans instead of v1.41.0's, as the conventions ask instrumentations to offer.
func genAILatest(getenv func(string) string) bool {
	for v := range strings.SplitSeq(getenv("OTEL_SEMCONV_STABILITY_OPT_IN"), ",") {
		if strings.TrimSpace(v) == "gen_ai_latest_experimental" {
			return true
		}
	}
	return false
}
