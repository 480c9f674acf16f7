package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/internal/identity"
	"github.com/cctrace/cctrace/internal/ui"
	"github.com/cctrace/cctrace/metrics"
)

// Defaults for the listeners. Both bind to loopback: cctrace is a personal proxy, not a service.
const (
	defaultListen        = "127.0.0.1:8787"
	defaultMetricsListen = "127.0.0.1:9787"
	defaultUpstream      = "https://api.anthropic.com"
)

// options is what the command line and CCTRACE_* environment configure.
type options struct {
	listen          string
	upstream        string
	provider        string
	region          string
	foundryResource string
	metricsListen   string
	captureContent  bool
	pricing         string
	logFile         string
	logLevel        string
	shutdownGrace   time.Duration
	toolTimeout     time.Duration
	sessionTimeout  time.Duration
	maxSessions     int
	parseLimit      int64
	maxRequestBody  int64
	tlsCert         string
	tlsKey          string
	uiURL           string
	replica         bool
	joinClient      bool
	// clientTelemetry (run only) turns on Claude Code's own tracing for the command.
	clientTelemetry bool
	// history names the history store (see historyStore); historyMaxAge and historyMaxSize are
	// its retention.
	history        string
	historyMaxAge  time.Duration
	historyMaxSize int64
	teams          teamOptions
}

// teamOptions are the flags of a shared cctrace: who sent each request, their budgets, and who
// may look.
type teamOptions struct {
	identityHeader     string
	identityOrder      string
	identitySecretFile string
	stateDir           string
	directory          string
	maxUsers, maxTeams int
	budgets            string
	enforceBudgets     bool
	spendPrometheus    string
	accessFile         string
	trustedUserHeader  string
	trustedTeamHeader  string
	trustedRoleHeader  string
	metricsTokenFile   string
	metricsOnlyListen  string
	// private is set by run and demo, whose proxy serves one person: where its fingerprint
	// secret came from is not worth a line of their output.
	private bool
}

// newFlagSet declares every flag on fs. Each flag's default is taken from CCTRACE_<NAME> when that
// variable is set (NAME upper-cased, dashes as underscores), so that containers and shells can
// configure cctrace without a command line.
func newFlagSet(name string, o *options, listenDefault, metricsDefault string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", listenDefault, "proxy listen address (point ANTHROPIC_BASE_URL here)")
	fs.StringVar(&o.upstream, "upstream", "", "base URL to forward to (default: the --provider's, "+defaultUpstream+" for anthropic)")
	fs.StringVar(&o.provider, "provider", "anthropic", "service Claude Code uses through cctrace: anthropic, vertex, bedrock or foundry")
	fs.StringVar(&o.region, "region", "", "Vertex AI location (default $CLOUD_ML_REGION; global for the global endpoint) or Bedrock's AWS region (default the AWS configuration's, e.g. $AWS_REGION)")
	fs.StringVar(&o.foundryResource, "foundry-resource", "", "Microsoft Foundry resource name, for https://{resource}.services.ai.azure.com (default $ANTHROPIC_FOUNDRY_RESOURCE)")
	fs.StringVar(&o.metricsListen, "metrics-listen", metricsDefault, "address serving the turns page (/), /metrics, /healthz and /api/turns")
	fs.BoolVar(&o.captureContent, "capture-content", false, "add secret-scrubbed previews of prompts and tool input/output to spans")
	fs.StringVar(&o.pricing, "pricing", "", "JSON price table overriding the embedded one")
	fs.StringVar(&o.logFile, "log", "", "write per-turn lines and logs to this file instead of stderr")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "how long in-flight streams may finish at shutdown")
	fs.DurationVar(&o.toolTimeout, "turn-idle-timeout", 30*time.Minute, "end a turn after this long without a request")
	fs.DurationVar(&o.sessionTimeout, "session-idle-timeout", 2*time.Hour, "forget a session after this long without a request")
	fs.IntVar(&o.maxSessions, "max-sessions", 10000, "sessions held at once; the least recently seen is evicted beyond it")
	o.parseLimit, o.maxRequestBody = 32<<20, 256<<20
	fs.Var((*byteSize)(&o.parseLimit), "parse-limit", "largest body decoded for tracing; larger ones are forwarded, not decoded")
	fs.Var((*byteSize)(&o.maxRequestBody), "max-request-body", "largest request body forwarded; a larger one is answered 413 (0: no limit)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve the proxy over HTTPS with this PEM certificate (with --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.BoolVar(&o.replica, "replica", false, "this cctrace is one of several replicas behind a load balancer with session affinity: a turn whose session went on elsewhere ends as handed_off")
	fs.StringVar(&o.history, "history", "", "where sessions and turns are kept across restarts: an SQLite file (default history.db in --state-dir), postgres://… for replicas sharing one history, or memory")
	fs.DurationVar(&o.historyMaxAge, "history-max-age", 90*24*time.Hour, "history older than this is removed (0: no limit)")
	o.historyMaxSize = 1 << 30
	fs.Var((*byteSize)(&o.historyMaxSize), "history-max-size", "the oldest history is removed beyond this size (0: no limit)")
	addTeamFlags(fs, &o.teams)
	fs.StringVar(&o.uiURL, "trace-ui-url", "", "link each turn on the turns page to its trace: Jaeger's base URL (http://localhost:16686), Grafana Explore (http://localhost:3000/explore, Tempo data source uid \"tempo\") or any URL with {trace_id}")
	fs.BoolVar(&o.joinClient, "join-client-trace", false, "put each turn into Claude Code's own trace when its requests carry a traceparent (its telemetry with CLAUDE_CODE_PROPAGATE_TRACEPARENT=1); export both to the same backend")
	if name == "run" {
		fs.BoolVar(&o.clientTelemetry, "client-telemetry", false, "turn on Claude Code's own tracing for COMMAND, exported where cctrace exports (needs OTEL_EXPORTER_OTLP_ENDPOINT), and --join-client-trace")
	}
	return fs
}

// addTeamFlags declares the flags of teamOptions on fs.
func addTeamFlags(fs *flag.FlagSet, t *teamOptions) {
	fs.StringVar(&t.identityHeader, "identity-header", identity.DefaultHeader, "request header naming the person (set it in ANTHROPIC_CUSTOM_HEADERS); empty: not read")
	fs.StringVar(&t.identityOrder, "identity-order", "header,account,key", "which identities attribute a request, in order: header, account (metadata.user_id's account_uuid), key (the credential's fingerprint)")
	fs.StringVar(&t.identitySecretFile, "identity-secret-file", "", "file with the secret (32 bytes or more) credential fingerprints are keyed with; default CCTRACE_IDENTITY_SECRET, else one generated in --state-dir")
	fs.StringVar(&t.stateDir, "state-dir", stateDir(os.Getenv), "where cctrace keeps its generated fingerprint secret, its history, and the turns in flight when it stops")
	fs.StringVar(&t.directory, "directory", "", "YAML file naming people and teams by their identities; reread when it changes")
	fs.IntVar(&t.maxUsers, "max-users", metrics.DefaultMaxUsers, "distinct user label values in metrics; the rest are \"other\"")
	fs.IntVar(&t.maxTeams, "max-teams", metrics.DefaultMaxTeams, "distinct team label values in metrics; the rest are \"other\"")
	fs.StringVar(&t.budgets, "budgets", "", "YAML file of daily and monthly USD budgets per person and team; reread when it changes")
	fs.BoolVar(&t.enforceBudgets, "enforce-budgets", false, "refuse the new prompts of a person whose budget, or whose team's, is spent (needs --budgets)")
	fs.StringVar(&t.spendPrometheus, "budget-spend-prometheus", "", "Prometheus URL (http://prometheus:9090) to read every replica's spend from, for budgets; default: this process's own count")
	fs.StringVar(&t.accessFile, "access-file", "", "YAML file of the tokens and passwords that may view the turns page and /api/turns, with their roles; reread when it changes")
	fs.StringVar(&t.trustedUserHeader, "trusted-user-header", "", "header an authenticating proxy in front sets to the viewer's name (e.g. X-Forwarded-User); only that proxy may reach the metrics listener")
	fs.StringVar(&t.trustedTeamHeader, "trusted-team-header", "", "header with the viewer's team, from the same proxy")
	fs.StringVar(&t.trustedRoleHeader, "trusted-role-header", "", "header with the viewer's role (person, lead, admin), from the same proxy")
	fs.StringVar(&t.metricsTokenFile, "metrics-token-file", "", "file with the bearer token /metrics accepts besides an admin's, when access control is on")
	fs.StringVar(&t.metricsOnlyListen, "metrics-only-listen", "", "a second address serving only /metrics and /healthz, without access control (for Prometheus and probes)")
}

// accessControl reports whether the metrics listener asks viewers who they are.
func (t teamOptions) accessControl() bool { return t.accessFile != "" || t.trustedUserHeader != "" }

// validate checks the team flags.
func (t teamOptions) validate() error {
	if _, err := identity.ParseOrder(t.identityOrder); err != nil {
		return fmt.Errorf("invalid --identity-order: %w", err)
	}
	if t.maxUsers < 1 || t.maxTeams < 1 {
		return errors.New("invalid --max-users or --max-teams: must be at least 1")
	}
	if t.enforceBudgets && t.budgets == "" {
		return errors.New("--enforce-budgets needs --budgets FILE: there is no budget to enforce")
	}
	if t.spendPrometheus != "" && t.budgets == "" {
		return errors.New("--budget-spend-prometheus needs --budgets FILE")
	}
	if t.metricsTokenFile != "" && !t.accessControl() {
		return errors.New("--metrics-token-file protects /metrics only with access control on: give --access-file or --trusted-user-header too")
	}
	if t.trustedUserHeader == "" && (t.trustedTeamHeader != "" || t.trustedRoleHeader != "") {
		return errors.New("--trusted-team-header and --trusted-role-header need --trusted-user-header")
	}
	if t.metricsOnlyListen != "" {
		if _, port, err := net.SplitHostPort(t.metricsOnlyListen); err != nil || port == "" {
			return fmt.Errorf("invalid --metrics-only-listen %q: want HOST:PORT", t.metricsOnlyListen)
		}
	}
	return nil
}

// parseArgs parses command's args after applying the CCTRACE_* defaults of the flags it takes,
// and checks the values.
func parseArgs(command string, fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if !takesFlag(command, f.Name) {
			return
		}
		env := "CCTRACE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			// -h shows the default and an error the value: neither shows the password a URL
			// (--upstream, --budget-spend-prometheus) or a database's DSN (--history) may carry.
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("invalid %s=%q: %w", env, history.RedactDSN(v), err)
			}
			f.DefValue = history.RedactDSN(v)
		}
	})
	if envErr != nil {
		return envErr
	}
	return fs.Parse(args)
}

func (o *options) validate() error {
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("invalid --upstream %q: want an http:// or https:// base URL such as %s", redactedURL(o.upstream), defaultUpstream)
		}
	}
	if _, err := wire.ParseProvider(o.provider); err != nil {
		return fmt.Errorf("invalid --provider: %w", err)
	}
	if o.maxSessions < 1 {
		return errors.New("invalid --max-sessions: must be at least 1")
	}
	if o.historyMaxAge < 0 || o.historyMaxSize < 0 {
		return errors.New("invalid --history-max-age or --history-max-size: must not be negative (0 means no limit)")
	}
	if o.parseLimit < 0 {
		return errors.New("invalid --parse-limit: must not be negative")
	}
	if o.maxRequestBody < 0 {
		return errors.New("invalid --max-request-body: must not be negative (0 means no limit)")
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("invalid TLS settings: give both --tls-cert and --tls-key, or neither")
	}
	for name, d := range map[string]time.Duration{"--shutdown-grace": o.shutdownGrace, "--turn-idle-timeout": o.toolTimeout, "--session-idle-timeout": o.sessionTimeout} {
		if d <= 0 {
			return fmt.Errorf("invalid %s %s: must be positive", name, d)
		}
	}
	for name, addr := range map[string]string{"--listen": o.listen, "--metrics-listen": o.metricsListen} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return fmt.Errorf("invalid %s %q: want HOST:PORT such as 127.0.0.1:8787 (port 0 picks a free one)", name, addr)
		}
	}
	if _, err := ui.ParseTraceUI(o.uiURL); err != nil {
		return err
	}
	if err := o.teams.validate(); err != nil {
		return err
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", o.logLevel)
	}
	return nil
}
