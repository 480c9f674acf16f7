package history

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// TestFullDiskDegradesToMemory: a store that cannot grow (SQLite's own "database or disk is
// full", as on a full disk) leaves the writer with one in memory: one log line, the gauge, and
// the turns go on being kept and read.
func TestFullDiskDegradesToMemory(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "history.db"))
	// One connection, so that the pragma holds for every write; the file may not grow.
	db.sql.SetMaxOpenConns(1)
	var pages int64
	if err := db.sql.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.sql.ExecContext(ctx, `PRAGMA max_page_count = `+itoa(pages)); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	reg := prometheus.NewRegistry()
	w, err := NewWriter(db, reg, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	go w.Run(run)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 50 {
		tu := endedTurn("sess-full", "alice", "core", "claude-opus-4-5", start.Add(time.Duration(i)*time.Minute), 0.01)
		tu.Prompt = strings.Repeat("x", 4000) // a few pages' worth of turns
		w.TurnEnded(tu)
	}
	stop()
	<-w.Done()
	if !w.Degraded() || w.Store().Kind() != KindMemory {
		t.Fatalf("the writer did not degrade: %v %s", w.Degraded(), w.Store().Kind())
	}
	if n := strings.Count(log.String(), "keeping history in memory"); n != 1 {
		t.Errorf("%d log lines say so, want 1:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "full") {
		t.Errorf("the log line does not say why:\n%s", log.String())
	}
	if v := testutil.ToFloat64(w.m.degraded); v != 1 {
		t.Errorf("%s = %v", nameDegraded, v)
	}
	s, ok, err := w.Store().Session(ctx, "sess-full")
	if err != nil || !ok || s.Turns == 0 {
		t.Errorf("the store in memory has %+v %v %v", s, ok, err)
	}
	problems, err := promlint.NewWithMetricFamilies(gather(t, reg)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestQueueFull: records past the queue are dropped and counted, never waited for.
func TestQueueFull(t *testing.T) {
	db := open(t, string(KindMemory))
	w, err := NewWriter(db, prometheus.NewRegistry(), WithQueue(2))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 5 { // Run is not running: nothing drains the queue
		w.TurnEnded(endedTurn("s", "", "", "m", start.Add(time.Duration(i)*time.Second), 0))
	}
	if v := testutil.ToFloat64(w.m.dropped); v != 3 {
		t.Errorf("%s = %v, want 3", nameDropped, v)
	}
}

// TestRetention: turns older than the age go, then the oldest until the store fits its size.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	for kind, openStore := range storeKinds(t) {
		if kind == "memory" {
			continue // the same SQLite as the file
		}
		t.Run(kind, func(t *testing.T) {
			db := openStore(t)
			now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
			var b Batch
			for i := range 400 {
				tu := endedTurn("s"+itoa(int64(i/10)), "alice", "core", "m", now.Add(-time.Duration(400-i)*time.Hour), 0.01)
				tu.Prompt = strings.Repeat("p", 2000)
				b.Turns = append(b.Turns, tu)
			}
			if err := db.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			n, err := db.Prune(ctx, Retention{MaxAge: 100 * time.Hour}, now)
			if err != nil || n != 300 {
				t.Fatalf("pruning by age removed %d turns (%v), want 300", n, err)
			}
			if turns, _ := db.Turns(ctx, Query{Limit: 1000}); len(turns) != 100 || turns[99].Start.Before(now.Add(-100*time.Hour)) {
				t.Errorf("%d turns left after pruning by age", len(turns))
			}
			before, err := db.Size(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n, err = db.Prune(ctx, Retention{MaxBytes: before / 2}, now)
			if err != nil || n == 0 {
				t.Fatalf("pruning by size removed %d turns (%v)", n, err)
			}
			after, _ := db.Size(ctx)
			turns, _ := db.Turns(ctx, Query{Limit: 1000})
			if after > before/2 || len(turns) == 0 || len(turns)+n != 100 {
				t.Errorf("pruning by size: %d bytes of %d allowed, %d turns left, %d removed", after, before/2, len(turns), n)
			}
			if sessions, _ := db.Sessions(ctx, Query{}); len(sessions) == 0 || len(sessions) > 10 {
				t.Errorf("%d sessions left", len(sessions))
			}
		})
	}
}

// TestInFlight: a state saved is taken once, by prefix; an empty state removes it.
func TestInFlight(t *testing.T) {
	ctx := context.Background()
	for kind, openStore := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			db := openStore(t)
			for name, state := range map[string]string{"session/a": `{"turn":1}`, "session/b": `{"turn":2}`, "other": `{}`} {
				if err := db.SaveInFlight(ctx, name, []byte(state)); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.SaveInFlight(ctx, "session/a", []byte(`{"turn":3}`)); err != nil {
				t.Fatal(err)
			}
			if err := db.SaveInFlight(ctx, "other", nil); err != nil {
				t.Fatal(err)
			}
			got, err := db.TakeInFlight(ctx, "session/")
			if err != nil || len(got) != 2 || string(got["session/a"]) != `{"turn":3}` || string(got["session/b"]) != `{"turn":2}` {
				t.Errorf("taken %q (%v)", got, err)
			}
			if again, err := db.TakeInFlight(ctx, ""); err != nil || len(again) != 0 {
				t.Errorf("taken again %q (%v)", again, err)
			}
		})
	}
}
