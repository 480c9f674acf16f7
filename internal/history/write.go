package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/summary"
)

// Batch is what one transaction writes. The zero value writes nothing.
type Batch struct {
	Turns    []summary.Turn
	Readings []limits.Reading
	Shares   []limits.Share
}

// Len is how many records the batch holds.
func (b *Batch) Len() int { return len(b.Turns) + len(b.Readings) + len(b.Shares) }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// modelList is how a turn's models are stored: " a b ", so that LIKE '% a %' finds one.
func modelList(models []string) string {
	if len(models) == 0 {
		return ""
	}
	return " " + strings.Join(models, " ") + " "
}

// The statements a Write runs, prepared once per connection (DB.prepare): SQLite would
// otherwise parse each anew for every record, and parsing the session upsert costs more than
// running it.
const (
	insertTurn = `INSERT INTO turns (trace_id, start_ms, end_ms, session_id, user_name, team, project, models, root, outcome, cost_usd, turn, spans)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trace_id, start_ms) DO NOTHING`
	insertRequest = `INSERT INTO requests (trace_id, span_id, session_id, start_ms, end_ms, model, kind, attempt, http_status, stop_reason,
			input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trace_id, span_id) DO NOTHING`
	upsertSession = `INSERT INTO sessions (session_id, first_ms, last_ms, user_name, team, project, turns, compactions,
		requests, retries, tool_calls, tool_errors, subagents, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
		cache_creation_5m_tokens, cache_creation_1h_tokens, cost_usd, unpriced)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET
			first_ms = CASE WHEN excluded.first_ms < sessions.first_ms THEN excluded.first_ms ELSE sessions.first_ms END,
			last_ms = CASE WHEN excluded.last_ms > sessions.last_ms THEN excluded.last_ms ELSE sessions.last_ms END,
			user_name = CASE WHEN sessions.user_name = '' THEN excluded.user_name ELSE sessions.user_name END,
			team = CASE WHEN sessions.team = '' THEN excluded.team ELSE sessions.team END,
			project = CASE WHEN sessions.project = '' THEN excluded.project ELSE sessions.project END,
			turns = sessions.turns + excluded.turns,
			compactions = sessions.compactions + excluded.compactions,
			requests = sessions.requests + excluded.requests,
			retries = sessions.retries + excluded.retries,
			tool_calls = sessions.tool_calls + excluded.tool_calls,
			tool_errors = sessions.tool_errors + excluded.tool_errors,
			subagents = sessions.subagents + excluded.subagents,
			input_tokens = sessions.input_tokens + excluded.input_tokens,
			output_tokens = sessions.output_tokens + excluded.output_tokens,
			cache_read_tokens = sessions.cache_read_tokens + excluded.cache_read_tokens,
			cache_creation_tokens = sessions.cache_creation_tokens + excluded.cache_creation_tokens,
			cache_creation_5m_tokens = sessions.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
			cache_creation_1h_tokens = sessions.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
			cost_usd = sessions.cost_usd + excluded.cost_usd,
			unpriced = sessions.unpriced + excluded.unpriced`
	insertReading = `INSERT INTO limit_readings (account, window_name, at_ms, utilization, reset_ms, status)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account, window_name, at_ms) DO NOTHING`
	upsertShare = `INSERT INTO limit_shares (trace_id, window_name, session_id, account, user_name, growth, last_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (trace_id, window_name, session_id) DO UPDATE SET
				growth = limit_shares.growth + excluded.growth, last_ms = excluded.last_ms`
)

// writeStmts are the statements a Write runs, prepared when the store is opened.
type writeStmts struct {
	turn, request, session, reading, share *sql.Stmt
}

// prepare prepares the statements a Write runs.
func (db *DB) prepare(ctx context.Context) error {
	for _, s := range []struct {
		to  **sql.Stmt
		sql string
	}{
		{&db.writes.turn, insertTurn},
		{&db.writes.request, insertRequest},
		{&db.writes.session, upsertSession},
		{&db.writes.reading, insertReading},
		{&db.writes.share, upsertShare},
	} {
		stmt, err := db.sql.PrepareContext(ctx, db.bind(s.sql))
		if err != nil {
			return fmt.Errorf("preparing the history's writes: %w", err)
		}
		*s.to = stmt
	}
	return nil
}

// txWrites are a DB's writeStmts in one transaction.
type txWrites writeStmts

func (w *writeStmts) in(ctx context.Context, tx *sql.Tx) *txWrites {
	return &txWrites{
		turn:    tx.StmtContext(ctx, w.turn),
		request: tx.StmtContext(ctx, w.request),
		session: tx.StmtContext(ctx, w.session),
		reading: tx.StmtContext(ctx, w.reading),
		share:   tx.StmtContext(ctx, w.share),
	}
}

// Write writes b in one transaction.
func (db *DB) Write(ctx context.Context, b *Batch) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing history: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op; it closes the statements too
	w := db.writes.in(ctx, tx)
	for i := range b.Turns {
		if err := w.writeTurn(ctx, &b.Turns[i]); err != nil {
			return fmt.Errorf("writing turn %s: %w", b.Turns[i].TraceID, err)
		}
	}
	for _, r := range b.Readings {
		if _, err := w.reading.ExecContext(ctx, r.Account, r.Window, ms(r.At), r.Utilization, ms(r.Reset), r.Status); err != nil {
			return fmt.Errorf("writing a limit reading: %w", err)
		}
	}
	for _, s := range b.Shares {
		if _, err := w.share.ExecContext(ctx, s.TraceID, s.Window, s.SessionID, s.Account, s.User, s.Growth, ms(s.At)); err != nil {
			return fmt.Errorf("writing a limit share: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing history: %w", err)
	}
	return nil
}

// writeTurn writes an ended turn, its requests, and adds it to its session's totals. A turn
// written again (the same trace and start) replaces the first and adds nothing twice.
func (w *txWrites) writeTurn(ctx context.Context, t *summary.Turn) error {
	spans, err := json.Marshal(t.Spans)
	if err != nil {
		return err
	}
	bare := *t
	bare.Spans = nil
	turn, err := json.Marshal(&bare)
	if err != nil {
		return err
	}
	end := t.Start
	if t.End != nil {
		end = *t.End
	}
	res, err := w.turn.ExecContext(ctx,
		t.TraceID, ms(t.Start), ms(end), t.SessionID, t.User, t.Team, t.Project, modelList(t.Models), t.Root, t.Outcome, t.Cost, string(turn), string(spans))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return nil // written before: its session has it already
	}
	for _, r := range t.Spans {
		if r.Kind != "chat" {
			continue
		}
		var u struct{ in, out, cr, cw int }
		if r.Tokens != nil {
			u.in, u.out, u.cr, u.cw = r.Tokens.InputTokens, r.Tokens.OutputTokens, r.Tokens.CacheReadInputTokens, r.Tokens.CacheCreationInputTokens
		}
		rend := r.Start
		if r.End != nil {
			rend = *r.End
		}
		_, err := w.request.ExecContext(ctx,
			t.TraceID, r.SpanID, t.SessionID, ms(r.Start), ms(rend), r.Model, r.Request, r.Attempt, r.StatusCode, r.StopReason,
			u.in, u.out, u.cr, u.cw, r.Cost)
		if err != nil {
			return err
		}
	}
	turns, compactions := 0, 0
	if t.Root == "turn" && t.Outcome != "handed_off" {
		// A part of a turn this replica handed off is counted by the replica that ended it.
		turns = 1
	}
	if t.Compacted != "" {
		compactions = 1
	}
	u := t.Usage
	_, err = w.session.ExecContext(ctx,
		t.SessionID, ms(t.Start), ms(end), t.User, t.Team, t.Project, turns, compactions,
		t.Requests, t.Retries, t.ToolCalls, t.ToolErrors, t.Subagents,
		u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.CacheCreation5m, u.CacheCreation1h, t.Cost, t.Unpriced)
	return err
}
