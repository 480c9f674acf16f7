// Package history keeps what cctrace saw beyond the process: sessions, turns (with their spans),
// request summaries, limit readings and each turn's share of a window, in an embedded SQLite
// file in the state directory by default, or in PostgreSQL for several replicas that should
// show one history (docs/history.md). Writes happen on a goroutine of their own, in batches,
// fed from the sinks; a store that fails is left for one in memory, and forwarding never waits.
package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go
)

// Kind is where a DB keeps history.
type Kind string

// Kinds of store.
const (
	KindSQLite   Kind = "sqlite"   // a file, the default
	KindPostgres Kind = "postgres" // a shared server, for several replicas
	KindMemory   Kind = "memory"   // an SQLite database in memory: nothing outlives the process
)

// DB is one opened store. Its methods are safe for concurrent use. The zero value is not usable;
// call Open.
type DB struct {
	sql  *sql.DB
	kind Kind
	// where names the store in logs, without a password.
	where string
	// writes are Write's statements, prepared once.
	writes writeStmts
}

// memorySeq names each in-memory database apart: two in one process must not share one.
var memorySeq atomic.Int64

// Open opens (and creates, or brings up to date) the store dsn names: "memory", a postgres:// or
// postgresql:// URL (or key=value connection string starting "host="), or else the path of an
// SQLite file, whose directory is created.
func Open(ctx context.Context, dsn string) (*DB, error) {
	var db *DB
	switch kindOf(dsn) {
	case KindMemory:
		// One connection: every connection to ":memory:" would be a database of its own.
		name := "file:cctrace-history-" + strconv.FormatInt(memorySeq.Add(1), 10) + "?mode=memory&cache=shared"
		s, err := sql.Open("sqlite", name)
		if err != nil {
			return nil, fmt.Errorf("opening history in memory: %w", err)
		}
		s.SetMaxOpenConns(1)
		db = &DB{sql: s, kind: KindMemory, where: "memory"}
	case KindPostgres:
		s, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("opening history in PostgreSQL: %w", err)
		}
		s.SetMaxOpenConns(4)
		db = &DB{sql: s, kind: KindPostgres, where: RedactDSN(dsn)}
	default:
		if dsn == "" {
			return nil, errors.New("opening history: no store named")
		}
		if err := os.MkdirAll(filepath.Dir(dsn), 0o700); err != nil {
			return nil, fmt.Errorf("opening history: %w", err)
		}
		// WAL lets `cctrace sessions` read while cctrace writes; a busy timeout lets two
		// writers (a serve and a run on one state directory) take turns.
		s, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=auto_vacuum(incremental)&_pragma=synchronous(NORMAL)")
		if err != nil {
			return nil, fmt.Errorf("opening history %s: %w", dsn, err)
		}
		s.SetMaxOpenConns(2)
		db = &DB{sql: s, kind: KindSQLite, where: dsn}
	}
	err := db.migrate(ctx)
	if err == nil {
		err = db.prepare(ctx)
	}
	if err != nil {
		db.sql.Close()
		return nil, fmt.Errorf("opening history %s: %w", db.where, err)
	}
	return db, nil
}

// kindOf is the kind of store dsn names (Open).
func kindOf(dsn string) Kind {
	switch {
	case dsn == string(KindMemory):
		return KindMemory
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), strings.HasPrefix(dsn, "host="):
		return KindPostgres
	}
	return KindSQLite
}

// Kind says where the DB keeps history.
func (db *DB) Kind() Kind { return db.kind }

// Where names the store for logs: its file, "memory", or the server's URL without a password.
func (db *DB) Where() string { return db.where }

// Close closes the store.
func (db *DB) Close() error { return db.sql.Close() }

// bind rewrites a query written with ? placeholders for the DB's driver: PostgreSQL numbers them.
func (db *DB) bind(q string) string {
	if db.kind != KindPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// RedactDSN drops a password from a connection URL or string, for what may be shown.
func RedactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			cred := rest[:at]
			if c := strings.IndexByte(cred, ':'); c >= 0 {
				cred = cred[:c] + ":xxxxx"
			}
			return dsn[:i+3] + cred + rest[at:]
		}
		return dsn
	}
	var out []string
	for _, kv := range strings.Fields(dsn) {
		if strings.HasPrefix(kv, "password=") {
			kv = "password=xxxxx"
		}
		out = append(out, kv)
	}
	return strings.Join(out, " ")
}
