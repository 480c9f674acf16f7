package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/access"
	"github.com/cctrace/cctrace/internal/budget"
	"github.com/cctrace/cctrace/internal/configfile"
	"github.com/cctrace/cctrace/internal/identity"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// envIdentitySecret holds the fingerprint secret itself, for deployments that pass secrets in
// the environment; --identity-secret-file wins over it.
const envIdentitySecret = "CCTRACE_IDENTITY_SECRET"

// teams is what a shared cctrace adds between the proxy and the sinks: who sent each request,
// what people and teams spent against their budgets, and who may look at the metrics listener.
type teams struct {
	opts         teamOptions
	log          *slog.Logger
	fingerprints *identity.Fingerprinter
	resolver     *identity.Resolver
	directory    *configfile.Watched[*identity.Directory] // nil without --directory
	budgets      *configfile.Watched[*budget.Budgets]     // nil without --budgets
	access       *configfile.Watched[*access.File]        // nil without --access-file
	ledger       *budget.Ledger
	enforcer     *budget.Enforcer        // nil unless --enforce-budgets
	pipe         *pipeline.Pipeline      // decodes what the enforcer holds; set once built
	spendSource  *budget.PrometheusSpend // nil without --budget-spend-prometheus
	metricsToken []byte                  // sha256 of --metrics-token-file's token; nil: none
	// notes are logged once cctrace listens (logStart): a failure to start says so first.
	notes []func()
	// named is set once a request names its person in the identity header.
	named atomic.Bool
}

// newTeams loads the files of o (a file refused at start is an error: cctrace does not run with
// nobody known, no budget or no access list in force) and builds what uses them.
func newTeams(o teamOptions, m *metrics.Metrics, log *slog.Logger) (*teams, error) {
	t := &teams{opts: o, log: log, ledger: budget.NewLedger(nil)}
	secret, err := t.fingerprintSecret()
	if err != nil {
		return nil, err
	}
	if t.fingerprints, err = identity.NewFingerprinter(secret); err != nil {
		return nil, err
	}
	watch := []configfile.Option{configfile.WithLogger(log), configfile.WithReport(m.ConfigLoaded)}
	if o.directory != "" {
		if t.directory, err = configfile.Load(o.directory, "directory", identity.ParseDirectory, watch...); err != nil {
			return nil, fmt.Errorf("loading --directory: %w", err)
		}
	}
	if o.budgets != "" {
		if t.budgets, err = configfile.Load(o.budgets, "budgets", budget.Parse, watch...); err != nil {
			return nil, fmt.Errorf("loading --budgets: %w", err)
		}
	}
	if o.accessFile != "" {
		if t.access, err = configfile.Load(o.accessFile, "access", access.Parse, watch...); err != nil {
			return nil, fmt.Errorf("loading --access-file: %w", err)
		}
	}
	if o.metricsTokenFile != "" {
		b, err := os.ReadFile(o.metricsTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading --metrics-token-file: %w", err)
		}
		t.metricsToken = access.TokenSHA256(string(b))
	}
	if o.spendPrometheus != "" {
		if t.spendSource, err = budget.NewPrometheusSpend(o.spendPrometheus); err != nil {
			return nil, fmt.Errorf("invalid --budget-spend-prometheus: %w", err)
		}
	}
	order, err := identity.ParseOrder(o.identityOrder)
	if err != nil {
		return nil, err
	}
	t.resolver = identity.NewResolver(order, t.currentDirectory)
	if o.enforceBudgets {
		t.enforcer = budget.NewEnforcer(t.currentBudgets, t.ledger, t.resolver.ResolveFast, t.decode, m.BudgetRefused)
		t.notes = append(t.notes, func() {
			log.Warn("budgets are enforced: a person whose budget (or whose team's) is spent gets an error instead of a new turn",
				"budgets", o.budgets)
		})
	}
	return t, nil
}

// fingerprintSecret returns the secret credential fingerprints are keyed with: --identity-secret-
// file, else CCTRACE_IDENTITY_SECRET, else the one kept in the state directory (made there the
// first time). Without a usable state directory it makes one for this run only, and says that
// fingerprints will differ after a restart.
func (t *teams) fingerprintSecret() ([]byte, error) {
	o := t.opts
	if secret, given, err := givenSecret(o); given {
		return secret, err
	}
	if o.stateDir != "" {
		secret, created, err := identity.StateSecret(o.stateDir)
		if err == nil {
			if created {
				t.note(slog.LevelInfo, "generated the secret credential fingerprints are keyed with; keep it to keep fingerprints across restarts",
					"file", filepath.Join(o.stateDir, identity.SecretFileName))
			}
			return secret, nil
		}
		t.note(slog.LevelWarn, "cannot keep a fingerprint secret in the state directory", "dir", o.stateDir, "error", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("generating a fingerprint secret: %w", err)
	}
	t.note(slog.LevelWarn, "credential fingerprints are keyed with a secret for this run only: they change when cctrace restarts; give --identity-secret-file or a writable --state-dir")
	return []byte(hex.EncodeToString(raw[:])), nil
}

// givenSecret returns the fingerprint secret the options or the environment give: the file of
// --identity-secret-file, else CCTRACE_IDENTITY_SECRET. given is false when neither does; the
// secret is then the one kept in the state directory.
func givenSecret(o teamOptions) (secret []byte, given bool, err error) {
	if o.identitySecretFile != "" {
		secret, err = identity.LoadSecret(o.identitySecretFile)
		return secret, true, err
	}
	v := os.Getenv(envIdentitySecret)
	if v == "" {
		return nil, false, nil
	}
	if len(v) < identity.MinSecretBytes {
		return nil, true, fmt.Errorf("%s: %d bytes, want at least %d", envIdentitySecret, len(v), identity.MinSecretBytes)
	}
	return []byte(v), true, nil
}

// stateDir is where cctrace keeps what must outlive it (the fingerprint secret, the logs of
// cctrace run): $XDG_STATE_HOME/cctrace, else ~/.local/state/cctrace; "" when neither is known.
// getenv reads the environment.
func stateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) { // the XDG spec says to ignore a relative path
		return filepath.Join(d, "cctrace")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		return filepath.Join(home, ".local", "state", "cctrace")
	}
	return ""
}

// note keeps a message about the fingerprint secret for logStart; a private cctrace (run, demo)
// logs it at debug level only.
func (t *teams) note(level slog.Level, msg string, args ...any) {
	if t.opts.private {
		level = slog.LevelDebug
	}
	t.notes = append(t.notes, func() { t.log.Log(context.Background(), level, msg, args...) })
}

// logStart logs what starting found worth saying, once cctrace listens.
func (t *teams) logStart() {
	for _, note := range t.notes {
		note()
	}
	t.notes = nil
}

func (t *teams) currentDirectory() *identity.Directory {
	if t.directory == nil {
		return nil
	}
	return t.directory.Current()
}

func (t *teams) currentBudgets() *budget.Budgets {
	if t.budgets == nil {
		return nil
	}
	return t.budgets.Current()
}

func (t *teams) currentAccess() *access.File {
	if t.access == nil {
		return nil
	}
	return t.access.Current()
}

// identify reads who sent a request from its headers, on the forwarding path: the identity
// header, bounded and cleaned, and, when clientCredentials, the credential's fingerprint. The
// credential goes no further.
func (t *teams) identify(h http.Header, clientCredentials bool) wire.Identity {
	var id wire.Identity
	if t.opts.identityHeader != "" {
		if v := h.Get(t.opts.identityHeader); v != "" {
			id.Header = identity.CleanValue(v)
		}
	}
	if clientCredentials {
		id.Credential = t.fingerprints.Credential(h)
	}
	return id
}

// resolve attributes a decoded request to a person and team, before the tracker sees it, unless
// the budget gate did so from its headers already.
func (t *teams) resolve(req *wire.Request) {
	if req.Identity.User != "" {
		return
	}
	account := ""
	if req.Body != nil {
		account = req.Body.AccountUUID
	}
	req.Identity.Account = t.fingerprints.LimitAccount(account, req.Identity.Credential)
	// The forwarding path cannot read the account (it is in the body): what the account decided
	// is not learned under the header and credential, which may be anyone's (a placeholder).
	src := t.resolver.Resolve(&req.Identity, account)
	if src == identity.SourceHeader && !t.named.Load() {
		t.named.Store(true)
	}
	if t.enforcer != nil && src != identity.SourceAccount {
		t.enforcer.Learn(req.Identity)
	}
}

// people reports whether cctrace tells people apart: it was given a directory, budgets or
// access control, or a request named its person in the identity header. Until then the turns
// page shows neither people nor spend: one person's key fingerprint is nobody's name.
func (t *teams) people() bool {
	return t.directory != nil || t.budgets != nil || t.opts.accessControl() || t.named.Load()
}

// decode decodes a request the budget gate holds, in the pipeline (set once the stack is built).
func (t *teams) decode(ctx context.Context, req *wire.Request, body []byte) error {
	return t.pipe.Decode(ctx, req, body)
}

// spend is what people and teams spent, with their budgets, for the turns page and /api/turns.
func (t *teams) spend() summary.Spend {
	b := t.currentBudgets()
	return summary.Spend{People: t.ledger.Totals(budget.ScopePerson, b), Teams: t.ledger.Totals(budget.ScopeTeam, b)}
}

// proxyOptions are the proxy's options for identities and enforcement. clientCredentials is
// false when the provider replaces the client's credentials (provider.Upstream's
// ReplacesCredentials): those are placeholders, the same for everyone, and identify no one.
func (t *teams) proxyOptions(clientCredentials bool) []proxy.Option {
	identify := func(h http.Header) wire.Identity { return t.identify(h, clientCredentials) }
	var private []string
	if t.opts.identityHeader != "" {
		private = append(private, t.opts.identityHeader)
	}
	opts := []proxy.Option{proxy.WithIdentity(identify, private...)}
	if t.enforcer != nil {
		opts = append(opts, proxy.WithGate(t.enforcer))
	}
	return opts
}

// guard puts access control in front of the metrics listener's handler, when it is on.
func (t *teams) guard(h http.Handler) http.Handler {
	if !t.opts.accessControl() {
		return h
	}
	return access.NewGuard(h, t.currentAccess, access.Trusted{
		UserHeader: t.opts.trustedUserHeader,
		TeamHeader: t.opts.trustedTeamHeader,
		RoleHeader: t.opts.trustedRoleHeader,
	}, t.metricsToken)
}

// run rereads the files that changed until ctx is done.
func (t *teams) run(ctx context.Context, wg *sync.WaitGroup) {
	runs := []func(context.Context){watcher(t.directory), watcher(t.budgets), watcher(t.access)}
	if t.spendSource != nil {
		runs = append(runs, func(ctx context.Context) {
			budget.RunSeeding(ctx, t.spendSource, t.ledger, budget.DefaultSeedInterval, t.log)
		})
	}
	for _, run := range runs {
		if run == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
}

// watcher returns w's Run, nil for no file.
func watcher[T any](w *configfile.Watched[T]) func(context.Context) {
	if w == nil {
		return nil
	}
	return w.Run
}
