package budget

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/proxy"
)

// RefusalStatus and RefusalType are how a refused prompt is answered: Claude Code 2.1.328 shows
// a 402 billing_error at once as "API Error: 402 <message>" and does not retry it (docs/wire.md
// records what it does with the other statuses tried).
const (
	RefusalStatus = http.StatusPaymentRequired
	RefusalType   = "billing_error"
)

// maxLearned bounds the identities an Enforcer remembers the person of.
const maxLearned = 10000

// heldDecodeWait bounds how long a held request waits for its body to be decoded; past it the
// request is forwarded.
const heldDecodeWait = 10 * time.Second

// Enforcer is a proxy.Gate that refuses the new prompts of people whose budget, or whose team's,
// is spent, and lets everything else through: the requests of turns already running, of
// subagents, and of everyone else. Its methods are safe for concurrent use. The zero value is
// not usable; call NewEnforcer.
type Enforcer struct {
	budgets func() *Budgets
	ledger  *Ledger
	fast    func(*wire.Identity) bool
	decode  func(context.Context, *wire.Request, []byte) error
	refused func(scope, window string)

	mu sync.RWMutex
	// learned maps what the proxy sees of a request (identity header and credential
	// fingerprint) to the person the pipeline attributed it to, which may need the body (an
	// account uuid) or a directory lookup the forwarding path does not make.
	learned map[learnKey]person
}

type learnKey struct{ header, credential string }

type person struct{ user, team string }

var _ proxy.Gate = (*Enforcer)(nil)

// NewEnforcer returns an Enforcer of the budgets budgets() returns (read at each decision, so a
// reloaded file takes effect at once) against what ledger counted. fast settles who a request is
// from with its headers alone, when it can (identity.Resolver.ResolveFast). decode decodes a held
// request's body (req.Body) off the forwarding path and returns once it has, or with ctx's error
// (pipeline.Pipeline.Decode). refused, when not nil, is told of every refusal.
func NewEnforcer(budgets func() *Budgets, ledger *Ledger, fast func(*wire.Identity) bool,
	decode func(context.Context, *wire.Request, []byte) error, refused func(scope, window string)) *Enforcer {
	return &Enforcer{budgets: budgets, ledger: ledger, fast: fast, decode: decode, refused: refused, learned: map[learnKey]person{}}
}

// Learn remembers who a request the forwarding path could not place was from (its Identity with
// User and Team set, as the pipeline resolved it), so that later requests with the same header
// and credential are known there. It is how the pipeline tells the forwarding path who is who.
func (e *Enforcer) Learn(id wire.Identity) {
	if id.User == "" || (id.Header == "" && id.Credential == "") {
		return
	}
	k := learnKey{id.Header, id.Credential}
	who := person{id.User, id.Team}
	e.mu.RLock()
	same := e.learned[k] == who
	e.mu.RUnlock()
	if same {
		return
	}
	e.mu.Lock()
	if len(e.learned) >= maxLearned {
		// Forget everyone rather than track recency: the next request of each is learned again.
		clear(e.learned)
	}
	e.learned[k] = who
	e.mu.Unlock()
}

// who returns the person and team a request is from, as far as the forwarding path can tell:
// req.Identity's, settled there from the headers when they suffice (and then kept in it, so that
// the pipeline does not resolve it again), else as learned from the pipeline.
func (e *Enforcer) who(req *wire.Request) (user, team string, ok bool) {
	id := &req.Identity
	if id.User != "" || (e.fast != nil && e.fast(id)) {
		return id.User, id.Team, true
	}
	e.mu.RLock()
	w, ok := e.learned[learnKey{id.Header, id.Credential}]
	e.mu.RUnlock()
	return w.user, w.team, ok
}

// Hold implements proxy.Gate: it holds the requests of people whose budget (or their team's) is
// spent. That is a map lookup and a sum over a few slots: it runs for every request.
func (e *Enforcer) Hold(req *wire.Request) bool {
	user, team, ok := e.who(req)
	if !ok {
		return false
	}
	_, over := e.ledger.Over(e.budgets(), user, team)
	return over
}

// Refuse implements proxy.Gate: a held request that opens a new turn (instrument.OpensTurn) is
// answered with an error naming the budget; any other (tool results, a subagent, a retry of a
// running turn, a title) is forwarded, as is one whose body could not be decoded in time.
func (e *Enforcer) Refuse(ctx context.Context, req *wire.Request, body []byte) *proxy.Refusal {
	user, team, ok := e.who(req)
	if !ok {
		return nil
	}
	exceeded, over := e.ledger.Over(e.budgets(), user, team)
	if !over {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, heldDecodeWait)
	defer cancel()
	if err := e.decode(ctx, req, body); err != nil || !instrument.OpensTurn(req) {
		return nil
	}
	if e.refused != nil {
		e.refused(exceeded.Scope, exceeded.Window)
	}
	return &proxy.Refusal{Status: RefusalStatus, Type: RefusalType, Message: exceeded.Message()}
}
