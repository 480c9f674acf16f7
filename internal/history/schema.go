package history

import (
	"context"
	"fmt"
	"strings"
)

// schemaVersion is the version of the tables below; a store of another version is refused (a
// newer cctrace wrote it) or brought up to date (an older one did).
const schemaVersion = 1

// schema creates the tables, in SQL that SQLite and PostgreSQL read alike. Times are Unix
// milliseconds; models are stored as " a b " so that a LIKE finds one whole. docs/history.md
// describes every table.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS meta (
		name  TEXT PRIMARY KEY,
		value TEXT NOT NULL
	)`,
	// A session's totals, added up from its turns by every process that wrote one: additive
	// upserts, so that replicas and restarts add to one row.
	`CREATE TABLE IF NOT EXISTS sessions (
		session_id  TEXT PRIMARY KEY,
		first_ms    BIGINT NOT NULL,
		last_ms     BIGINT NOT NULL,
		user_name   TEXT NOT NULL DEFAULT '',
		team        TEXT NOT NULL DEFAULT '',
		project     TEXT NOT NULL DEFAULT '',
		turns       BIGINT NOT NULL DEFAULT 0,
		compactions BIGINT NOT NULL DEFAULT 0,
		requests    BIGINT NOT NULL DEFAULT 0,
		retries     BIGINT NOT NULL DEFAULT 0,
		tool_calls  BIGINT NOT NULL DEFAULT 0,
		tool_errors BIGINT NOT NULL DEFAULT 0,
		subagents   BIGINT NOT NULL DEFAULT 0,
		input_tokens          BIGINT NOT NULL DEFAULT 0,
		output_tokens         BIGINT NOT NULL DEFAULT 0,
		cache_read_tokens     BIGINT NOT NULL DEFAULT 0,
		cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
		cache_creation_5m_tokens BIGINT NOT NULL DEFAULT 0,
		cache_creation_1h_tokens BIGINT NOT NULL DEFAULT 0,
		cost_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
		unpriced    BIGINT NOT NULL DEFAULT 0
	)`,
	`CREATE INDEX IF NOT EXISTS sessions_last ON sessions (last_ms)`,
	// One row per ended turn (or part of a turn a replica handed off: the same trace, another
	// start). turn is the turn as the turns page shows it, without its spans; spans its spans.
	`CREATE TABLE IF NOT EXISTS turns (
		trace_id   TEXT NOT NULL,
		start_ms   BIGINT NOT NULL,
		end_ms     BIGINT NOT NULL,
		session_id TEXT NOT NULL,
		user_name  TEXT NOT NULL DEFAULT '',
		team       TEXT NOT NULL DEFAULT '',
		project    TEXT NOT NULL DEFAULT '',
		models     TEXT NOT NULL DEFAULT '',
		root       TEXT NOT NULL,
		outcome    TEXT NOT NULL DEFAULT '',
		cost_usd   DOUBLE PRECISION NOT NULL DEFAULT 0,
		turn       TEXT NOT NULL,
		spans      TEXT NOT NULL,
		PRIMARY KEY (trace_id, start_ms)
	)`,
	`CREATE INDEX IF NOT EXISTS turns_session ON turns (session_id, start_ms)`,
	`CREATE INDEX IF NOT EXISTS turns_start ON turns (start_ms)`,
	`CREATE INDEX IF NOT EXISTS turns_cost ON turns (cost_usd)`,
	// One row per API request attempt of a turn: its summary, and a place for its anatomy (what
	// fills its context, by part), NULL until something writes one.
	`CREATE TABLE IF NOT EXISTS requests (
		trace_id    TEXT NOT NULL,
		span_id     TEXT NOT NULL,
		session_id  TEXT NOT NULL,
		start_ms    BIGINT NOT NULL,
		end_ms      BIGINT NOT NULL,
		model       TEXT NOT NULL DEFAULT '',
		kind        TEXT NOT NULL DEFAULT '',
		attempt     BIGINT NOT NULL DEFAULT 0,
		http_status BIGINT NOT NULL DEFAULT 0,
		stop_reason TEXT NOT NULL DEFAULT '',
		input_tokens          BIGINT NOT NULL DEFAULT 0,
		output_tokens         BIGINT NOT NULL DEFAULT 0,
		cache_read_tokens     BIGINT NOT NULL DEFAULT 0,
		cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
		cost_usd    DOUBLE PRECISION,
		anatomy     TEXT,
		PRIMARY KEY (trace_id, span_id)
	)`,
	`CREATE INDEX IF NOT EXISTS requests_start ON requests (start_ms)`,
	// What an account's answers said of a window (or an API key's kind), when it changed.
	`CREATE TABLE IF NOT EXISTS limit_readings (
		account     TEXT NOT NULL,
		window_name TEXT NOT NULL,
		at_ms       BIGINT NOT NULL,
		utilization DOUBLE PRECISION NOT NULL,
		reset_ms    BIGINT NOT NULL DEFAULT 0,
		status      TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (account, window_name, at_ms)
	)`,
	// A turn's share of a window's growth (limits.Share), added up.
	`CREATE TABLE IF NOT EXISTS limit_shares (
		trace_id    TEXT NOT NULL,
		window_name TEXT NOT NULL,
		session_id  TEXT NOT NULL,
		account     TEXT NOT NULL,
		user_name   TEXT NOT NULL DEFAULT '',
		growth      DOUBLE PRECISION NOT NULL,
		last_ms     BIGINT NOT NULL,
		PRIMARY KEY (trace_id, window_name, session_id)
	)`,
	`CREATE INDEX IF NOT EXISTS limit_shares_session ON limit_shares (session_id)`,
	// What the tracker keeps of turns in flight, to pick them up after a restart
	// (instrument.InFlightStore).
	`CREATE TABLE IF NOT EXISTS inflight (
		name       TEXT PRIMARY KEY,
		updated_ms BIGINT NOT NULL,
		state      TEXT NOT NULL
	)`,
}

// migrate creates the tables and checks the store's version.
func (db *DB) migrate(ctx context.Context) error {
	for _, stmt := range schema {
		if _, err := db.sql.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating tables: %w", err)
		}
	}
	var v string
	err := db.sql.QueryRowContext(ctx, db.bind(`SELECT value FROM meta WHERE name = 'schema_version'`)).Scan(&v)
	switch {
	case err == nil && v != fmt.Sprint(schemaVersion):
		return fmt.Errorf("the store has schema version %s, this cctrace knows %d: use the cctrace that wrote it, or another store", v, schemaVersion)
	case err == nil:
		return nil
	case !strings.Contains(err.Error(), "no rows"):
		return fmt.Errorf("reading the schema version: %w", err)
	}
	_, err = db.sql.ExecContext(ctx, db.bind(`INSERT INTO meta (name, value) VALUES ('schema_version', ?) ON CONFLICT (name) DO NOTHING`), fmt.Sprint(schemaVersion))
	if err != nil {
		return fmt.Errorf("writing the schema version: %w", err)
	}
	return nil
}
