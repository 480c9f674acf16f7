package history

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// recorded are sessions of the real CLI the tests play: tool calls, a subagent, retries, a
// compaction, a side request, and a subscription whose answers report its windows.
var recorded = []string{"parallel_tools", "subagent", "retry_529", "auto_compaction", "side_request", "ratelimit_subscription"}

// played plays the recorded sessions into a tracker whose sinks are a summary store and a
// limits sink, both handing what they keep to a writer into db, and returns the summary store
// once the writer has written everything.
func played(t *testing.T, db *DB, sessions ...string) *summary.Store {
	t.Helper()
	w, err := NewWriter(db, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go w.Run(ctx)
	store := summary.New(summary.WithTurnEnded(w.TurnEnded))
	lim, err := limits.New(prometheus.NewRegistry(), nil, limits.WithRecorder(w))
	if err != nil {
		t.Fatal(err)
	}
	var seed uint64
	prices := metrics.DefaultPrices()
	tr := withAccount{instrument.New(instrument.Sinks{store, lim}, instrument.WithIDSource(func() uint64 { seed++; return seed }),
		instrument.WithPricing(prices.Cost))}
	for _, name := range sessions {
		exchanges, err := replay.Load(filepath.Join("..", "..", "testdata", "claude-code", name))
		if err != nil {
			t.Fatal(err)
		}
		replay.Play(tr, exchanges)
		tr.tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Hour))
	}
	stop()
	<-w.Done()
	if w.Degraded() {
		t.Fatal("the writer degraded")
	}
	return store
}

// withAccount gives every request the account cctrace's identity resolution would.
type withAccount struct{ tr *instrument.Tracker }

func (w withAccount) Request(r *wire.Request) {
	r.Identity.Account = "acct-00000000000000aa"
	w.tr.Request(r)
}
func (w withAccount) Response(r *wire.Response) { w.tr.Response(r) }

// storeKinds opens a fresh store of each kind the machine has: an SQLite file, one in memory,
// and a database on PostgreSQL when the machine has it (postgres).
func storeKinds(t *testing.T) map[string]func(t *testing.T) *DB {
	kinds := map[string]func(t *testing.T) *DB{
		"sqlite": func(t *testing.T) *DB { return open(t, filepath.Join(t.TempDir(), "state", "history.db")) },
		"memory": func(t *testing.T) *DB { return open(t, string(KindMemory)) },
	}
	if pg := postgres(t); pg != nil {
		kinds["postgres"] = func(t *testing.T) *DB { return open(t, pg.Database(t)) }
	}
	return kinds
}

func open(t testing.TB, dsn string) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRecordedSessionsKept: every session and turn the summary store kept of recorded traffic
// is in the store with the same totals, every turn with its spans; the subscription's readings
// and the session's share of its window are there too.
func TestRecordedSessionsKept(t *testing.T) {
	ctx := context.Background()
	for kind, openStore := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			db := openStore(t)
			mem := played(t, db, recorded...)
			memSessions := mem.Sessions()
			got, err := db.Sessions(ctx, Query{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(memSessions) {
				t.Fatalf("%d sessions kept, the summary store has %d", len(got), len(memSessions))
			}
			for _, want := range memSessions {
				s, ok, err := db.Session(ctx, want.ID)
				if err != nil || !ok {
					t.Fatalf("session %s: %v %v", want.ID, ok, err)
				}
				if s.Turns != want.Turns || s.Requests != want.Requests || s.Retries != want.Retries || s.ToolCalls != want.ToolCalls ||
					s.ToolErrors != want.ToolErrors || s.Subagents != want.Subagents || s.Usage != want.Usage ||
					math.Abs(s.Cost-want.Cost) > 1e-9 || s.Compactions != want.Compactions || s.Project != want.Project ||
					!s.First.Equal(want.First.Truncate(time.Millisecond)) || !maps.Equal(s.ToolCounts, want.ToolCounts) ||
					!maps.Equal(s.ToolFailures, want.ToolFailures) || !slices.Equal(s.Models, want.Models) {
					t.Errorf("session %s kept as\n%+v\nthe summary store has\n%+v", want.ID, s, want)
				}
			}
			memTurns := mem.TurnsWhere(summary.Filter{})
			turns, err := db.Turns(ctx, Query{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(turns) != len(memTurns) {
				t.Fatalf("%d turns kept, the summary store has %d", len(turns), len(memTurns))
			}
			for _, want := range memTurns {
				got, ok, err := db.Turn(ctx, want.TraceID)
				if err != nil || !ok {
					t.Fatalf("turn %s: %v %v", want.TraceID, ok, err)
				}
				if g, w := turnJSON(t, got), turnJSON(t, want); g != w {
					t.Errorf("turn %s kept as\n%s\nthe summary store has\n%s", want.TraceID, g, w)
				}
			}
			var sub string
			for _, s := range memSessions {
				if s.Project != "" {
					sub = s.ID
				}
			}
			if sub == "" {
				t.Fatal("no recorded session named its project")
			}
			var readings int
			if err := db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM limit_readings`).Scan(&readings); err != nil || readings == 0 {
				t.Errorf("%d limit readings kept (%v)", readings, err)
			}
			var grown string
			if err := db.sql.QueryRowContext(ctx, `SELECT session_id FROM limit_shares WHERE growth > 0`).Scan(&grown); err != nil {
				t.Fatalf("no share of a window kept: %v", err)
			}
			shares, err := db.Shares(ctx, grown)
			if err != nil || shares.Session["5h"] <= 0 || len(shares.Turns) == 0 {
				t.Errorf("shares of session %s: %+v (%v)", grown, shares, err)
			}
		})
	}
}

// turnJSON is a turn as /api/turns serves it, its times to the millisecond the store keeps.
func turnJSON(t *testing.T, tu summary.Turn) string {
	t.Helper()
	tu.Duration = math.Round(tu.Duration*1000) / 1000
	b, err := json.Marshal(tu)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWrittenTwice: a batch written again (a retried transaction) adds nothing to the
// sessions' totals.
func TestWrittenTwice(t *testing.T) {
	ctx := context.Background()
	db := open(t, string(KindMemory))
	turn := endedTurn("sess-a", "alice", "core", "claude-opus-4-5", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), 0.5)
	b := &Batch{Turns: []summary.Turn{turn}}
	for range 2 {
		if err := db.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	s, ok, err := db.Session(ctx, "sess-a")
	if err != nil || !ok || s.Turns != 1 || s.Requests != 1 || s.Cost != 0.5 {
		t.Errorf("session after two writes of one turn: %+v %v %v", s, ok, err)
	}
}

var traceSeq int

// endedTurn is a turn of one priced request, as the summary store hands it on.
func endedTurn(session, user, team, model string, start time.Time, cost float64) summary.Turn {
	traceSeq++
	end := start.Add(10 * time.Second)
	usage := instrument.Totals{Requests: 1, Cost: cost, Models: []string{model}}
	usage.Usage.InputTokens, usage.Usage.OutputTokens = 1000, 100
	tokens := usage.Usage
	return summary.Turn{
		TraceID: traceID(traceSeq), SessionID: session, User: user, Team: team, Project: "proj-" + team,
		Index: 1, Start: start, End: &end, Duration: 10, Root: "turn", Outcome: "end_turn", Totals: usage,
		Spans: []*summary.Record{
			{SpanID: "00000000000000a1", Kind: "turn", Name: "invoke_agent claude-code", Start: start, End: &end},
			{SpanID: "00000000000000a2", ParentID: "00000000000000a1", Kind: "chat", Name: "chat " + model, Start: start, End: &end,
				Model: model, Request: "main", StatusCode: 200, StopReason: "end_turn", Tokens: &tokens, Cost: &cost},
		},
	}
}

func traceID(n int) string {
	const hex = "0123456789abcdef"
	b := []byte("00000000000000000000000000000000")
	for i := len(b) - 1; n > 0; i-- {
		b[i] = hex[n%16]
		n /= 16
	}
	return string(b)
}

// TestQueries: filters by person, team, model, project and time; the most expensive first; spend
// by day and by week (Mondays), in the viewer's time zone.
func TestQueries(t *testing.T) {
	ctx := context.Background()
	for kind, openStore := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			db := openStore(t)
			mon := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) // a Monday
			turns := []summary.Turn{
				endedTurn("s1", "alice", "core", "claude-opus-4-5", mon, 1.00),
				endedTurn("s1", "alice", "core", "claude-sonnet-4-5", mon.Add(time.Hour), 0.25),
				endedTurn("s2", "bob", "web", "claude-sonnet-4-5", mon.Add(24*time.Hour), 2.00),
				endedTurn("s3", "carol", "web", "claude-haiku-4-5", mon.Add(7*24*time.Hour), 0.10),
			}
			if err := db.Write(ctx, &Batch{Turns: turns}); err != nil {
				t.Fatal(err)
			}
			ids := func(ts []summary.Turn) []string {
				var out []string
				for _, tu := range ts {
					out = append(out, tu.TraceID)
				}
				return out
			}
			for _, tc := range []struct {
				name string
				q    Query
				want []summary.Turn
			}{
				{"all, newest first", Query{}, []summary.Turn{turns[3], turns[2], turns[1], turns[0]}},
				{"person", Query{User: "alice"}, []summary.Turn{turns[1], turns[0]}},
				{"team", Query{Team: "web"}, []summary.Turn{turns[3], turns[2]}},
				{"model", Query{Model: "claude-sonnet-4-5"}, []summary.Turn{turns[2], turns[1]}},
				{"project", Query{Project: "proj-core"}, []summary.Turn{turns[1], turns[0]}},
				{"since", Query{Since: mon.Add(2 * time.Hour)}, []summary.Turn{turns[3], turns[2]}},
				{"limit", Query{Limit: 1}, []summary.Turn{turns[3]}},
			} {
				got, err := db.Turns(ctx, tc.q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids(got), ids(tc.want)) {
					t.Errorf("%s: turns %v, want %v", tc.name, ids(got), ids(tc.want))
				}
			}
			top, err := db.TopTurns(ctx, Query{Limit: 2})
			if err != nil || !slices.Equal(ids(top), ids([]summary.Turn{turns[2], turns[0]})) {
				t.Errorf("top turns %v (%v)", ids(top), err)
			}
			topS, err := db.TopSessions(ctx, Query{})
			if err != nil || len(topS) != 3 || topS[0].ID != "s2" || topS[1].ID != "s1" || topS[1].Cost != 1.25 || topS[1].Turns != 2 {
				t.Errorf("top sessions %+v (%v)", topS, err)
			}
			sessions, err := db.Sessions(ctx, Query{Model: "claude-opus-4-5"})
			if err != nil || len(sessions) != 1 || sessions[0].ID != "s1" {
				t.Errorf("sessions that used opus: %+v (%v)", sessions, err)
			}
			days, err := db.Spend(ctx, Query{}, Day, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			wantDays := []SpendBucket{
				{Start: mon.Truncate(24 * time.Hour).Add(7 * 24 * time.Hour), Turns: 1, Requests: 1, Cost: 0.10},
				{Start: mon.Truncate(24 * time.Hour).Add(24 * time.Hour), Turns: 1, Requests: 1, Cost: 2.00},
				{Start: mon.Truncate(24 * time.Hour), Turns: 2, Requests: 2, Cost: 1.25},
			}
			if !sameSpend(days, wantDays) {
				t.Errorf("spend by day %+v, want %+v", days, wantDays)
			}
			weeks, err := db.Spend(ctx, Query{Team: "web"}, Week, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			wantWeeks := []SpendBucket{
				{Start: mon.Truncate(24 * time.Hour).Add(7 * 24 * time.Hour), Turns: 1, Requests: 1, Cost: 0.10},
				{Start: mon.Truncate(24 * time.Hour), Turns: 1, Requests: 1, Cost: 2.00},
			}
			if !sameSpend(weeks, wantWeeks) {
				t.Errorf("spend of team web by week %+v, want %+v", weeks, wantWeeks)
			}
		})
	}
}

func sameSpend(a, b []SpendBucket) bool {
	return slices.EqualFunc(a, b, func(x, y SpendBucket) bool {
		return x.Start.Equal(y.Start) && x.Turns == y.Turns && x.Requests == y.Requests && math.Abs(x.Cost-y.Cost) < 1e-9
	})
}
