package budget

import (
	"net/http"
	"sync"

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

// Enforcer is a proxy.Gate that refuses the new prompts of people whose budget, or whose team's,
// is spent, and lets everything else through: the requests of turns already running, of
// subagents, and of everyone else. Its methods are safe for concurrent use. The zero value is
// not usable; call NewEnforcer.
type Enforcer struct {
	budgets func() *Budgets
	ledger  *Ledger
	fast    func(*wire.Identity) bool
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
// from with its headers alone, when it can (identity.Resolver.ResolveFast); refused, when not
// nil, is told of every refusal.
func NewEnforcer(budgets func() *Budgets, ledger *Ledger, fast func(*wire.Identity) bool, refused func(scope, window string)) *Enforcer {
	return &Enforcer{budgets: budgets, ledger: ledger, fast: fast, refused: refused, learned: map[learnKey]person{}}
}

// Learn remembers who a resolved request was from (its Identity with User and Team set), so that
// later requests with the same header and credential are known on the forwarding path.
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

// who returns the person and team a request is from, as far as the forwarding path can tell.
func (e *Enforcer) who(id wire.Identity) (user, team string, ok bool) {
	e.mu.RLock()
	w, ok := e.learned[learnKey{id.Header, id.Credential}]
	e.mu.RUnlock()
	if ok {
		return w.user, w.team, true
	}
	if e.fast != nil && e.fast(&id) {
		return id.User, id.Team, true
	}
	return "", "", false
}

// Hold implements proxy.Gate: it holds the requests of people whose budget (or their team's) is
// spent. That is a map lookup and a sum over a few slots: it runs for every request.
func (e *Enforcer) Hold(req *wire.Request) bool {
	user, team, ok := e.who(req.Identity)
	if !ok {
		return false
	}
	_, over := e.ledger.Over(e.budgets(), user, team)
	return over
}

// Refuse implements proxy.Gate: a held request that opens a new turn (instrument.OpensTurn) is
// answered with an error naming the budget; any other (tool results, a subagent, a retry of a
// running turn, a title) is forwarded.
func (e *Enforcer) Refuse(req *wire.Request, body []byte) *proxy.Refusal {
	user, team, ok := e.who(req.Identity)
	if !ok {
		return nil
	}
	exceeded, over := e.ledger.Over(e.budgets(), user, team)
	if !over {
		return nil
	}
	decoded, err := wire.ParseBody(body, req.ContentEncoding)
	if err != nil {
		return nil
	}
	probe := *req
	probe.Body = decoded
	if !instrument.OpensTurn(&probe) {
		return nil
	}
	if e.refused != nil {
		e.refused(exceeded.Scope, exceeded.Window)
	}
	return &proxy.Refusal{Status: RefusalStatus, Type: RefusalType, Message: exceeded.Message()}
}
