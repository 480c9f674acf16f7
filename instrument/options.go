package instrument

import (
	"math/rand/v2"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Option configures a Tracker.
type Option func(*config)

type config struct {
	idSource       func() uint64
	toolTimeout    time.Duration
	errorTimeout   time.Duration
	sessionTimeout time.Duration
	maxSessions    int
	adoptWindow    time.Duration
	capture        bool
	scrub          func(string) string
	price          func(model string, u wire.Usage) (usd float64, ok bool) // nil: none
	replica        bool
	joinClient     bool
	inFlight       InFlightStore // nil: turns in flight end at Close
}

// AdoptWindow is how long a side request that arrives while no turn is open (a title, a
// count_tokens call, or a request whose body was not decoded) waits for the next turn to adopt
// it before its span is emitted as a trace of its own.
const AdoptWindow = 10 * time.Second

func defaultConfig() config {
	return config{
		idSource:       rand.Uint64,
		toolTimeout:    30 * time.Minute,
		errorTimeout:   5 * time.Minute,
		sessionTimeout: 2 * time.Hour,
		maxSessions:    10000,
		adoptWindow:    AdoptWindow,
		scrub:          func(s string) string { return s },
	}
}

// WithIDSource sets where trace and span ids come from. Default: math/rand/v2's global source,
// which is seeded randomly. Tests pass a seeded source for stable ids.
func WithIDSource(next func() uint64) Option {
	return func(c *config) { c.idSource = next }
}

// WithToolTimeout sets how long a turn waits for the next request after a response that asked
// for tools before it is ended as "idle_timeout" ("handed_off" with WithReplica). Default 30
// minutes (long builds and tests run as tools).
func WithToolTimeout(d time.Duration) Option {
	return func(c *config) { c.toolTimeout = d }
}

// WithErrorTimeout sets how long a turn waits for a retry after a failed request before it is
// ended as "error" ("handed_off" with WithReplica). Default 5 minutes.
func WithErrorTimeout(d time.Duration) Option {
	return func(c *config) { c.errorTimeout = d }
}

// WithSessionTimeout sets how long a session may stay idle before its state is dropped and its
// open spans end as "evicted". Default 2 hours.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) { c.sessionTimeout = d }
}

// WithMaxSessions bounds the sessions held at once; beyond it the least recently seen session is
// evicted. Default 10000.
func WithMaxSessions(n int) Option {
	return func(c *config) { c.maxSessions = n }
}

// WithContentCapture turns on previews of prompts, tool inputs and tool results on spans, each
// passed through scrub (which should remove secrets) first. Default off: no content leaves the
// tracker.
func WithContentCapture(scrub func(string) string) Option {
	return func(c *config) {
		c.capture = true
		if scrub != nil {
			c.scrub = scrub
		}
	}
}

// WithPricing sets how answers are priced: price returns the estimated USD cost of usage u of
// model, and false when it cannot price that model. Each chat span carries its answer's cost,
// priced by the model requested or, when price does not know it (an alias a gateway maps), by
// the model that answered; turns and subagents carry their totals, and count the answers with
// usage that could not be priced. Default: nothing is priced.
func WithPricing(price func(model string, u wire.Usage) (usd float64, ok bool)) Option {
	return func(c *config) { c.price = price }
}

// WithReplica says the tracker runs in one of several cctrace replicas behind a load balancer
// that keeps each session on one replica while it can. A session moves when its replica stops or
// replicas are added, and the replica it moves to carries the open turn on in the same trace. So
// a turn whose next request does not come here within the turn idle timeout (or the error
// timeout, after a failed or abandoned request), or before shutdown, went on elsewhere: it ends
// as OutcomeHandedOff rather than as an idle timeout, an error, an interruption or a shutdown.
// (A replica cannot tell a session that moved from one that stopped: both end so.) Default off.
func WithReplica() Option { return func(c *config) { c.replica = true } }

// WithJoinClientTrace puts the tracker's spans into the client's own traces, when its requests
// carry a W3C traceparent (Claude Code's tracing with CLAUDE_CODE_PROPAGATE_TRACEPARENT=1 sends
// its llm_request span's): a turn whose first main-chain request carries one takes that trace
// id, its root becomes a child of the span that sent the request, and every chat span whose
// traceparent is in its turn's trace becomes a child of the span that sent it (Span.ClientParent).
// Tool and subagent spans stay under the tracker's own. A turn whose first request's
// traceparent is not sampled (the client records none of that trace) is not joined. A request
// whose traceparent is in another trace, or that has none, is traced as without this option:
// its traceparent is a span link. A client trace takes one turn: a later turn that names it too
// is a trace of its own. Default: off, every turn is a trace of the tracker's own and a
// traceparent is only ever a link, since the client may export its spans to another backend,
// where a joined span would lose its parent.
func WithJoinClientTrace() Option {
	return func(c *config) { c.joinClient = true }
}
