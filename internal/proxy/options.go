package proxy

import (
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
)

// DefaultParseLimit is how many bytes of a body the proxy copies for decoding unless
// WithParseLimit says otherwise. Claude Code requests carry the whole conversation, so a long
// session reaches several MiB; 32 MiB leaves room without letting one exchange hold unbounded
// memory.
const DefaultParseLimit int64 = 32 << 20

// DefaultMaxRequestBody is the largest request body the proxy forwards unless
// WithMaxRequestBody says otherwise. The Messages API itself refuses requests over 32 MB, so no
// request the upstream would accept comes near it; it only stops a runaway client from streaming
// without end through cctrace.
const DefaultMaxRequestBody int64 = 256 << 20

// DefaultCopyBudget is how many bytes of body copies the proxy makes at once unless
// WithCopyBudget says otherwise. Together with the pipeline's decode queue budget (also 6 MiB)
// it bounds what body copies hold, however many clients upload at once. Both are sized for the
// Go collector at its defaults, which lets the heap grow to twice what is live: a burst of large
// uploads then keeps cctrace within its memory target, at the price of some bodies forwarded
// without being decoded.
const DefaultCopyBudget int64 = 6 << 20

// config holds what the options set. Its zero value is not usable: newConfig fills the defaults.
type config struct {
	transport  http.RoundTripper
	logger     *slog.Logger
	parseLimit int64
	maxBody    int64 // 0: no limit
	copyBudget int64 // <= 0: no limit
	now        func() time.Time
	bodies     *bodybuf.Pool
	provider   wire.Provider
	route      func(path string) *url.URL // nil: every request to the upstream New was given
	auth       func(http.RoundTripper) http.RoundTripper
	identify   func(http.Header) wire.Identity // nil: requests are from nobody known
	private    []string                        // request headers meant for cctrace alone
	gate       Gate                            // nil: every request is forwarded
}

// Option configures a Proxy built by New.
type Option func(*config)

func newConfig(opts []Option) config {
	c := config{
		parseLimit: DefaultParseLimit,
		maxBody:    DefaultMaxRequestBody,
		copyBudget: DefaultCopyBudget,
	}
	for _, opt := range opts {
		opt(&c)
	}
	if c.transport == nil {
		c.transport = defaultTransport()
	}
	if c.auth != nil {
		c.transport = c.auth(c.transport)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// WithTransport sets the RoundTripper used to reach the upstream.
//
// The default is a clone of http.DefaultTransport with ForceAttemptHTTP2, TLS certificates
// verified, dial and TLS handshake timeouts, up to 16 idle connections per host, no response
// header timeout (a non-streamed Messages call can take minutes before its headers; the client's
// own timeout governs), and DisableCompression set. A custom transport should set
// DisableCompression too: otherwise, when a client sends no Accept-Encoding, Go's transport asks
// the upstream for gzip and decompresses it, and the client receives a body it did not ask for
// in that form. A nil rt keeps the default.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) { c.transport = rt }
}

// WithLogger sets the logger for upstream failures and proxy errors. Credentials and bodies are
// never logged. The default, and what a nil l means, is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithParseLimit sets how many bytes of a request or response body the proxy copies for the
// Observer. A body longer than n is still forwarded in full; only the copy is dropped, and the
// ParseError of the wire.Request or wire.Response says so. An event stream's copy counts the
// times of its chunks (wire.Response.Chunks) too. Zero or a negative n copies nothing: every
// non-empty body counts as over the limit. The default is DefaultParseLimit (32 MiB).
func WithParseLimit(n int64) Option {
	return func(c *config) { c.parseLimit = n }
}

// WithMaxRequestBody sets the largest request body, in bytes, that the proxy forwards. A request
// whose Content-Length is larger is answered 413 with an Anthropic-style request_too_large error
// and never reaches the upstream; a body without a declared length is cut off once it passes n,
// and the client gets the same 413 if no response has begun. Either way the exchange is still
// reported to the Observer. Zero or a negative n means no limit. The default is
// DefaultMaxRequestBody (256 MiB).
func WithMaxRequestBody(n int64) Option {
	return func(c *config) { c.maxBody = max(n, 0) }
}

// WithCopyBudget bounds the bytes of request and response body copies (see WithParseLimit) that
// the proxy makes at once, across all exchanges. A copy reserves its body's Content-Length,
// rounded up to the size class of the buffer pool it is copied into, from the moment the body
// starts to arrive, or, when the length is unknown, counts the bytes copied so far;
// it stops counting once the Observer has it. A body whose copy does not fit is forwarded in
// full as always, but not copied: the ParseError of its wire.Request or wire.Response says so,
// and a warning is logged at most once a minute. A copy is always made when no other is in
// flight, so one body larger than n is still decoded. Nothing waits for room in the budget.
// Zero or a negative n means no limit. The default is DefaultCopyBudget (6 MiB).
func WithCopyBudget(n int64) Option {
	return func(c *config) { c.copyBudget = n }
}

// WithBodyBuffers sets the pool the proxy takes the buffers of its body copies from. It gives
// back those it lets go of itself (a body over the parse limit or the copy budget, or cut
// short); the ones it hands to the Observer are the Observer's, to give back to the same pool
// once decoded. The default, and what a nil pool means, is a buffer allocated for each copy.
func WithBodyBuffers(pool *bodybuf.Pool) Option {
	return func(c *config) { c.bodies = pool }
}

// WithClock sets the clock that stamps request, header, chunk and end times. The default, and
// what a nil now means, is time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// WithProvider names the service the upstream is, for wire.Request.Provider. The default is
// wire.ProviderAnthropic.
func WithProvider(p wire.Provider) Option {
	return func(c *config) { c.provider = p }
}

// WithRoute sets which upstream base URL a request goes to, by its path: route returns one of a
// fixed set of URLs (Bedrock's runtime and control-plane endpoints), or nil for the upstream
// New was given. The default sends every request to that upstream.
func WithRoute(route func(path string) *url.URL) Option {
	return func(c *config) { c.route = route }
}

// WithUpstreamAuth sets how requests are authenticated on their way out: wrap is given the
// transport (the default or WithTransport's) and returns the RoundTripper the proxy sends with,
// which adds the upstream's credentials. The default, and what a nil wrap means, sends requests
// with the credentials the client sent.
func WithUpstreamAuth(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(c *config) { c.auth = wrap }
}

// WithIdentity sets how the proxy tells who sent a request, from its headers, as it arrives:
// identify may read credentials (to fingerprint them) and must return only what can leave the
// proxy, never a credential. What it returns is the wire.Request's Identity. private names the
// request headers that tell cctrace who is asking (such as the identity header): they are for
// cctrace alone and are not forwarded upstream. Default none.
func WithIdentity(identify func(http.Header) wire.Identity, private ...string) Option {
	return func(c *config) { c.identify, c.private = identify, private }
}

// WithGate sets a Gate that may answer a request itself instead of forwarding it. Default none:
// every request is forwarded.
func WithGate(g Gate) Option { return func(c *config) { c.gate = g } }

// defaultTransport is the transport WithTransport documents.
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = dialUpstream((&net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
	}).DialContext)
	t.ForceAttemptHTTP2 = true
	t.TLSHandshakeTimeout = 10 * time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.ExpectContinueTimeout = time.Second
	t.MaxIdleConns = 100
	// Claude Code runs subagents in parallel, all against the same host.
	t.MaxIdleConnsPerHost = 16
	// Pass Accept-Encoding through as the client sent it, and bodies through as the upstream
	// sent them.
	t.DisableCompression = true
	return t
}
