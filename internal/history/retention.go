package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Retention is what a store keeps: nothing older than MaxAge, and no more than MaxBytes, the
// oldest going first. A zero field sets no bound of its kind.
type Retention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// DefaultRetention keeps 90 days of history in at most 1 GiB.
var DefaultRetention = Retention{MaxAge: 90 * 24 * time.Hour, MaxBytes: 1 << 30}

// maxPrunePasses bounds how many tenths of the turns one Prune removes for size.
const maxPrunePasses = 10

// Prune removes what r does not keep, as of now, and returns how many turns went.
func (db *DB) Prune(ctx context.Context, r Retention, now time.Time) (int, error) {
	removed := 0
	if r.MaxAge > 0 {
		n, err := db.removeBefore(ctx, ms(now.Add(-r.MaxAge)))
		if err != nil {
			return removed, fmt.Errorf("pruning by age: %w", err)
		}
		removed += n
	}
	if r.MaxBytes <= 0 {
		return removed, nil
	}
	for range maxPrunePasses {
		size, err := db.Size(ctx)
		if err != nil || size <= r.MaxBytes {
			return removed, err
		}
		// The start of the oldest tenth of the turns: what goes in this pass.
		var turns int64
		if err := db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM turns`).Scan(&turns); err != nil {
			return removed, fmt.Errorf("pruning by size: %w", err)
		}
		var cut int64
		err = db.sql.QueryRowContext(ctx, db.bind(`SELECT start_ms FROM turns ORDER BY start_ms LIMIT 1 OFFSET ?`), turns/10).Scan(&cut)
		if errors.Is(err, sql.ErrNoRows) {
			return removed, nil // nothing left to remove: the rest is the schema
		}
		if err != nil {
			return removed, fmt.Errorf("pruning by size: %w", err)
		}
		n, err := db.removeBefore(ctx, cut+1)
		if err != nil {
			return removed, fmt.Errorf("pruning by size: %w", err)
		}
		removed += n
		if n == 0 {
			return removed, nil
		}
	}
	return removed, nil
}

// removeBefore removes turns that started before cut (Unix ms), and the requests, readings,
// shares and sessions last seen before it.
func (db *DB) removeBefore(ctx context.Context, cut int64) (int, error) {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, db.bind(`DELETE FROM turns WHERE start_ms < ?`), cut)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	for _, stmt := range []string{
		`DELETE FROM requests WHERE start_ms < ?`,
		`DELETE FROM limit_readings WHERE at_ms < ?`,
		`DELETE FROM limit_shares WHERE last_ms < ?`,
		`DELETE FROM sessions WHERE last_ms < ?`,
		`DELETE FROM inflight WHERE updated_ms < ?`,
	} {
		if _, err := tx.ExecContext(ctx, db.bind(stmt), cut); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	if n > 0 && db.kind != KindPostgres {
		// Give the freed pages back to the file system (auto_vacuum is incremental).
		if _, err := db.sql.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
			return int(n), err
		}
	}
	return int(n), nil
}

// Size is how large the store is, in bytes: for SQLite the pages in use; for PostgreSQL, whose
// files shrink only when it vacuums, the bytes of the turns it holds, which are most of it.
func (db *DB) Size(ctx context.Context) (int64, error) {
	var size int64
	var err error
	if db.kind == KindPostgres {
		err = db.sql.QueryRowContext(ctx, `SELECT COALESCE(SUM(octet_length(turn) + octet_length(spans)), 0) FROM turns`).Scan(&size)
	} else {
		err = db.sql.QueryRowContext(ctx, `SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()`).Scan(&size)
	}
	if err != nil {
		return 0, fmt.Errorf("measuring the store: %w", err)
	}
	return size, nil
}
