package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cctrace/cctrace/summary"
)

// Query picks sessions and turns: each field that is set must match. The zero value picks all,
// newest first, at most DefaultLimit.
type Query struct {
	Session string
	User    string // the person the session or turn is attributed to
	Team    string
	Project string    // the project (summary.Turn.Project)
	Model   string    // a model that answered one of the turn's requests (or the session's)
	Since   time.Time // turns that started then or later; sessions active since
	Limit   int
}

// DefaultLimit is how many rows a Query returns when its Limit is 0.
const DefaultLimit = 200

func (q Query) limit() int {
	if q.Limit <= 0 {
		return DefaultLimit
	}
	return q.Limit
}

// where renders q's conditions on a table with columns session_id, user_name, team and project:
// timeCol is its time column, modelCond the condition that a model answered (one ? for the
// LIKE pattern).
func (q Query) where(timeCol string, modelCond string) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, a ...any) { conds = append(conds, cond); args = append(args, a...) }
	if q.Session != "" {
		add("session_id = ?", q.Session)
	}
	if q.User != "" {
		add("user_name = ?", q.User)
	}
	if q.Team != "" {
		add("team = ?", q.Team)
	}
	if q.Project != "" {
		add("project = ?", q.Project)
	}
	if q.Model != "" {
		add(modelCond, "% "+q.Model+" %")
	}
	if !q.Since.IsZero() {
		add(timeCol+" >= ?", ms(q.Since))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

const sessionColumns = `session_id, first_ms, last_ms, user_name, team, project, turns, compactions, requests, retries,
	tool_calls, tool_errors, subagents, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
	cache_creation_5m_tokens, cache_creation_1h_tokens, cost_usd, unpriced`

// Sessions returns the sessions q picks, most recently active first.
func (db *DB) Sessions(ctx context.Context, q Query) ([]summary.SessionTotals, error) {
	return db.sessions(ctx, q, "last_ms DESC")
}

// TopSessions returns the sessions q picks, the most expensive first.
func (db *DB) TopSessions(ctx context.Context, q Query) ([]summary.SessionTotals, error) {
	return db.sessions(ctx, q, "cost_usd DESC, last_ms DESC")
}

func (db *DB) sessions(ctx context.Context, q Query, order string) ([]summary.SessionTotals, error) {
	where, args := q.where("last_ms", "EXISTS (SELECT 1 FROM turns t WHERE t.session_id = sessions.session_id AND t.models LIKE ?)")
	rows, err := db.sql.QueryContext(ctx, db.bind(`SELECT `+sessionColumns+` FROM sessions`+where+` ORDER BY `+order+` LIMIT `+fmt.Sprint(q.limit())), args...)
	if err != nil {
		return nil, fmt.Errorf("reading sessions: %w", err)
	}
	defer rows.Close()
	var out []summary.SessionTotals
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("reading sessions: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func scanSession(row interface{ Scan(...any) error }) (summary.SessionTotals, error) {
	var s summary.SessionTotals
	var first, last int64
	u := &s.Usage
	err := row.Scan(&s.ID, &first, &last, &s.User, &s.Team, &s.Project, &s.Turns, &s.Compactions, &s.Requests, &s.Retries,
		&s.ToolCalls, &s.ToolErrors, &s.Subagents, &u.InputTokens, &u.OutputTokens, &u.CacheReadInputTokens, &u.CacheCreationInputTokens,
		&u.CacheCreation5m, &u.CacheCreation1h, &s.Cost, &s.Unpriced)
	s.First, s.Last = fromMS(first), fromMS(last)
	return s, err
}

// Session returns one session's totals, and false when the store has none. Its tools and models
// are those of the turns the store still holds.
func (db *DB) Session(ctx context.Context, id string) (summary.SessionTotals, bool, error) {
	s, err := scanSession(db.sql.QueryRowContext(ctx, db.bind(`SELECT `+sessionColumns+` FROM sessions WHERE session_id = ?`), id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s, false, nil
	case err != nil:
		return s, false, fmt.Errorf("reading session %s: %w", id, err)
	}
	rows, err := db.sql.QueryContext(ctx, db.bind(`SELECT turn FROM turns WHERE session_id = ? ORDER BY start_ms`), id)
	if err != nil {
		return s, false, fmt.Errorf("reading session %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return s, false, fmt.Errorf("reading session %s: %w", id, err)
		}
		for name, n := range t.ToolCounts {
			s.ToolCounts = addCount(s.ToolCounts, name, n)
		}
		for name, n := range t.ToolFailures {
			s.ToolFailures = addCount(s.ToolFailures, name, n)
		}
		for _, m := range t.Models {
			if !slices.Contains(s.Models, m) {
				s.Models = append(s.Models, m)
			}
		}
	}
	return s, true, rows.Err()
}

func addCount(m map[string]int, k string, n int) map[string]int {
	if m == nil {
		m = make(map[string]int)
	}
	m[k] += n
	return m
}

func scanTurn(row interface{ Scan(...any) error }) (summary.Turn, error) {
	var raw string
	var t summary.Turn
	if err := row.Scan(&raw); err != nil {
		return t, err
	}
	err := json.Unmarshal([]byte(raw), &t)
	return t, err
}

// Turns returns the turns q picks, without their spans, newest first.
func (db *DB) Turns(ctx context.Context, q Query) ([]summary.Turn, error) {
	return db.turns(ctx, q, "start_ms DESC")
}

// TopTurns returns the turns q picks, without their spans, the most expensive first.
func (db *DB) TopTurns(ctx context.Context, q Query) ([]summary.Turn, error) {
	return db.turns(ctx, q, "cost_usd DESC, start_ms DESC")
}

func (db *DB) turns(ctx context.Context, q Query, order string) ([]summary.Turn, error) {
	where, args := q.where("start_ms", "models LIKE ?")
	rows, err := db.sql.QueryContext(ctx, db.bind(`SELECT turn FROM turns`+where+` ORDER BY `+order+` LIMIT `+fmt.Sprint(q.limit())), args...)
	if err != nil {
		return nil, fmt.Errorf("reading turns: %w", err)
	}
	defer rows.Close()
	var out []summary.Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("reading turns: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Turn returns the turn of a trace (its latest part, when a replica handed it off and took it
// back), with its spans, and false when the store has none.
func (db *DB) Turn(ctx context.Context, traceID string) (summary.Turn, bool, error) {
	var raw, spans string
	err := db.sql.QueryRowContext(ctx, db.bind(`SELECT turn, spans FROM turns WHERE trace_id = ? ORDER BY start_ms DESC LIMIT 1`), traceID).Scan(&raw, &spans)
	var t summary.Turn
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t, false, nil
	case err != nil:
		return t, false, fmt.Errorf("reading turn %s: %w", traceID, err)
	}
	if err := json.Unmarshal([]byte(raw), &t); err != nil {
		return t, false, fmt.Errorf("reading turn %s: %w", traceID, err)
	}
	if err := json.Unmarshal([]byte(spans), &t.Spans); err != nil {
		return t, false, fmt.Errorf("reading turn %s: %w", traceID, err)
	}
	return t, true, nil
}

// Period is what Spend adds up over.
type Period string

// Periods of Spend.
const (
	Day  Period = "day"
	Week Period = "week" // Monday to Sunday
)

// SpendBucket is the spend of one day or week. The zero value is nothing spent.
type SpendBucket struct {
	Start    time.Time `json:"start"` // the day's or the week's first midnight
	Turns    int       `json:"turns"`
	Requests int       `json:"requests"`
	Cost     float64   `json:"cost_usd"`
}

const msPerDay = 24 * 60 * 60 * 1000

// Spend adds up the turns q picks by day or week (in loc's offset from UTC now: a day is
// midnight to midnight there), the latest first, at most q.Limit of them.
func (db *DB) Spend(ctx context.Context, q Query, p Period, loc *time.Location) ([]SpendBucket, error) {
	_, off := time.Now().In(loc).Zone()
	offMS := int64(off) * 1000
	// Day numbers count from 1970-01-01, a Thursday: adding 3 before dividing by 7 starts weeks
	// on Mondays.
	bucket := fmt.Sprintf("((start_ms + %d) / %d)", offMS, msPerDay)
	if p == Week {
		bucket = fmt.Sprintf("(((start_ms + %d) / %d + 3) / 7)", offMS, msPerDay)
	}
	where, args := q.where("start_ms", "models LIKE ?")
	rows, err := db.sql.QueryContext(ctx, db.bind(`SELECT `+bucket+` AS b, COUNT(*), SUM(`+requestsOf+`), SUM(cost_usd) FROM turns`+where+
		` GROUP BY b ORDER BY b DESC LIMIT `+fmt.Sprint(q.limit())), args...)
	if err != nil {
		return nil, fmt.Errorf("reading spend: %w", err)
	}
	defer rows.Close()
	var out []SpendBucket
	for rows.Next() {
		var b int64
		var sb SpendBucket
		var reqs sql.NullInt64
		if err := rows.Scan(&b, &sb.Turns, &reqs, &sb.Cost); err != nil {
			return nil, fmt.Errorf("reading spend: %w", err)
		}
		sb.Requests = int(reqs.Int64)
		day := b
		if p == Week {
			day = b*7 - 3
		}
		sb.Start = time.UnixMilli(day*msPerDay - offMS).In(loc)
		out = append(out, sb)
	}
	return out, rows.Err()
}

// requestsOf is a turn's request count, read from the requests table.
const requestsOf = `(SELECT COUNT(*) FROM requests r WHERE r.trace_id = turns.trace_id AND r.start_ms >= turns.start_ms AND r.start_ms <= turns.end_ms)`

// Shares are a session's shares of the windows it used: by window, and by turn (trace id) and
// window. The zero value is none.
type Shares struct {
	Session map[string]float64
	Turns   map[string]map[string]float64
}

// Shares returns the shares of a session and its turns.
func (db *DB) Shares(ctx context.Context, session string) (Shares, error) {
	rows, err := db.sql.QueryContext(ctx, db.bind(`SELECT trace_id, window_name, SUM(growth) FROM limit_shares WHERE session_id = ? GROUP BY trace_id, window_name`), session)
	if err != nil {
		return Shares{}, fmt.Errorf("reading shares: %w", err)
	}
	defer rows.Close()
	out := Shares{Session: map[string]float64{}, Turns: map[string]map[string]float64{}}
	for rows.Next() {
		var trace, window string
		var g float64
		if err := rows.Scan(&trace, &window, &g); err != nil {
			return Shares{}, fmt.Errorf("reading shares: %w", err)
		}
		out.Session[window] += g
		if trace == "" {
			continue
		}
		if out.Turns[trace] == nil {
			out.Turns[trace] = map[string]float64{}
		}
		out.Turns[trace][window] += g
	}
	return out, rows.Err()
}
