// Package limits is the sink of what every answer says of its account's limits: a
// subscription's windows (5h, 7d, …) and an API key's headroom by kind, as gauges per account;
// the API's refusals, its own limit (429) told apart from its capacity (529); and, since cctrace
// sees every request of every session of an account, each session's and each turn's share of a
// window's growth (docs/limits.md).
//
// Accounts are the keyed fingerprints identity derives (wire.Identity.Account): an account's id
// or credential never reaches a label. Labels come from capped sets: the account (beyond the cap,
// "other"), the window or kind as the API names it (capped), the status, the refusal.
package limits

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/metrics"
)

// Reading is one account's window (or API-key kind) as one answer reported it. The zero value
// reports nothing.
type Reading struct {
	Account string    // the account's fingerprint (wire.Identity.Account)
	Window  string    // "5h", "7d", …; for an API key the kind: "requests", "tokens", …
	At      time.Time // when the answer's headers arrived
	// Utilization is the share of the window used, 0..1; for an API key's kind, the share of its
	// limit used (1 - remaining/limit).
	Utilization float64
	Reset       time.Time // when the window starts over; zero when not reported
	Status      string    // "allowed", "allowed_warning", "rejected"; empty for API keys
}

// Share is a part of a window's growth apportioned to the requests of one session and turn: the
// rise of the window's utilization between two answers of the account, split among the requests
// that ended between them (docs/limits.md). The zero value apportions nothing.
type Share struct {
	Account   string
	Window    string
	SessionID string
	TraceID   string // the turn's trace, 32 hex digits; empty for none
	User      string
	At        time.Time // the answer whose reading showed the growth
	Growth    float64   // in units of the window: 0.01 is 1% of it
}

// Recorder keeps readings and shares beyond the process (internal/history). Its methods are
// called on the tracker's goroutine, with the sink's lock held: they must return at once.
type Recorder interface {
	Reading(Reading)
	Share(Share)
}

// Sink is an instrument.Sink that reads the limits of every chat span's answer. Its methods are
// safe for concurrent use. The zero value is not usable; call New.
type Sink struct {
	mu       sync.Mutex
	m        *metricSet
	rec      Recorder
	accounts map[string]*account
	sessions map[string]*session
	turns    map[instrument.TraceID]*turn
	maxKept  int
}

var _ instrument.Sink = (*Sink)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	maxAccounts int
	maxKept     int
	rec         Recorder
}

// DefaultMaxAccounts is the default of WithMaxAccounts.
const DefaultMaxAccounts = 100

// WithMaxAccounts bounds the distinct values of the account label: later accounts count as
// "other" (and in cctrace_label_overflow_total{label="account"} when New is given the metrics).
// Default DefaultMaxAccounts; n must be at least 1.
func WithMaxAccounts(n int) Option { return func(c *config) { c.maxAccounts = max(n, 1) } }

// WithMaxTracked bounds the sessions and the turns whose shares the sink keeps in memory for
// the status line and the turn histogram; the least recently seen go first. Default 10000.
func WithMaxTracked(n int) Option { return func(c *config) { c.maxKept = max(n, 1) } }

// WithRecorder hands every reading that changed and every share to r. Default: none.
func WithRecorder(r Recorder) Option { return func(c *config) { c.rec = r } }

// New registers the limit metrics on reg and returns the sink. The account and window labels
// past their caps count in the overflow counter of mt (cctrace_label_overflow_total), when it
// is not nil.
func New(reg prometheus.Registerer, mt *metrics.Metrics, opts ...Option) (*Sink, error) {
	c := config{maxAccounts: DefaultMaxAccounts, maxKept: 10000}
	for _, o := range opts {
		o(&c)
	}
	accounts, windows := metrics.NewCappedLabel(c.maxAccounts), metrics.NewCappedLabel(maxWindowLabels)
	if mt != nil {
		accounts, windows = mt.CappedLabel("account", c.maxAccounts), mt.CappedLabel("window", maxWindowLabels)
	}
	m, err := newMetricSet(reg, accounts, windows)
	if err != nil {
		return nil, err
	}
	return &Sink{
		m: m, rec: c.rec, maxKept: c.maxKept,
		accounts: make(map[string]*account),
		sessions: make(map[string]*session),
		turns:    make(map[instrument.TraceID]*turn),
	}, nil
}

// account is what the sink keeps of one account: its latest reading and the requests whose
// usage no reading has shown yet.
type account struct {
	id      string
	at      time.Time // header time of the latest reading
	latest  *wire.RateLimit
	windows map[string]windowState
	// pending are the answered requests since the latest reading, oldest first: their usage
	// shows in the next one.
	pending []contribution
	// written is what was last handed to the recorder per window, to write changes only.
	written map[string]Reading
	seen    time.Time
}

type windowState struct {
	util  float64
	reset time.Time
}

// contribution is one answered request, weighted by what it cost.
type contribution struct {
	session, user string
	trace         instrument.TraceID
	end           time.Time
	cost          float64
	tokens        int
}

// session is a session's account and its share of each window's growth.
type session struct {
	account string
	shares  map[string]float64
	seen    time.Time
}

// turn is a turn's share of each window's growth, until it is settled.
type turn struct {
	account string
	shares  map[string]float64
	ended   time.Time // zero while the turn runs
	seen    time.Time
}

// maxPending bounds the requests an account keeps between two readings: an account whose answers
// stop carrying readings must not grow without bound.
const maxPending = 4096

// SpanStarted does nothing: answers end spans.
func (s *Sink) SpanStarted(*instrument.Span) {}

// SessionsActive does nothing.
func (s *Sink) SessionsActive(int) {}

// SpanEnded reads the answer of a chat span, and settles the shares of a turn that ended.
func (s *Sink) SpanEnded(sp *instrument.Span) {
	if sp == nil {
		return
	}
	switch {
	case sp.Kind == instrument.KindTurn && sp.TraceID.IsValid():
		s.mu.Lock()
		if t := s.turns[sp.TraceID]; t != nil {
			t.ended = sp.End
		}
		s.mu.Unlock()
	case sp.Chat != nil && sp.Chat.Response != nil:
		s.chatEnded(sp, sp.Chat)
	}
}

func (s *Sink) chatEnded(sp *instrument.Span, c *instrument.Chat) {
	resp := c.Response
	id := c.Request.Identity.Account
	label := s.m.accountLabel(id)
	if r := wire.Refusal(resp); r != "" {
		s.m.refusals.WithLabelValues(label, r).Inc()
	}
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		a = &account{id: id, windows: make(map[string]windowState), written: make(map[string]Reading)}
		s.accounts[id] = a
	}
	a.seen = sp.End
	if rl := resp.RateLimit; !rl.Empty() {
		at := cmp.Or(resp.HeaderTime, sp.Start)
		if at.After(a.at) {
			s.read(a, label, rl, at)
		}
	}
	if sp.SessionID != "" {
		ss := s.session(sp.SessionID)
		ss.account, ss.seen = id, sp.End
	}
	msg := resp.Message
	if msg == nil || len(a.windows) == 0 {
		return // no usage, or an account without windows (an API key): nothing to apportion
	}
	u := msg.Usage
	con := contribution{session: sp.SessionID, user: sp.User, trace: sp.TraceID, end: cmp.Or(resp.End, sp.End),
		tokens: u.TotalInput() + u.OutputTokens}
	if c.Priced {
		con.cost = c.Cost
	}
	if len(a.pending) >= maxPending {
		a.pending = slices.Delete(a.pending, 0, 1)
	}
	a.pending = append(a.pending, con)
}

// read takes an account's reading at its header time: the gauges, the recorder, and the growth
// of each window since the previous reading, apportioned to the requests that ended in between.
func (s *Sink) read(a *account, label string, rl *wire.RateLimit, at time.Time) {
	a.at, a.latest = at, rl
	s.m.unified(label, rl)
	s.m.apiKey(label, rl)
	// The requests whose usage this reading shows: those that ended before its headers left.
	n := 0
	for n < len(a.pending) && !a.pending[n].end.After(at) {
		n++
	}
	covered := a.pending[:n]
	for _, w := range rl.Windows {
		if !w.HasUtilization {
			continue
		}
		prev, had := a.windows[w.Name]
		a.windows[w.Name] = windowState{util: w.Utilization, reset: w.Reset}
		s.write(a, Reading{Account: a.id, Window: w.Name, At: at, Utilization: w.Utilization, Reset: w.Reset, Status: w.Status})
		if !had {
			continue // the first reading is the baseline
		}
		growth := w.Utilization - prev.util
		if newWindow(prev.reset, w.Reset) {
			growth = w.Utilization // the window started over: all of it is new
		}
		if growth <= 0 {
			continue
		}
		s.apportion(a, label, w.Name, covered, growth, at)
	}
	for _, k := range rl.Kinds {
		if k.Limit > 0 && k.Remaining >= 0 {
			s.write(a, Reading{Account: a.id, Window: k.Kind, At: at, Utilization: 1 - float64(k.Remaining)/float64(k.Limit), Reset: k.Reset})
		}
	}
	a.pending = slices.Delete(a.pending, 0, n)
	s.settle(a, at)
}

// newWindow reports whether a window's reset moved on: the window started over between two
// readings. The API rounds resets, so a small change is the same window.
func newWindow(prev, now time.Time) bool {
	return !prev.IsZero() && now.Sub(prev) > time.Minute
}

// apportion splits a window's growth among the requests that ended since the previous reading,
// by their cost (by their tokens when none was priced, equally when none reported usage). With
// no request of cctrace's in between, the growth came from elsewhere: another client of the
// account, or a request cctrace did not see.
func (s *Sink) apportion(a *account, label, window string, covered []contribution, growth float64, at time.Time) {
	if len(covered) == 0 {
		s.m.growth.WithLabelValues(label, s.m.windowLabel(window), "false").Add(growth)
		return
	}
	s.m.growth.WithLabelValues(label, s.m.windowLabel(window), "true").Add(growth)
	weight := func(c contribution) float64 { return c.cost }
	if total := sumBy(covered, weight); total <= 0 {
		weight = func(c contribution) float64 { return float64(c.tokens) }
		if sumBy(covered, weight) <= 0 {
			weight = func(contribution) float64 { return 1 }
		}
	}
	total := sumBy(covered, weight)
	// One share per session and turn: a turn of many requests is one row to the recorder.
	type key struct {
		session, user string
		trace         instrument.TraceID
	}
	parts := map[key]float64{}
	var order []key
	for _, c := range covered {
		k := key{c.session, c.user, c.trace}
		if _, ok := parts[k]; !ok {
			order = append(order, k)
		}
		parts[k] += growth * weight(c) / total
	}
	for _, k := range order {
		g := parts[k]
		if k.session != "" {
			ss := s.session(k.session)
			if ss.shares == nil {
				ss.shares = make(map[string]float64)
			}
			ss.shares[window] += g
		}
		trace := ""
		if k.trace.IsValid() {
			trace = k.trace.String()
			t := s.turn(k.trace, a.id, at)
			t.shares[window] += g
		}
		if s.rec != nil {
			s.rec.Share(Share{Account: a.id, Window: window, SessionID: k.session, TraceID: trace, User: k.user, At: at, Growth: g})
		}
	}
}

func sumBy(cs []contribution, f func(contribution) float64) float64 {
	total := 0.0
	for _, c := range cs {
		total += f(c)
	}
	return total
}

// settle observes the shares of the turns of a that ended before at: no later reading can add
// to them, since their requests all ended before this one's headers.
func (s *Sink) settle(a *account, at time.Time) {
	for id, t := range s.turns {
		if t.account != a.id || t.ended.IsZero() || t.ended.After(at) || s.pendingFor(a, id) {
			continue
		}
		for w, g := range t.shares {
			s.m.observeTurnShare(s.m.windowLabel(w), g, id)
		}
		delete(s.turns, id)
	}
}

func (s *Sink) pendingFor(a *account, id instrument.TraceID) bool {
	for _, c := range a.pending {
		if c.trace == id {
			return true
		}
	}
	return false
}

// writeEvery is how often an unchanged window is recorded again, so that a chart of it has
// points while nothing moves.
const writeEvery = 5 * time.Minute

// write hands r to the recorder when it differs from what was last written for its window.
func (s *Sink) write(a *account, r Reading) {
	if s.rec == nil {
		return
	}
	last, ok := a.written[r.Window]
	if ok && math.Abs(last.Utilization-r.Utilization) < 0.0005 && last.Status == r.Status &&
		!newWindow(last.Reset, r.Reset) && r.At.Sub(last.At) < writeEvery {
		return
	}
	if !ok && len(a.written) >= 2*maxWindowsPerAccount {
		return
	}
	a.written[r.Window] = r
	s.rec.Reading(r)
}

// maxWindowsPerAccount bounds the windows and kinds one account is recorded with.
const maxWindowsPerAccount = 16

func (s *Sink) session(id string) *session {
	ss := s.sessions[id]
	if ss == nil {
		if len(s.sessions) >= s.maxKept {
			evictOldest(s.sessions, func(v *session) time.Time { return v.seen })
		}
		ss = &session{}
		s.sessions[id] = ss
	}
	return ss
}

func (s *Sink) turn(id instrument.TraceID, acct string, at time.Time) *turn {
	t := s.turns[id]
	if t == nil {
		if len(s.turns) >= s.maxKept {
			evictOldest(s.turns, func(v *turn) time.Time { return v.seen })
		}
		t = &turn{account: acct, shares: make(map[string]float64)}
		s.turns[id] = t
	}
	t.seen = at
	return t
}

// evictOldest drops the entry least recently seen. It is a pass over the map, paid only when the
// map is full, once per new entry.
func evictOldest[K comparable, V any](m map[K]V, seen func(V) time.Time) {
	var oldest K
	var at time.Time
	first := true
	for k, v := range m {
		if t := seen(v); first || t.Before(at) {
			oldest, at, first = k, t, false
		}
	}
	delete(m, oldest)
}

// Window is one window of an account as the status line and the turns page show it. The zero
// value is a window nothing was reported of.
type Window struct {
	Name        string    `json:"window"`
	Utilization float64   `json:"utilization"`
	Reset       time.Time `json:"reset,omitzero"`
	Status      string    `json:"status,omitempty"`
	// Share is the session's share of the window's growth since cctrace started watching it.
	Share float64 `json:"session_share,omitempty"`
}

// Session returns the representative window of the account of a session's latest answer (the
// one that binds it now), with the session's share of it, and false when the account reports
// no windows (an API key) or the sink has not seen the session.
func (s *Sink) Session(id string) (Window, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	if ss == nil {
		return Window{}, false
	}
	a := s.accounts[ss.account]
	if a == nil || a.latest == nil {
		return Window{}, false
	}
	w, ok := a.latest.RepresentativeWindow()
	if !ok {
		return Window{}, false
	}
	return Window{Name: w.Name, Utilization: w.Utilization, Reset: w.Reset, Status: cmp.Or(w.Status, a.latest.Status), Share: ss.shares[w.Name]}, true
}

// TurnShares returns a turn's share of each window's growth so far (trace, 32 hex digits), or
// nil when none is known.
func (s *Sink) TurnShares(trace instrument.TraceID) map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.turns[trace]; t != nil {
		out := make(map[string]float64, len(t.shares))
		for k, v := range t.shares {
			out[k] = v
		}
		return out
	}
	return nil
}
