package history

import (
	"context"
	"fmt"
	"time"

	"github.com/cctrace/cctrace/instrument"
)

var _ instrument.InFlightStore = (*DB)(nil)

// SaveInFlight keeps state under name, replacing what was there; an empty state removes it.
// State is text (the tracker's JSON): SQLite and PostgreSQL keep it alike.
func (db *DB) SaveInFlight(ctx context.Context, name string, state []byte) error {
	var err error
	if len(state) == 0 {
		_, err = db.sql.ExecContext(ctx, db.bind(`DELETE FROM inflight WHERE name = ?`), name)
	} else {
		_, err = db.sql.ExecContext(ctx, db.bind(`INSERT INTO inflight (name, updated_ms, state) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET updated_ms = excluded.updated_ms, state = excluded.state`),
			name, time.Now().UnixMilli(), string(state))
	}
	if err != nil {
		return fmt.Errorf("saving in-flight state %s: %w", name, err)
	}
	return nil
}

// TakeInFlight returns the states whose names start with prefix, and removes them in the same
// statement: of two processes taking one name (two replicas on one PostgreSQL), one gets it.
func (db *DB) TakeInFlight(ctx context.Context, prefix string) (map[string][]byte, error) {
	rows, err := db.sql.QueryContext(ctx, db.bind(`DELETE FROM inflight WHERE substr(name, 1, ?) = ? RETURNING name, state`), len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("taking in-flight state %s: %w", prefix, err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var name, state string
		if err := rows.Scan(&name, &state); err != nil {
			return nil, fmt.Errorf("taking in-flight state %s: %w", prefix, err)
		}
		out[name] = []byte(state)
	}
	return out, rows.Err()
}
