package budget

import (
	"sort"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// MaxLedgerEntries bounds the people and the teams a Ledger keeps apart (each); the spend of
// those past it is kept under "other", as the metrics' label caps do, so that invented
// identities cannot grow it without end.
const MaxLedgerEntries = 1000

// Ledger is an instrument.Sink that adds up what each person and team spent, from the cost the
// tracker put on each answered request, over the windows of the budgets: the last 24 hours to the
// hour and the last 30 days to the day (UTC). It holds what this process saw since it started,
// and what another source (PrometheusSpend) says was spent across replicas. Its methods are safe for concurrent use. The
// zero value is not usable; call NewLedger.
type Ledger struct {
	now func() time.Time

	mu     sync.Mutex
	people map[string]*spend
	teams  map[string]*spend
	teamOf map[string]string // a person's team, as last attributed
	seeds  map[seedKey]float64
}

// seedKey names one seeded total.
type seedKey struct{ scope, name, window string }

var _ instrument.Sink = (*Ledger)(nil)

// NewLedger returns an empty ledger whose windows end at now() (time.Now when nil).
func NewLedger(now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{now: now, people: map[string]*spend{}, teams: map[string]*spend{}, teamOf: map[string]string{}, seeds: map[seedKey]float64{}}
}

// spend is one person's or team's spend in hourly and daily slots, each tagged with the hour or
// day it holds, so that a slot from a window ago reads as empty.
type spend struct {
	hours  [24]float64
	hourOf [24]int64 // unix hour of each slot
	days   [30]float64
	dayOf  [30]int64 // unix day of each slot
}

// add counts usd at t. A slot that holds a later hour or day than t's keeps it: spend that old
// is out of the window already.
func (s *spend) add(t time.Time, usd float64) {
	h, d := t.Unix()/3600, t.Unix()/86400
	if i := h % 24; s.hourOf[i] <= h {
		if s.hourOf[i] < h {
			s.hourOf[i], s.hours[i] = h, 0
		}
		s.hours[i] += usd
	}
	if i := d % 30; s.dayOf[i] <= d {
		if s.dayOf[i] < d {
			s.dayOf[i], s.days[i] = d, 0
		}
		s.days[i] += usd
	}
}

// total returns the spend of the window ending at now.
func (s *spend) total(window string, now time.Time) float64 {
	var sum float64
	if window == Monthly {
		d := now.Unix() / 86400
		for i, day := range s.dayOf {
			if day > d-30 && day <= d {
				sum += s.days[i]
			}
		}
		return sum
	}
	h := now.Unix() / 3600
	for i, hour := range s.hourOf {
		if hour > h-24 && hour <= h {
			sum += s.hours[i]
		}
	}
	return sum
}

// SpanStarted implements instrument.Sink; spend is counted when a request ends.
func (l *Ledger) SpanStarted(*instrument.Span) {}

// SessionsActive implements instrument.Sink; the ledger does not need it.
func (l *Ledger) SessionsActive(int) {}

// SpanEnded adds the cost of an answered request to its person and team.
func (l *Ledger) SpanEnded(s *instrument.Span) {
	if s.Kind != instrument.KindChat || s.Chat == nil || !s.Chat.Priced || s.Chat.Cost <= 0 {
		return
	}
	l.Add(s.User, s.Team, s.End, s.Chat.Cost)
}

// Add records usd spent at t by user of team (either may be empty: unattributed).
func (l *Ledger) Add(user, team string, t time.Time, usd float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if user != "" {
		l.entry(l.people, user).add(t, usd)
		if _, known := l.teamOf[user]; known || len(l.teamOf) < MaxLedgerEntries {
			l.teamOf[user] = team
		}
	}
	if team != "" {
		l.entry(l.teams, team).add(t, usd)
	}
}

func (l *Ledger) entry(m map[string]*spend, name string) *spend {
	if s := m[name]; s != nil {
		return s
	}
	if len(m) >= MaxLedgerEntries {
		name = "other"
		if s := m[name]; s != nil {
			return s
		}
	}
	s := &spend{}
	m[name] = s
	return s
}

// spent returns what a person or team (scope ScopePerson or ScopeTeam) spent in the window
// ending at now: the larger of what this process counted and what was seeded for it.
func (l *Ledger) spent(scope, name, window string, now time.Time) float64 {
	var own float64
	if s := inScope(scope, l.people, l.teams)[name]; s != nil {
		own = s.total(window, now)
	}
	return max(own, l.seeds[seedKey{scope, name, window}])
}

// seed replaces what another source says people and teams spent, across every replica: spend
// counts the larger of it and this process's own count, which also covers what was spent since
// the source last looked. The metrics' placeholder values (metrics.Placeholder: a user or team
// that was not given, or one past the label's cap) name nobody and are not seeded. Nil seeds
// nothing: this process's own count alone counts again.
func (l *Ledger) seed(seeds map[seedKey]float64) {
	kept := make(map[seedKey]float64, len(seeds))
	for k, usd := range seeds {
		if !metrics.Placeholder(k.name) {
			kept[k] = usd
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seeds = kept
}

// Totals returns the spend of every person or team (scope) with spend in the last 30 days,
// most in the last 24 hours first, with their budgets from b (nil: none).
func (l *Ledger) Totals(scope string, b *Budgets) []summary.SpendTotal {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	m := inScope(scope, l.people, l.teams)
	names := map[string]bool{}
	for n := range m {
		names[n] = true
	}
	for k := range l.seeds {
		if k.scope == scope {
			names[k.name] = true
		}
	}
	var out []summary.SpendTotal
	for n := range names {
		t := summary.SpendTotal{Name: n, Daily: l.spent(scope, n, Daily, now), Monthly: l.spent(scope, n, Monthly, now)}
		if t.Monthly <= 0 && t.Daily <= 0 {
			continue
		}
		if scope == ScopePerson {
			t.Team = l.teamOf[n]
		}
		if lim, ok := b.Of(scope, n); ok {
			t.DailyBudget, t.MonthlyBudget = lim.Daily, lim.Monthly
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Daily != out[j].Daily {
			return out[i].Daily > out[j].Daily
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Exceeded is a budget that is spent. The zero value is none.
type Exceeded struct {
	Scope  string // ScopePerson or ScopeTeam
	Name   string // the person or team
	Window string // Daily or Monthly
	Limit  float64
	Spent  float64
}

// Message says which budget is spent, for the person whose prompt is refused.
func (e Exceeded) Message() string {
	who := e.Name + "'s"
	if e.Scope == ScopeTeam {
		who = "team " + e.Name + "'s"
	}
	return "cctrace: " + who + " " + e.Window + " budget of " + dollars(e.Limit) + " for " + windowText(e.Window) +
		" is spent (" + dollars(e.Spent) + "). New prompts are refused until the spend of " + windowText(e.Window) +
		" is below it again; turns already running finish. The budgets file says who can raise it."
}

// Over returns the first budget of user or their team that is spent (person before team, daily
// before monthly), and false when none is.
func (l *Ledger) Over(b *Budgets, user, team string) (Exceeded, bool) {
	if b == nil || (len(b.People) == 0 && len(b.Teams) == 0) {
		return Exceeded{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, who := range [...]struct{ scope, name string }{{ScopePerson, user}, {ScopeTeam, team}} {
		lim, ok := b.Of(who.scope, who.name)
		if !ok {
			continue
		}
		for _, w := range [...]struct {
			window string
			limit  float64
		}{{Daily, lim.Daily}, {Monthly, lim.Monthly}} {
			if w.limit <= 0 {
				continue
			}
			if spent := l.spent(who.scope, who.name, w.window, now); spent >= w.limit {
				return Exceeded{Scope: who.scope, Name: who.name, Window: w.window, Limit: w.limit, Spent: spent}, true
			}
		}
	}
	return Exceeded{}, false
}
