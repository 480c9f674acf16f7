package ui

import (
	"context"
	"slices"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/summary"
)

// WithHistory shows, beside what the summary store holds in memory, the sessions and turns of the
// history store (those of earlier processes, and of the other replicas sharing it), spend per
// day and per week, and the most expensive turns and sessions. store is asked for each page: the
// history may have left its store for one in memory. Default: memory only.
func WithHistory(store func() *history.DB) Option { return func(h *Handler) { h.history = store } }

// spendDays and spendWeeks are how far back the sessions page shows spend.
const (
	spendDays  = 14
	spendWeeks = 8
	topN       = 5
)

// historyQuery is the store's query of a page's filter.
func historyQuery(f summary.Filter, model, project string) history.Query {
	return history.Query{Session: f.Session, User: f.User, Team: f.Team, Model: model, Project: project}
}

// storedSessions adds to rows, the sessions memory holds, those the history holds: a session in
// both takes the history's totals (every process's) plus those of its turns running here.
func (h *Handler) storedSessions(ctx context.Context, p *page, rows []sessionRow, q history.Query, running map[string]*instrument.Totals) []sessionRow {
	db := h.history()
	stored, err := db.Sessions(ctx, q)
	if err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
		p.HistoryError = true
		return rows
	}
	at := make(map[string]int, len(rows))
	for i, r := range rows {
		at[r.ID] = i
	}
	for _, s := range stored {
		i, ok := at[s.ID]
		if !ok {
			rows = append(rows, sessionRow{SessionTotals: s, Path: sessionPath(s.ID)})
			continue
		}
		rows[i].SessionTotals = merged(rows[i].SessionTotals, s, running[s.ID])
	}
	slices.SortStableFunc(rows, func(a, b sessionRow) int { return b.Last.Compare(a.Last) })
	if p.SpendDays, err = db.Spend(ctx, withLimit(q, spendDays), history.Day, time.Local); err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
	}
	if p.SpendWeeks, err = db.Spend(ctx, withLimit(q, spendWeeks), history.Week, time.Local); err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
	}
	top, err := db.TopTurns(ctx, withLimit(q, topN))
	for _, t := range top {
		p.TopTurns = append(p.TopTurns, h.turnRow(t))
	}
	topSessions, err2 := db.TopSessions(ctx, withLimit(q, topN))
	for _, s := range topSessions {
		p.TopSessions = append(p.TopSessions, sessionRow{SessionTotals: s, Path: sessionPath(s.ID)})
	}
	if err := cmpErr(err, err2); err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
	}
	return rows
}

func withLimit(q history.Query, n int) history.Query { q.Limit = n; return q }

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// merged is a session's totals from the history, with what memory alone knows (messages, context,
// blocks) and the totals of its turns running here, which the history gets when they end.
func merged(mem, stored summary.SessionTotals, running *instrument.Totals) summary.SessionTotals {
	out := stored
	out.Messages, out.Blocks, out.Context = mem.Messages, mem.Blocks, mem.Context
	out.Project = cmpOr(out.Project, mem.Project)
	if out.User == "" {
		out.User, out.Team = mem.User, mem.Team
	}
	if mem.First.Before(out.First) {
		out.First = mem.First
	}
	if mem.Last.After(out.Last) {
		out.Last = mem.Last
	}
	if running != nil {
		out.Merge(running)
	}
	if out.Models == nil {
		out.Models = mem.Models
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// storedSession returns a session as the history has it, merged with memory's when both do.
func (h *Handler) storedSession(ctx context.Context, id string, mem summary.SessionTotals, inMemory bool, running *instrument.Totals) (summary.SessionTotals, bool) {
	db := h.history()
	s, ok, err := db.Session(ctx, id)
	if err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
	}
	switch {
	case !ok:
		return mem, inMemory
	case !inMemory:
		return s, true
	}
	return merged(mem, s, running), true
}

// storedTurns adds to turns, newest first, those of the history that memory does not hold.
func (h *Handler) storedTurns(ctx context.Context, turns []summary.Turn, q history.Query) []summary.Turn {
	db := h.history()
	stored, err := db.Turns(ctx, q)
	if err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
		return turns
	}
	type part struct {
		trace string
		start int64
	}
	held := make(map[part]bool, len(turns))
	for _, t := range turns {
		held[part{t.TraceID, t.Start.UnixMilli()}] = true
	}
	for _, t := range stored {
		if !held[part{t.TraceID, t.Start.UnixMilli()}] {
			turns = append(turns, t)
		}
	}
	slices.SortStableFunc(turns, func(a, b summary.Turn) int { return b.Start.Compare(a.Start) })
	return turns
}

// storedShares returns the shares a session and its turns had of its account's windows.
func (h *Handler) storedShares(ctx context.Context, session string) history.Shares {
	db := h.history()
	shares, err := db.Shares(ctx, session)
	if err != nil {
		h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
	}
	if len(shares.Session) == 0 {
		return history.Shares{}
	}
	return shares
}
