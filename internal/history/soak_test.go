package history

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// soakSessions is how many sessions BenchmarkSoak writes: a team's month, about.
const soakSessions = 5000

// BenchmarkSoak fills a store with soakSessions sessions, each the turns (spans included) of
// one recorded Claude Code session under a new id, over 30 days, written in batches as the
// writer writes them; then reads what the turns page reads. It reports the write cost per turn
// and per batch, the store's size per session and in all, and each page query's time at that
// size. One iteration is the whole soak: run it with -benchtime 1x. On PostgreSQL too when the
// machine has it (CCTRACE_POSTGRES_BIN). With -short (CI's run of every benchmark), 200
// sessions: enough to see that it works.
func BenchmarkSoak(b *testing.B) {
	turns := recordedTurns(b)
	sessions := soakSessions
	if testing.Short() {
		sessions = 200
	}
	kinds := map[string]func(b *testing.B) (*DB, func() int64){
		"sqlite": func(b *testing.B) (*DB, func() int64) {
			path := filepath.Join(b.TempDir(), "history.db")
			db := open(b, path)
			return db, func() int64 { return fileSize(b, path) + fileSize(b, path+"-wal") }
		},
	}
	if pg := postgres(b); pg != nil {
		kinds["postgres"] = func(b *testing.B) (*DB, func() int64) {
			db := open(b, pg.Database(b))
			return db, func() int64 {
				var n int64
				if err := db.sql.QueryRow(`SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		newDB, ok := kinds[kind]
		if !ok {
			continue
		}
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db, size := newDB(b)
				empty := size()
				b.StartTimer()
				written, batches, elapsed := soak(b, db, turns, sessions)
				b.StopTimer()
				bytes := size() - empty
				b.ReportMetric(float64(elapsed.Nanoseconds())/float64(written), "ns/turn")
				b.ReportMetric(float64(elapsed.Microseconds())/float64(batches)/1000, "ms/batch")
				b.ReportMetric(float64(written), "turns")
				b.ReportMetric(float64(bytes)/float64(sessions), "B/session")
				b.ReportMetric(float64(bytes)/(1<<20), "MiB")
				for name, read := range pageQueries(db) {
					start := time.Now()
					if err := read(context.Background()); err != nil {
						b.Fatalf("%s: %v", name, err)
					}
					b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms/"+name)
				}
				b.StartTimer()
			}
		})
	}
}

// soak writes n sessions into db, the i-th with the turns of recorded session i modulo their
// number, in batches of maxBatch turns.
func soak(b *testing.B, db *DB, recorded [][]summary.Turn, n int) (written, batches int, elapsed time.Duration) {
	b.Helper()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	var batch Batch
	flush := func() {
		t0 := time.Now()
		if err := db.Write(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(t0)
		written += len(batch.Turns)
		batches++
		batch.Turns = batch.Turns[:0]
	}
	for i := range n {
		// Spread over 30 days, with people, teams and projects to filter by.
		at := start.Add(time.Duration(i) * 30 * 24 * time.Hour / time.Duration(n))
		session := recorded[i%len(recorded)]
		d := at.Sub(session[0].Start)
		for j, t := range session {
			batch.Turns = append(batch.Turns, moved(t, fmt.Sprintf("soak-%05d", i), fmt.Sprintf("%016x%016x", i+1, j+1), d,
				"person-"+strconv.Itoa(i%40), "team-"+strconv.Itoa(i%6), "project-"+strconv.Itoa(i%25)))
			if len(batch.Turns) == maxBatch {
				flush()
			}
		}
	}
	if len(batch.Turns) > 0 {
		flush()
	}
	return written, batches, elapsed
}

// moved is t as a turn of another session: its own session and trace ids, people and project,
// and its times moved by d.
func moved(t summary.Turn, session, trace string, d time.Duration, user, team, project string) summary.Turn {
	t.SessionID, t.TraceID = session, trace
	t.User, t.Team, t.Project = user, team, project
	t.Start = t.Start.Add(d)
	if t.End != nil {
		end := t.End.Add(d)
		t.End = &end
	}
	spans := make([]*summary.Record, len(t.Spans))
	for i, r := range t.Spans {
		c := *r
		c.Start = c.Start.Add(d)
		if c.End != nil {
			end := c.End.Add(d)
			c.End = &end
		}
		spans[i] = &c
	}
	t.Spans = spans
	return t
}

// recordedTurns plays every recorded session of the tests and returns each one's ended turns,
// spans included, as the writer gets them.
func recordedTurns(b *testing.B) [][]summary.Turn {
	b.Helper()
	var out [][]summary.Turn
	prices := metrics.DefaultPrices()
	for _, name := range recorded {
		var turns []summary.Turn
		store := summary.New(summary.WithTurnEnded(func(t summary.Turn) { turns = append(turns, t) }))
		lim, err := limits.New(prometheus.NewRegistry(), nil)
		if err != nil {
			b.Fatal(err)
		}
		tr := withAccount{instrument.New(instrument.Sinks{store, lim}, instrument.WithPricing(prices.Cost))}
		exchanges, err := replay.Load(filepath.Join("..", "..", "testdata", "claude-code", name))
		if err != nil {
			b.Fatal(err)
		}
		replay.Play(tr, exchanges)
		tr.tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Hour))
		out = append(out, turns)
	}
	return out
}

// pageQueries are the reads of the turns page, unfiltered and filtered by a person.
func pageQueries(db *DB) map[string]func(context.Context) error {
	person := Query{User: "person-7"}
	return map[string]func(context.Context) error{
		"sessions":     func(ctx context.Context) error { _, err := db.Sessions(ctx, Query{Limit: 50}); return err },
		"top-turns":    func(ctx context.Context) error { _, err := db.TopTurns(ctx, Query{Limit: 5}); return err },
		"top-sessions": func(ctx context.Context) error { _, err := db.TopSessions(ctx, Query{Limit: 5}); return err },
		"spend-day":    func(ctx context.Context) error { _, err := db.Spend(ctx, Query{}, Day, time.UTC); return err },
		"spend-week":   func(ctx context.Context) error { _, err := db.Spend(ctx, Query{}, Week, time.UTC); return err },
		"person-turns": func(ctx context.Context) error { _, err := db.Turns(ctx, person); return err },
	}
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		b.Fatal(err)
	}
	return info.Size()
}
