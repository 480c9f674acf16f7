package instrument

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/replay"
)

var update = flag.Bool("update", false, "rewrite the golden span trees of recorded sessions")

// TestRecordedSessions replays traffic recorded from the real Claude Code CLI (testdata/
// claude-code, see its README) through the tracker and compares the span trees with the golden
// files beside them (want.tree). Run with -update after checking a change by eye.
func TestRecordedSessions(t *testing.T) {
	dirs, err := replay.Sessions("../testdata/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			exchanges, err := replay.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(t)
			var seed uint64
			tr := New(rec, WithIDSource(func() uint64 { seed++; return seed }))
			replay.Play(tr, exchanges)
			last := exchanges[len(exchanges)-1].Response.End
			tr.Tick(last.Add(time.Minute)) // side requests that no turn adopted
			got := rec.traces()
			golden := filepath.Join(dir, "want.tree")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./instrument -run TestRecordedSessions -update)", err)
			}
			if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				t.Errorf("span trees differ from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
			}
			if filepath.Base(dir) == "plan_mode" {
				// Plan Mode is announced in a system message and ended by "## Exited Plan Mode".
				for _, s := range rec.spans {
					if s.Turn != nil && (s.Turn.PlanModeEntered.IsZero() || !s.Turn.PlanModeExited.After(s.Turn.PlanModeEntered)) {
						t.Errorf("plan mode entered %v, exited %v", s.Turn.PlanModeEntered, s.Turn.PlanModeExited)
					}
				}
			}
			if strings.Contains(got, "OPEN") {
				t.Errorf("spans left open:\n%s", got)
			}
		})
	}
	if n < 8 {
		t.Fatalf("found %d recorded sessions, want the scenarios of testdata/claude-code", n)
	}
}
