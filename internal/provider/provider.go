// Package provider connects cctrace to the service that serves Claude: the Anthropic API, Google
// Vertex AI, Amazon Bedrock or Microsoft Foundry. For each it knows the default upstream, which
// upstream a request's path goes to, and how to authenticate the request on its way out:
// Claude Code in a cloud mode behind a gateway (CLAUDE_CODE_SKIP_{VERTEX,BEDROCK,FOUNDRY}_AUTH)
// sends no credentials of its own, so cctrace adds them from the cloud's standard credential
// chain. Credentials never reach a log line, a span, a metric or a file: errors name the
// provider and the fix, never a secret.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Config says which provider to reach and how. The zero value is the Anthropic API at its
// default URL.
type Config struct {
	Provider wire.Provider
	// Upstream is the base URL every request goes to; empty for the provider's default (see
	// DefaultUpstream).
	Upstream string
	// Region is the cloud region: Vertex AI's location (Claude Code's CLOUD_ML_REGION; "global"
	// for the global endpoint), Bedrock's AWS region (empty: the AWS configuration's, e.g.
	// AWS_REGION).
	Region string
	// FoundryResource is the Microsoft Foundry resource name, the host's first label in
	// https://{resource}.services.ai.azure.com.
	FoundryResource string
	// FoundryAPIKey is the Foundry resource's key; empty to authenticate with Microsoft Entra ID
	// (azidentity's default credential chain).
	FoundryAPIKey string
	// Logger receives the one warning per failure kind and minute that credentials could not be
	// had or were refused. Default slog.Default().
	Logger *slog.Logger
}

// Upstream is a configured provider: where requests go and how they are authenticated. Build it
// with New. It is safe for concurrent use.
type Upstream struct {
	provider     wire.Provider
	base         *url.URL // every request, or Bedrock's /model/… requests
	controlPlane *url.URL // Bedrock's other requests (inference profiles); nil: base
	auth         authorizer
	log          *slog.Logger
	warn         warnLimiter
}

// authorizer adds one provider's credentials to outgoing requests.
type authorizer interface {
	// authorize adds credentials to r. It may read r's body whole and replace it (to sign it).
	authorize(r *http.Request) error
	// check obtains a credential once and describes where it came from, without the secret.
	check(ctx context.Context) (string, error)
	// fix says what to do when credentials are missing or refused.
	fix() string
}

// regionPattern is what a region may look like; it becomes part of a host name.
var regionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// New resolves cfg: the upstream URLs and the credential chain. It does not fetch a credential
// (Check does): cctrace starts without one and says so, and the requests that cannot be
// authenticated are answered with an error the client shows.
func New(ctx context.Context, cfg Config) (*Upstream, error) {
	u := &Upstream{provider: cfg.Provider, log: cfg.Logger}
	if u.log == nil {
		u.log = slog.Default()
	}
	var err error
	switch cfg.Provider {
	case wire.ProviderAnthropic:
	case wire.ProviderVertex:
		u.auth = newVertexAuth()
	case wire.ProviderBedrock:
		var b *bedrockAuth
		if b, err = newBedrockAuth(ctx, cfg.Region); err != nil {
			return nil, err
		}
		if b.region == "" {
			// SigV4 signs for a region, whichever URL the requests go to.
			return nil, errors.New("bedrock: no AWS region: set --region, AWS_REGION or a profile's region")
		}
		cfg.Region = b.region
		u.auth = b
	case wire.ProviderFoundry:
		u.auth, err = newFoundryAuth(cfg.FoundryAPIKey)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown provider %v", cfg.Provider)
	}
	if cfg.Upstream != "" {
		if u.base, err = parseBase(cfg.Upstream); err != nil {
			return nil, fmt.Errorf("invalid --upstream: %w", err)
		}
		return u, nil
	}
	runtime, control, err := DefaultUpstream(cfg)
	if err != nil {
		return nil, err
	}
	u.base, _ = url.Parse(runtime)
	if control != "" {
		u.controlPlane, _ = url.Parse(control)
	}
	return u, nil
}

// DefaultUpstream returns a provider's default upstream base URL and, for Bedrock, the control
// plane's (the inference-profile listing Claude Code asks for at start-up):
//
//	anthropic  https://api.anthropic.com
//	vertex     https://{region}-aiplatform.googleapis.com (https://aiplatform.googleapis.com for "global")
//	bedrock    https://bedrock-runtime.{region}.amazonaws.com, https://bedrock.{region}.amazonaws.com
//	foundry    https://{resource}.services.ai.azure.com
func DefaultUpstream(cfg Config) (runtime, controlPlane string, err error) {
	region := strings.ToLower(strings.TrimSpace(cfg.Region))
	switch cfg.Provider {
	case wire.ProviderVertex:
		switch {
		case region == "":
			return "", "", errors.New("vertex: no region: set --region or CLOUD_ML_REGION (as for Claude Code), e.g. us-east5 or global")
		case !regionPattern.MatchString(region):
			return "", "", fmt.Errorf("vertex: invalid region %q", cfg.Region)
		case region == "global":
			return "https://aiplatform.googleapis.com", "", nil
		}
		return "https://" + region + "-aiplatform.googleapis.com", "", nil
	case wire.ProviderBedrock:
		switch {
		case region == "":
			return "", "", errors.New("bedrock: no AWS region: set --region, AWS_REGION or a profile's region")
		case !regionPattern.MatchString(region):
			return "", "", fmt.Errorf("bedrock: invalid region %q", cfg.Region)
		}
		return "https://bedrock-runtime." + region + ".amazonaws.com", "https://bedrock." + region + ".amazonaws.com", nil
	case wire.ProviderFoundry:
		res := strings.ToLower(strings.TrimSpace(cfg.FoundryResource))
		switch {
		case res == "":
			return "", "", errors.New("foundry: no resource: set --foundry-resource or ANTHROPIC_FOUNDRY_RESOURCE (as for Claude Code), or --upstream")
		case !regionPattern.MatchString(res):
			return "", "", fmt.Errorf("foundry: invalid resource name %q", cfg.FoundryResource)
		}
		return "https://" + res + ".services.ai.azure.com", "", nil
	default:
		return "https://api.anthropic.com", "", nil
	}
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want an http:// or https:// base URL", redacted(raw))
	}
	return u, nil
}

// redacted shows a URL without any password in it.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparseable URL)"
}

// Provider returns the provider requests go to.
func (u *Upstream) Provider() wire.Provider { return u.provider }

// URL returns the upstream base URL (Bedrock's runtime endpoint).
func (u *Upstream) URL() *url.URL { c := *u.base; return &c }

// Route returns the upstream base URL for a request path: Bedrock's control plane for anything
// but /model/… when cctrace chose the upstreams itself, and URL otherwise. The path only picks
// between the configured URLs; a request cannot name a host.
func (u *Upstream) Route(path string) *url.URL {
	if u.controlPlane != nil && !strings.HasPrefix(path, "/model/") {
		return u.controlPlane
	}
	return u.base
}

// Transport returns base wrapped to authenticate every request for the provider: it removes the
// credentials the client sent (Claude Code's placeholders) and adds the provider's. For the
// Anthropic API it returns base: the client's own key goes through as sent.
func (u *Upstream) Transport(base http.RoundTripper) http.RoundTripper {
	if u.auth == nil {
		return base
	}
	return &authTransport{u: u, base: base}
}

// ReplacesCredentials reports whether cctrace authenticates to the provider itself, removing
// what the client sent: in a cloud mode a client's credential is a placeholder (Claude Code's
// "Bearer skip-foundry-auth", for one), the same for everyone, and tells nobody apart.
func (u *Upstream) ReplacesCredentials() bool { return u.auth != nil }

// Check obtains a credential once, as the first request would, and describes where it came from
// (never the secret). For the Anthropic API there is nothing to check.
func (u *Upstream) Check(ctx context.Context) (string, error) {
	if u.auth == nil {
		return "", nil
	}
	desc, err := u.auth.check(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w; %s", u.provider, err, u.auth.fix())
	}
	return desc, nil
}

// clientCredentials are the headers by which a client may send credentials of its own. In a
// cloud mode they are removed: Claude Code sends placeholders (Foundry: "Bearer
// skip-foundry-auth"), and the upstream must see only cctrace's.
var clientCredentials = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Amz-Security-Token", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Goog-Api-Key"}

// authTransport authenticates each request before sending it.
type authTransport struct {
	u    *Upstream
	base http.RoundTripper
}

// RoundTrip sends r with the provider's credentials. When it cannot have them, it answers
// itself with a 401 in the Anthropic API's error shape, which Claude Code shows, marked not to be
// retried; a 401 or 403 from the upstream goes back to the client as it came, with a warning in
// cctrace's log.
func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	for _, h := range clientCredentials {
		out.Header.Del(h)
	}
	if err := t.u.auth.authorize(out); err != nil {
		var body *bodyError
		if errors.As(err, &body) {
			// Reading the client's body failed (or it passed the size limit): not a credential
			// problem, and the proxy knows how to answer it.
			return nil, body.err
		}
		msg := fmt.Sprintf("cctrace: no %s credentials for the upstream: %v; %s", t.u.provider, err, t.u.auth.fix())
		t.u.warn.do(t.u.log, "credentials", "cannot authenticate to the upstream", "provider", t.u.provider.String(), "path", r.URL.Path, "error", err.Error(), "fix", t.u.auth.fix())
		return authErrorResponse(r, msg), nil
	}
	resp, err := t.base.RoundTrip(out)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.u.warn.do(t.u.log, "refused", "the upstream refused cctrace's credentials", "provider", t.u.provider.String(), "path", r.URL.Path, "status", resp.StatusCode, "fix", t.u.auth.fix())
	}
	return resp, err
}

// bodyError is a failure to read the request body an authorizer needed whole.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// authErrorResponse is cctrace's own answer when it cannot authenticate a request: an
// Anthropic-style authentication_error (Claude Code prints its message), with x-should-retry:
// false so that the client does not retry what cannot succeed.
func authErrorResponse(r *http.Request, msg string) *http.Response {
	body, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": "authentication_error", "message": msg},
	})
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Should-Retry", "false")
	return &http.Response{
		Status:        "401 Unauthorized",
		StatusCode:    http.StatusUnauthorized,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

// warnInterval is the least time between two warnings of one kind: a client retrying a refused
// request must not flood the log.
const warnInterval = time.Minute

// warnLimiter logs at most one warning of each kind per warnInterval, counting the ones it held
// back.
type warnLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

func (w *warnLimiter) do(log *slog.Logger, kind, msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if w.last == nil {
		w.last, w.held = make(map[string]time.Time), make(map[string]int)
	}
	if last, ok := w.last[kind]; ok && now.Sub(last) < warnInterval {
		w.held[kind]++
		w.mu.Unlock()
		return
	}
	held := w.held[kind]
	w.last[kind], w.held[kind] = now, 0
	w.mu.Unlock()
	if held > 0 {
		args = append(args, "not_logged_since_last", held)
	}
	log.Warn(msg, args...)
}

// CloseIdleConnections closes the idle connections of the transport underneath.
func (t *authTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
