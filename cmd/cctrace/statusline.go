package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/summary"
)

// statusTimeout bounds the whole question to the running cctrace: Claude Code waits for the
// status line command, and a cctrace that does not answer at once is as good as absent.
const statusTimeout = 500 * time.Millisecond

// statusInput is what the status line command reads of the JSON Claude Code passes on its
// stdin.
type statusInput struct {
	SessionID string `json:"session_id"`
	Model     struct {
		ID string `json:"id"`
	} `json:"model"`
	ContextWindow struct {
		Size int `json:"context_window_size"`
	} `json:"context_window"`
}

// statusline is `cctrace statusline`, the command for Claude Code's statusLine setting: it
// reads the session from stdin, asks the cctrace at --url (CCTRACE_URL, which cctrace run sets
// for its command) about it, and prints one short line. Whatever goes wrong, it prints a short
// neutral line and exits 0: a status line is no place for an error dump.
func statusline(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("statusline", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	base := fs.String("url", "http://"+defaultMetricsListen, "the running cctrace's turns page address (cctrace run sets CCTRACE_URL for its command)")
	if err := parseArgs("statusline", fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, "Usage: cctrace statusline [--url URL]\n\nFor Claude Code's statusLine setting: reads its JSON on stdin, prints the current turn.\n\n")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "cctrace statusline: %v (see 'cctrace statusline -h')\n", err)
		return 2
	}
	var in statusInput
	if raw, err := io.ReadAll(io.LimitReader(stdin, 1<<20)); err == nil {
		_ = json.Unmarshal(raw, &in) // without a session there is nothing to ask for
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	fmt.Fprintln(stdout, statusText(ctx, *base, in))
	return 0
}

// statusText is the status line for the session in, as the cctrace at base reports it.
func statusText(ctx context.Context, base string, in statusInput) string {
	if in.SessionID == "" {
		return "cctrace: no session"
	}
	st, found, err := fetchStatus(ctx, base, in.SessionID)
	switch {
	case err != nil:
		return "cctrace: not running"
	case !found || st.Turn == nil:
		return "cctrace: no turn yet"
	}
	return statusLineOf(st, in.ContextWindow.Size)
}

// fetchStatus asks the cctrace at base for a session's status. found is false when it does not
// know the session (no request of it came through).
func fetchStatus(ctx context.Context, base, session string) (st summary.SessionStatus, found bool, err error) {
	u := strings.TrimSuffix(base, "/") + "/api/sessions/" + url.PathEscape(session) + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, false, fmt.Errorf("building status request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, false, fmt.Errorf("asking cctrace: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return st, false, nil
	default:
		return st, false, fmt.Errorf("asking cctrace: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return st, false, fmt.Errorf("reading status: %w", err)
	}
	return st, true, nil
}

// statusLineOf renders a session's newest turn and its context, e.g.
//
//	cctrace turn 3 · 12.4s · 5 req · 7 tools · input 48.2k · output 1.2k · hit 94% · $0.0123 · ctx 24% of 200k
//
// Input is every input token, cache reads and writes included, as everywhere. The context is measured
// against window, Claude Code's own figure when it gives one, else cctrace's.
func statusLineOf(st summary.SessionStatus, window int) string {
	t := st.Turn
	var b strings.Builder
	b.WriteString("cctrace turn ")
	b.WriteString(strconv.Itoa(t.Index))
	b.WriteString(" · ")
	b.WriteString(summary.Seconds(t.Duration))
	fmt.Fprintf(&b, " · %d req", t.Requests)
	switch t.ToolCalls {
	case 0:
	case 1:
		b.WriteString(" · 1 tool")
	default:
		fmt.Fprintf(&b, " · %d tools", t.ToolCalls)
	}
	b.WriteString(" · ")
	b.WriteString(summary.InputOutputText(t.Tokens))
	if r, ok := summary.CacheHitRatio(t.Tokens); ok {
		b.WriteString(" · hit ")
		b.WriteString(summary.Percent(r))
	}
	b.WriteString(" · ")
	b.WriteString(summary.CostText(t.Cost, t.Unpriced))
	if c := st.Context; c != nil {
		if window <= 0 {
			window = c.Window
		}
		if window > 0 {
			fmt.Fprintf(&b, " · ctx %s of %s", summary.Percent(float64(c.Tokens)/float64(window)), summary.Count(window))
		}
	}
	if l := st.Limit; l != nil {
		b.WriteString(" · ")
		b.WriteString(limitText(*l, time.Now(), time.Local))
	}
	return b.String()
}

// limitText renders the window that binds the account now, e.g. "5h 42% · resets 20:00", the
// reset in loc (with the weekday when it is more than a day away).
func limitText(w limits.Window, now time.Time, loc *time.Location) string {
	text := w.Name + " " + summary.Percent(w.Utilization)
	if w.Status == "rejected" {
		text = w.Name + " limit reached"
	}
	if !w.Reset.IsZero() {
		layout := "15:04"
		if w.Reset.Sub(now) > 24*time.Hour {
			layout = "Mon 15:04"
		}
		text += " · resets " + w.Reset.In(loc).Format(layout)
	}
	return text
}

// statusStdin is what the status line command reads: stdin, unless it is a terminal (a person
// trying the command), where nothing would ever come. A pipe left open is read for a second
// at most.
func statusStdin() io.Reader {
	if isTerminal(os.Stdin) {
		return strings.NewReader("")
	}
	_ = os.Stdin.SetReadDeadline(time.Now().Add(time.Second)) // a regular file has no deadline, and needs none
	return os.Stdin
}
