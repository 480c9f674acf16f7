package budget

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/identity"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

func TestParse(t *testing.T) {
	b := loadTestBudgets(t)
	if l, ok := b.Of(ScopePerson, "alice"); !ok || l.Daily != 5 || l.Monthly != 100 {
		t.Errorf("alice: %+v %v", l, ok)
	}
	if l, ok := b.Of(ScopePerson, "bob"); !ok || l.Daily != 0 || l.Monthly != 40 {
		t.Errorf("bob: %+v %v", l, ok)
	}
	if l, ok := b.Of(ScopeTeam, "platform"); !ok || l.Daily != 50 {
		t.Errorf("platform: %+v %v", l, ok)
	}
	if _, ok := b.Of(ScopeTeam, "alice"); ok {
		t.Error("a person's budget is a team's")
	}

	tests := []struct{ name, text, want string }{
		{"syntax", "people:\n  alice: {daily: 5\n", "b.yaml:"},
		{"unknown top key", "persons: {}\n", "b.yaml:1: unknown key \"persons\""},
		{"people a list", "people:\n  - alice\n", "b.yaml:2: people must map names to budgets"},
		{"budget a number", "people:\n  alice: 5\n", "b.yaml:2: a budget must be a mapping"},
		{"unknown window", "teams:\n  x: {weekly: 5}\n", "b.yaml:2: unknown key \"weekly\""},
		{"not a number", "people:\n  alice:\n    daily: lots\n", "b.yaml:3: daily budget \"lots\" is not a number"},
		{"negative", "people:\n  alice:\n    monthly: -1\n", "b.yaml:3: monthly budget -1 must be above 0"},
		{"twice", "people:\n  alice: {daily: 1}\n  alice: {daily: 2}\n", "b.yaml:3: \"alice\" is already given on line 2"},
		{"window twice", "people:\n  alice: {daily: 1, daily: 2}\n", "b.yaml:2: key \"daily\" is already given on line 2"},
		{"empty budget", "people:\n  alice: {}\n", "b.yaml:2: a budget without daily or monthly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("b.yaml", []byte(tt.text))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want it to begin %q", err, tt.want)
			}
		})
	}
}

func TestLedgerWindows(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 30, 0, 0, time.UTC)
	l := NewLedger(func() time.Time { return now })
	l.Add("alice", "platform", now.Add(-10*time.Minute), 1)
	l.Add("alice", "platform", now.Add(-23*time.Hour), 2)    // in the day's window
	l.Add("alice", "platform", now.Add(-25*time.Hour), 4)    // a day ago: the month only
	l.Add("alice", "platform", now.Add(-29*24*time.Hour), 8) // in the month's window
	l.Add("alice", "platform", now.Add(-31*24*time.Hour), 16)
	l.Add("bob", "", now, 0.5)
	tests := []struct {
		scope, name, window string
		want                float64
	}{
		{ScopePerson, "alice", Daily, 3},
		{ScopePerson, "alice", Monthly, 15},
		{ScopeTeam, "platform", Daily, 3},
		{ScopePerson, "bob", Daily, 0.5},
		{ScopeTeam, "", Daily, 0},
		{ScopePerson, "carol", Monthly, 0},
	}
	for _, tt := range tests {
		if got := spent(l, tt.scope, tt.name, tt.window); got != tt.want {
			t.Errorf("%s %s %s = %v, want %v", tt.scope, tt.name, tt.window, got, tt.want)
		}
	}
	seeds := map[seedKey]float64{{ScopePerson, "alice", Daily}: 10}
	for _, placeholder := range []string{"unknown", "other", "none"} {
		seeds[seedKey{ScopePerson, placeholder, Daily}] = 3
		seeds[seedKey{ScopeTeam, placeholder, Daily}] = 3
	}
	l.seed(seeds)
	if got := spent(l, ScopePerson, "alice", Daily); got != 10 {
		t.Errorf("seeded: %v, want the larger, 10", got)
	}
	if teams := l.Totals(ScopeTeam, nil); len(teams) != 1 || teams[0].Name != "platform" {
		t.Errorf("team totals %+v, want platform alone: placeholders name no team", teams)
	}
	totals := l.Totals(ScopePerson, loadTestBudgets(t))
	if len(totals) != 2 || totals[0].Name != "alice" || totals[0].Team != "platform" || totals[0].DailyBudget != 5 || totals[1].Name != "bob" {
		t.Errorf("totals %+v", totals)
	}
}

// A person first seen without a team keeps their place when the ledger is full: their team is
// still updated once they have one.
func TestLedgerTeamUpdatedWhenFull(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 30, 0, 0, time.UTC)
	l := NewLedger(func() time.Time { return now })
	l.Add("alice", "", now, 1)
	for i := 1; i < MaxLedgerEntries; i++ {
		l.Add(fmt.Sprintf("user%d", i), "t", now, 0.01)
	}
	l.Add("alice", "platform", now, 1)
	for _, tot := range l.Totals(ScopePerson, loadTestBudgets(t)) {
		if tot.Name == "alice" && tot.Team != "platform" {
			t.Errorf("alice's team %q, want platform", tot.Team)
		}
	}
}

func TestLedgerCountsPricedChats(t *testing.T) {
	now := time.Now()
	l := NewLedger(nil)
	chat := func(user string, priced bool, cost float64) *instrument.Span {
		return &instrument.Span{Kind: instrument.KindChat, End: now, User: user, Team: "t",
			Chat: &instrument.Chat{Priced: priced, Cost: cost}}
	}
	l.SpanEnded(chat("alice", true, 0.25))
	l.SpanEnded(chat("alice", false, 9))
	l.SpanEnded(&instrument.Span{Kind: instrument.KindTurn, User: "alice", End: now, Turn: &instrument.Turn{Totals: instrument.Totals{Cost: 7}}})
	if got := spent(l, ScopePerson, "alice", Daily); got != 0.25 {
		t.Errorf("spent %v, want only the priced chat's 0.25 (turns total their chats)", got)
	}
}

func TestOver(t *testing.T) {
	b := loadTestBudgets(t)
	now := time.Now()
	l := NewLedger(func() time.Time { return now })
	if _, over := l.Over(b, "alice", "platform"); over {
		t.Fatal("over budget with nothing spent")
	}
	l.Add("alice", "platform", now, 5)
	e, over := l.Over(b, "alice", "platform")
	if !over || e.Scope != ScopePerson || e.Window != Daily || e.Limit != 5 || e.Spent != 5 {
		t.Errorf("Over = %+v, %v", e, over)
	}
	if msg := e.Message(); !strings.Contains(msg, "alice's daily budget of $5.00 for the last 24 hours is spent ($5.00)") {
		t.Errorf("message %q", msg)
	}
	l.Add("carol", "platform", now, 50)
	if e, over := l.Over(b, "dave", "platform"); !over || e.Scope != ScopeTeam || e.Name != "platform" {
		t.Errorf("a platform member without a budget of their own: %+v, %v", e, over)
	}
	if _, over := l.Over(b, "bob", "search"); over {
		t.Error("bob is over")
	}
	if _, over := l.Over(nil, "alice", "platform"); over {
		t.Error("over without budgets")
	}
}

// TestEnforcer checks the decision on the forwarding path: only a new prompt of a person over
// budget (or whose team is) is refused; their running turns and everyone else go on.
func TestEnforcer(t *testing.T) {
	b := loadTestBudgets(t)
	now := time.Now()
	l := NewLedger(func() time.Time { return now })
	l.Add("alice", "platform", now, 6)
	dir, err := identity.ParseDirectory("d.yaml", []byte("people:\n  - name: alice\n    team: platform\n    identities: [alice]\n  - name: bob\n    identities: [bob]\n"))
	if err != nil {
		t.Fatal(err)
	}
	resolver := identity.NewResolver([]identity.Source{identity.SourceHeader, identity.SourceCredential}, func() *identity.Directory { return dir })
	var refusals []string
	// Decodes as the pipeline does, on the caller's goroutine.
	decode := func(_ context.Context, req *wire.Request, body []byte) error {
		var err error
		req.Body, err = wire.ParseBody(body, req.ContentEncoding)
		return err
	}
	e := NewEnforcer(func() *Budgets { return b }, l, resolver.ResolveFast, decode, func(scope, window string) { refusals = append(refusals, scope+"/"+window) })

	const prompt = `{"model":"claude-sonnet-4-5","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"do it"}]}`
	const results = `{"model":"claude-sonnet-4-5","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"do it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`
	req := func(header, credential string) *wire.Request {
		return &wire.Request{Endpoint: wire.EndpointMessages, Identity: wire.Identity{Header: header, Credential: credential}}
	}
	tests := []struct {
		name    string
		req     *wire.Request
		body    string
		hold    bool
		refused bool
	}{
		{"over budget, new prompt", req("alice", ""), prompt, true, true},
		{"over budget, tool results", req("alice", ""), results, true, false},
		{"under budget", req("bob", ""), prompt, false, false},
		{"unknown", req("mallory", "key-0000000000000000"), prompt, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Hold(tt.req); got != tt.hold {
				t.Errorf("Hold = %v, want %v", got, tt.hold)
			}
			r := e.Refuse(context.Background(), tt.req, []byte(tt.body))
			if (r != nil) != tt.refused {
				t.Fatalf("Refuse = %+v, want refused %v", r, tt.refused)
			}
			if r != nil && (r.Status != 402 || r.Type != "billing_error" || !strings.Contains(r.Message, "alice's daily budget")) {
				t.Errorf("refusal %+v", r)
			}
		})
	}
	if len(refusals) != 1 || refusals[0] != "person/daily" {
		t.Errorf("refusals counted %v", refusals)
	}

	// A credential the forwarding path cannot place is known once the pipeline attributed it.
	byKey := req("", "key-1111111111111111")
	if e.Hold(byKey) {
		t.Error("held an unknown credential")
	}
	e.Learn(wire.Identity{Credential: "key-1111111111111111", User: "alice", Team: "platform"})
	if !e.Hold(byKey) || e.Refuse(context.Background(), byKey, []byte(prompt)) == nil {
		t.Error("a learned credential of alice's was not refused")
	}
}

// TestPrometheusSpend checks that spend read from Prometheus (every replica's) counts: the larger
// of it and this process's own count decides.
func TestPrometheusSpend(t *testing.T) {
	var queries []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		queries = append(queries, q)
		switch {
		case strings.Contains(q, "by (user)") && strings.Contains(q, "[24h]"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"user":"alice"},"value":[1,"7.5"]},{"metric":{"user":"other"},"value":[1,"99"]}]}}`)
		default:
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		}
	}))
	defer prom.Close()
	src, err := NewPrometheusSpend(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	l := NewLedger(func() time.Time { return now })
	l.Add("alice", "platform", now, 1)
	if err := src.Seed(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if len(queries) != 4 || queries[0] != "sum by (user) (increase(cctrace_cost_usd_total[24h]))" {
		t.Errorf("queries %q", queries)
	}
	if got := spent(l, ScopePerson, "alice", Daily); got != 7.5 {
		t.Errorf("daily %v, want Prometheus' 7.5", got)
	}
	if got := spent(l, ScopePerson, "alice", Monthly); got != 1 {
		t.Errorf("monthly %v, want the ledger's own 1", got)
	}
	if got := spent(l, ScopePerson, "other", Daily); got != 0 {
		t.Errorf("the placeholder user %q was seeded with %v", "other", got)
	}
	if _, over := l.Over(loadTestBudgets(t), "alice", "platform"); !over {
		t.Error("not over budget with 7.5 of 5 spent across replicas")
	}
	// The 30-day window reads a month of samples: asked again only after monthlyInterval.
	if err := src.Seed(context.Background(), l); err != nil || len(queries) != 6 || strings.Contains(queries[5], "[30d]") {
		t.Errorf("second seed: %v, queries %q", err, queries)
	}
	if _, err := NewPrometheusSpend("prometheus:9090"); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) }))
	defer broken.Close()
	src, _ = NewPrometheusSpend(broken.URL)
	if err := src.Seed(context.Background(), l); err == nil || spent(l, ScopePerson, "alice", Daily) != 7.5 {
		t.Errorf("a failed query: %v, and the last seeds must stay", err)
	}
}

// TestRunSeedingDropsStaleSeeds: when Prometheus stops answering, the last seeds stay for a few
// intervals and are then dropped, so that a person is judged on this replica's own count rather
// than refused for ever on an old answer.
func TestRunSeedingDropsStaleSeeds(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"user":"alice"},"value":[1,"7.5"]}]}}`)
	}))
	defer prom.Close()
	src, err := NewPrometheusSpend(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunSeeding(ctx, src, l, 20*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(harness.Patience); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	waitFor("never seeded", func() bool { return spent(l, ScopePerson, "alice", Daily) == 7.5 })
	up.Store(false)
	waitFor("stale seeds never dropped", func() bool { return spent(l, ScopePerson, "alice", Daily) == 0 })
}

// spent returns what the ledger's totals say a person or team spent in window.
func spent(l *Ledger, scope, name, window string) float64 {
	for _, t := range l.Totals(scope, nil) {
		if t.Name == name && window == Monthly {
			return t.Monthly
		}
		if t.Name == name {
			return t.Daily
		}
	}
	return 0
}
