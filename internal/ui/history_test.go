package ui

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// storedHistory replays recorded sessions into a summary store that hands its ended turns to a
// history in a file, as an earlier cctrace did, and returns that file, closed.
func storedHistory(t *testing.T, scenarios ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	db, err := history.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var turns []summary.Turn
	store := summary.New(summary.WithTurnEnded(func(tu summary.Turn) { turns = append(turns, tu) }))
	var seed uint64
	tr := instrument.New(store, instrument.WithIDSource(func() uint64 { seed++; return seed }),
		instrument.WithPricing(metrics.DefaultPrices().Cost))
	for _, name := range scenarios {
		exchanges, err := replay.Load(filepath.Join("..", "..", "testdata", "claude-code", name))
		if err != nil {
			t.Fatal(err)
		}
		replay.Play(tr, exchanges)
		tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	}
	if err := db.Write(context.Background(), &history.Batch{Turns: turns}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPagesFromHistory: a cctrace started again shows the sessions an earlier one kept beside its
// own: on the sessions page, with spend by day and week and the most expensive turns; a session
// and a turn of the earlier process open; filters by project and model narrow the list.
func TestPagesFromHistory(t *testing.T) {
	path := storedHistory(t, "subagent", "retry_529")
	db, err := history.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(storeOf(t, "parallel_tools"), WithHistory(func() *history.DB { return db }))

	code, body := get(t, h, "/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d:\n%s", code, body)
	}
	for _, want := range []string{">488d20f6<", ">e92fbde9<", ">1172a797<", `id="cost-days"`, `id="cost-weeks"`, `id="top-turns"`, `id="top-sessions"`, `href="/?project=work"`} {
		if !strings.Contains(body, want) {
			t.Errorf("sessions page lacks %q", want)
		}
	}
	code, body = get(t, h, "/sessions/488d20f6-3b70-45b7-b396-7a7317412c43")
	if code != http.StatusOK || !strings.Contains(body, `href="/turns/`) {
		t.Fatalf("a session of the history: %d\n%s", code, body)
	}
	turn := hrefRE.FindAllStringSubmatch(body[strings.Index(body, `id="turns"`):], -1)[0][1]
	share := limits.Share{Account: "acct-1", Window: "5h", SessionID: "488d20f6-3b70-45b7-b396-7a7317412c43",
		TraceID: strings.TrimPrefix(turn, "/turns/"), At: time.Now(), Growth: 0.012}
	if err := db.Write(context.Background(), &history.Batch{Shares: []limits.Share{share}}); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, h, "/sessions/488d20f6-3b70-45b7-b396-7a7317412c43")
	if !strings.Contains(body, `<dd>5h 1.2%</dd>`) || !strings.Contains(body, `<td class="turn-share">5h 1.2%</td>`) {
		t.Errorf("the session's page does not show its share of the 5h window:\n%s", body)
	}
	if code, body := get(t, h, turn); code != http.StatusOK || !strings.Contains(body, "execute_tool Agent") {
		t.Errorf("GET %s (a turn of the history) = %d:\n%s", turn, code, body)
	}
	if _, body := get(t, h, "/?project=nowhere"); strings.Contains(body, ">488d20f6<") {
		t.Errorf("a project filter shows other projects' sessions")
	}
	if _, body := get(t, h, "/?model=claude-none-1"); strings.Contains(body, ">488d20f6<") || strings.Contains(body, ">1172a797<") {
		t.Errorf("a model filter shows sessions of other models")
	}
	if _, body := get(t, h, "/?model=claude-opus-5-5"); !strings.Contains(body, ">488d20f6<") || !strings.Contains(body, ">1172a797<") {
		t.Errorf("a model filter leaves out sessions of that model:\n%s", body)
	}
}
