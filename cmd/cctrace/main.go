// Command cctrace is a transparent proxy for Claude Code that turns every agentic turn into an
// OpenTelemetry trace and Prometheus metrics.
//
//	cctrace serve [flags]              run the proxy until SIGINT/SIGTERM
//	cctrace run [flags] -- COMMAND...  run COMMAND (e.g. claude) through a private proxy
//	cctrace demo                       replay recorded Claude Code sessions through cctrace to a fake API
//	cctrace sessions|turns [flags]     the sessions and turns of the history store
//	cctrace statusline [--url URL]     print the current turn, for Claude Code's statusLine
//	cctrace budgets rules --budgets F  Prometheus alerting rules of a budgets file
//	cctrace fingerprint < KEY          the fingerprint cctrace shows for a credential
//	cctrace version                    version, commit and Go release of this binary
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

const usage = `cctrace: see every Claude Code turn as a trace.

Usage:
  cctrace serve [flags]               run the proxy; point ANTHROPIC_BASE_URL at --listen
  cctrace run [flags] -- COMMAND ...  run COMMAND with ANTHROPIC_BASE_URL set to a private proxy
  cctrace demo                        see it work in a minute, without Claude Code or an API key:
                                      recorded sessions replayed through cctrace to a fake API
  cctrace sessions [--json]           the sessions cctrace kept, across restarts (--top, --per day,
                                      --user, --project, --model, --since 24h; -h for all)
  cctrace turns [--session ID]        the turns it kept, the latest (or with --top the costliest) first
  cctrace statusline [--url URL]      a status line for Claude Code (its statusLine setting)
  cctrace budgets rules --budgets F   print the Prometheus alerting rules of a budgets file
  cctrace fingerprint < KEY           print the fingerprint cctrace shows for a key or token
  cctrace version                     print the version, commit and Go release of this binary

Traces go to the OTLP gRPC endpoint in OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT);
without one, nothing is exported: turns are printed, and shown on the turns page at the
--metrics-listen address (http://127.0.0.1:9787/ for serve).
Run 'cctrace serve -h' for the flags; each also reads CCTRACE_<FLAG_NAME>.
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		setMemoryLimit()
		return serve(args[1:], stderr)
	case "run":
		setMemoryLimit()
		return run(args[1:], stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "statusline":
		return statusline(args[1:], statusStdin(), stdout, stderr)
	case "sessions", "turns":
		return historyCmd(args[0], args[1:], stdout, stderr)
	case "budgets":
		return budgetsCmd(args[1:], stdout, stderr)
	case "fingerprint":
		return fingerprintCmd(args[1:], os.Stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, thisBuild())
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "cctrace: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// setup parses flags and opens the log destination.
func setup(name string, args []string, stderr io.Writer, listenDefault, metricsDefault string) (options, []string, io.Writer, *slog.Logger, func(), int) {
	o, rest, code := parseFlags(name, args, stderr, listenDefault, metricsDefault)
	if code >= 0 {
		return o, nil, nil, nil, nil, code
	}
	out, log, closeOut, code := openLog(name, o, stderr)
	return o, rest, out, log, closeOut, code
}

// parseFlags parses and checks the flags of command name. code is the exit status when the
// command should stop (help, a mistake), else -1.
func parseFlags(name string, args []string, stderr io.Writer, listenDefault, metricsDefault string) (o options, rest []string, code int) {
	fs := newFlagSet(name, &o, listenDefault, metricsDefault)
	// The flag package prints every flag after any mistake; one line that says what was wrong
	// is easier to act on, and -h still prints them all.
	fs.SetOutput(io.Discard)
	if err := parseArgs(name, fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stderr, name, fs)
			return o, nil, 0
		}
		fmt.Fprintf(stderr, "cctrace %s: %v (see 'cctrace %s -h')\n", name, err, name)
		return o, nil, 2
	}
	if set := gatewayFlagsSet(name, fs); len(set) > 0 {
		what := "is a team gateway's flag, not one for a private proxy of one command: give it"
		if len(set) > 1 {
			what = "are a team gateway's flags, not ones for a private proxy of one command: give them"
		}
		fmt.Fprintf(stderr, "cctrace %s: %s %s to a shared 'cctrace serve' (see 'cctrace serve -h')\n", name, strings.Join(set, " and "), what)
		return o, nil, 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "cctrace %s: %v\n", name, err)
		return o, nil, 2
	}
	return o, fs.Args(), -1
}

// openLog opens where turn lines and logs go: the --log file, else stderr. code is the exit
// status when it cannot, else -1.
func openLog(name string, o options, stderr io.Writer) (out io.Writer, log *slog.Logger, closeOut func(), code int) {
	out, closeOut = stderr, func() {}
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "cctrace %s: cannot open --log file: %v\n", name, err)
			return nil, nil, nil, 2
		}
		out, closeOut = f, func() { f.Close() }
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel))
	return out, slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})), closeOut, -1
}

func serve(args []string, stderr io.Writer) int {
	o, rest, out, log, closeOut, code := setup("serve", args, stderr, defaultListen, defaultMetricsListen)
	if code >= 0 {
		return code
	}
	defer closeOut()
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "cctrace serve: unexpected arguments %q (did you mean 'cctrace run -- %s'?)\n", rest, strings.Join(rest, " "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := start(ctx, o, out, log)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace serve: %v\n", err)
		return 1
	}
	log.Info("cctrace listening", "proxy", a.proxyURL(), "metrics", a.metricsURL()+"/metrics", "turns", a.metricsURL()+"/", "provider", a.upstream.Provider().String(), "upstream", a.upstream.URL().Redacted(), "exporting", a.tracing != nil)
	fmt.Fprintf(out, "cctrace: export %s\n", strings.Join(clientEnv(a.upstream.Provider(), a.proxyURL()), " "))
	fmt.Fprintf(out, "cctrace: turns page %s/\n", a.metricsURL())
	<-ctx.Done()
	log.Info("shutting down: letting in-flight requests finish", "grace", o.shutdownGrace)
	a.stop(a.out)
	return 0
}

func run(args []string, stderr io.Writer) int {
	o, rest, code := parseFlags("run", args, stderr, "127.0.0.1:0", "127.0.0.1:0")
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "cctrace run: no command given; usage: cctrace run [flags] -- COMMAND [ARGS] (e.g. cctrace run -- claude)")
		return 2
	}
	path, err := exec.LookPath(rest[0])
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			fmt.Fprintf(stderr, "cctrace run: %s: command not found in $PATH; give its full path, e.g. cctrace run -- ~/.local/bin/claude\n", rest[0])
		} else {
			fmt.Fprintf(stderr, "cctrace run: cannot run %s: %v\n", rest[0], errors.Unwrap(err))
		}
		return 127
	}
	o.teams.private = true
	claude := isClaudeCode(rest[0], path)
	argv := rest[1:]
	env := childEnv(os.Environ())
	if o.clientTelemetry {
		if env, err = clientTelemetryEnv(env); err != nil {
			fmt.Fprintf(stderr, "cctrace run: %v\n", err)
			return 2
		}
		o.joinClient = true
	}
	// While the command owns the terminal, cctrace writes nothing there (terminal.go): turn
	// lines and logs go to a file of their own, and the summary comes after the command exits.
	owns := ownsTerminal(isTerminal(os.Stdin), isTerminal(os.Stderr), claude && claudePrintMode(argv))
	if owns && o.logFile == "" {
		if o.logFile, err = runLogPath(os.Getenv, time.Now(), os.Getpid()); err != nil {
			fmt.Fprintf(stderr, "cctrace run: %v\n", err)
			return 1
		}
	}
	out, log, closeOut, code := openLog("run", o, stderr)
	if code >= 0 {
		return code
	}
	defer closeOut()
	if owns {
		keepOffTerminal(out, log)
		if claude {
			argv = withStatusLine(argv)
		}
	}

	// Signals are handled here and passed to the command; cctrace itself stops only when the
	// command has exited.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	a, err := start(context.Background(), o, out, log)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace run: %v\n", err)
		return 1
	}
	log.Debug("cctrace listening", "proxy", a.proxyURL(), "metrics", a.metricsURL())
	fmt.Fprintf(out, "cctrace: proxy %s, turns page %s/\n", a.proxyURL(), a.metricsURL())
	if owns {
		fmt.Fprintf(stderr, "cctrace: turns page %s/ · turn lines in %s\n", a.metricsURL(), o.logFile)
	}

	cmd := exec.Command(path, argv...)
	cmd.Args[0] = rest[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// CCTRACE_URL tells `cctrace statusline`, run by the command, which cctrace to ask.
	cmd.Env = append(env, append(clientEnv(a.upstream.Provider(), a.proxyURL()), "CCTRACE_URL="+a.metricsURL())...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "cctrace run: starting %s: %v\n", rest[0], err)
		_ = a.shutdown()
		return 1
	}
	// A terminal sends Ctrl-C to the whole foreground process group, the command included;
	// passing it on as well would deliver it twice.
	interactive := term.IsTerminal(int(os.Stdin.Fd()))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var waitErr error
loop:
	for {
		select {
		case sig := <-sigs:
			if sig == os.Interrupt && interactive {
				continue
			}
			_ = cmd.Process.Signal(sig)
		case waitErr = <-waited:
			break loop
		}
	}
	summaryOut := out
	if owns {
		summaryOut = io.MultiWriter(out, stderr)
	}
	a.stop(summaryOut)
	if owns {
		fmt.Fprintf(stderr, "cctrace: turn lines and logs in %s\n", o.logFile)
	}
	return exitCode(cmd, waitErr)
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	if err != nil {
		return 1
	}
	return 0
}

// redactedURL is raw with any password replaced by "xxxxx", for logs: a gateway URL may carry
// credentials.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// childEnv is the environment `cctrace run` gives its command: cctrace's own, less where the
// command's API requests go (cctrace sets that) and cctrace's secrets, which the command (and
// whatever its tools run) has no use for.
func childEnv(env []string) []string {
	for _, name := range []string{"ANTHROPIC_BASE_URL", "CCTRACE_URL", envIdentitySecret, foundryKeyEnv} {
		env = withoutEnv(env, name)
	}
	return env
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
