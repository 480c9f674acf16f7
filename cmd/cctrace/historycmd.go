package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/summary"
)

// historyCmd is "cctrace sessions|turns [flags]": what the history store holds, as the turns
// page shows it, in a table or as JSON.
func historyCmd(command string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.history, "history", "", "the history store: an SQLite file (default history.db in --state-dir) or postgres://… (default CCTRACE_HISTORY)")
	stateDefault := os.Getenv("CCTRACE_STATE_DIR")
	if stateDefault == "" {
		stateDefault = stateDir(os.Getenv)
	}
	fs.StringVar(&o.teams.stateDir, "state-dir", stateDefault, "cctrace's state directory")
	var q history.Query
	fs.StringVar(&q.User, "user", "", "only the sessions and turns of this person")
	fs.StringVar(&q.Team, "team", "", "only those of this team")
	fs.StringVar(&q.Model, "model", "", "only those that used this model")
	fs.StringVar(&q.Project, "project", "", "only those of this project (the working directory's last element)")
	if command == "turns" {
		fs.StringVar(&q.Session, "session", "", "only the turns of this session")
	}
	since := fs.String("since", "", "only what was active since: a duration back from now (24h) or a date (2026-12-01)")
	fs.IntVar(&q.Limit, "limit", 50, "at most this many rows")
	top := fs.Bool("top", false, "the most expensive first, instead of the latest")
	per := fs.String("per", "", "the cost per day or per week instead (day, week)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.history == "" {
		o.history = os.Getenv("CCTRACE_HISTORY") // not the flag's default: -h would show a password
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "cctrace %s: invalid --since: %v\n", command, err)
			return 2
		}
		q.Since = t
	}
	if *per != "" && *per != string(history.Day) && *per != string(history.Week) {
		fmt.Fprintf(stderr, "cctrace %s: invalid --per %q: want day or week\n", command, *per)
		return 2
	}
	dsn := historyStore(o)
	if dsn == string(history.KindMemory) {
		fmt.Fprintf(stderr, "cctrace %s: no history: give --history or --state-dir\n", command)
		return 2
	}
	if !strings.Contains(dsn, "://") && !strings.HasPrefix(dsn, "host=") {
		if _, err := os.Stat(dsn); err != nil {
			fmt.Fprintf(stderr, "cctrace %s: no history at %s: cctrace has not kept any there yet (%v)\n", command, dsn, err)
			return 1
		}
	}
	ctx := context.Background()
	db, err := history.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace %s: %v\n", command, err)
		return 1
	}
	defer db.Close()
	switch {
	case *per != "":
		err = printSpend(ctx, stdout, db, q, history.Period(*per), *asJSON)
	case command == "sessions":
		err = printSessions(ctx, stdout, db, q, *top, *asJSON)
	default:
		err = printTurns(ctx, stdout, db, q, *top, *asJSON)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cctrace %s: %v\n", command, err)
		return 1
	}
	return 0
}

// parseSince reads --since: a duration before now, or a date (in the local time zone).
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor a date (2026-12-01)", v)
}

// sessionJSON is a session as `cctrace sessions --json` prints it.
type sessionJSON struct {
	ID          string     `json:"session_id"`
	User        string     `json:"user,omitempty"`
	Team        string     `json:"team,omitempty"`
	Project     string     `json:"project,omitempty"`
	First       time.Time  `json:"first"`
	Last        time.Time  `json:"last"`
	Turns       int        `json:"turns"`
	Compactions int        `json:"compactions"`
	Requests    int        `json:"requests"`
	Retries     int        `json:"retries"`
	ToolCalls   int        `json:"tool_calls"`
	ToolErrors  int        `json:"tool_errors"`
	Subagents   int        `json:"subagents"`
	Tokens      wire.Usage `json:"tokens"`
	Cost        float64    `json:"cost_usd"`
	Unpriced    int        `json:"unpriced_requests,omitempty"`
}

func printSessions(ctx context.Context, w io.Writer, db *history.DB, q history.Query, top, asJSON bool) error {
	read := db.Sessions
	if top {
		read = db.TopSessions
	}
	sessions, err := read(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]sessionJSON, 0, len(sessions))
		for _, s := range sessions {
			out = append(out, sessionJSON{s.ID, s.User, s.Team, s.Project, s.First, s.Last, s.Turns, s.Compactions, s.Requests,
				s.Retries, s.ToolCalls, s.ToolErrors, s.Subagents, s.Usage, s.Cost, s.Unpriced})
		}
		return writeJSON(w, map[string]any{"sessions": out})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tLAST ACTIVE\tPERSON\tPROJECT\tTURNS\tREQUESTS\tTOOLS\tTOKENS\tCOST")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", s.ID, s.Last.Local().Format("2006-01-02 15:04"), dash(s.User), dash(s.Project),
			s.Turns, s.Requests, s.ToolCalls, summary.InputOutputText(s.Usage), summary.CostText(s.Cost, s.Unpriced))
	}
	return tw.Flush()
}

func printTurns(ctx context.Context, w io.Writer, db *history.DB, q history.Query, top, asJSON bool) error {
	read := db.Turns
	if top {
		read = db.TopTurns
	}
	turns, err := read(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		if turns == nil {
			turns = []summary.Turn{}
		}
		return writeJSON(w, map[string]any{"turns": turns})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRACE\tSESSION\tTURN\tSTARTED\tDURATION\tPERSON\tPROJECT\tMODELS\tREQUESTS\tTOOLS\tCOST\tOUTCOME")
	for _, t := range turns {
		turn := fmt.Sprint(t.Index)
		if t.Root != "turn" {
			turn = "side"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.TraceID, summary.ShortID(t.SessionID), turn,
			t.Start.Local().Format("2006-01-02 15:04:05"), summary.Seconds(t.Duration), dash(t.User), dash(t.Project),
			dash(strings.Join(t.Models, ",")), t.Requests, t.ToolCalls, summary.CostText(t.Cost, t.Unpriced), dash(t.Outcome))
	}
	return tw.Flush()
}

func printSpend(ctx context.Context, w io.Writer, db *history.DB, q history.Query, per history.Period, asJSON bool) error {
	buckets, err := db.Spend(ctx, q, per, time.Local)
	if err != nil {
		return err
	}
	if asJSON {
		if buckets == nil {
			buckets = []history.SpendBucket{}
		}
		return writeJSON(w, map[string]any{"per": per, "spend": buckets})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(string(per))+"\tTURNS\tREQUESTS\tCOST")
	for _, b := range buckets {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", b.Start.Format("2006-01-02 Mon"), b.Turns, b.Requests, summary.Dollars(b.Cost))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
