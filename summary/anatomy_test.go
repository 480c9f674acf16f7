package summary

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/replay"
)

// TestRecordAnatomy replays recorded sessions into the store: every answered chat record keeps
// its input by part, adding up to its tokens, in at most maxAnatomyParts parts; the request after
// the model change says so in words and names the cache miss.
func TestRecordAnatomy(t *testing.T) {
	for _, name := range []string{"long_session", "cache_model_change", "compaction"} {
		t.Run(name, func(t *testing.T) {
			store, _ := replayed(t, name)
			var words []string
			misses := 0
			for _, turn := range store.TurnsWhere(Filter{}) {
				for _, r := range turn.Spans {
					if r.Tokens == nil {
						continue
					}
					a := r.Anatomy
					if a == nil {
						t.Fatalf("%s: %s answered with usage, no anatomy", turn.TraceID, r.Name)
					}
					if a.Total() != r.Tokens.TotalInput() || len(a.Parts) > maxAnatomyParts || len(a.New) > maxNewParts {
						t.Errorf("%s: parts add up to %d in %d parts, input %d", r.Name, a.Total(), len(a.Parts), r.Tokens.TotalInput())
					}
					words = append(words, a.Changes...)
					if a.CacheMiss != "" {
						misses++
					}
				}
			}
			if name == "cache_model_change" {
				if misses != 1 || !strings.Contains(strings.Join(words, " "), "The model changed from claude-opus-5-5 to claude-sonnet-4-5.") {
					t.Errorf("misses %d, changes %q", misses, words)
				}
			}
		})
	}
}

// TestLargest keeps the heaviest parts in their order and adds up the rest.
func TestLargest(t *testing.T) {
	ps := []AnatomyPart{{Kind: "a", Read: 5}, {Kind: "b", Read: 1}, {Kind: "c", Write: 9}, {Kind: "d", Uncached: 2}}
	got := largest(ps, 3, AnatomyPart.Tokens)
	if len(got) != 3 || got[0].Kind != "a" || got[1].Kind != "c" || got[2].Kind != "other" || got[2].Read != 1 || got[2].Uncached != 2 {
		t.Errorf("largest: %+v", got)
	}
	if got := largest(ps, 4, AnatomyPart.Tokens); len(got) != 4 {
		t.Errorf("largest of as many as kept: %+v", got)
	}
}

// TestSessionRecognisable: a session keeps its models and, with content capture on, its first
// prompt, so that the sessions page can say which session is which.
func TestSessionRecognisable(t *testing.T) {
	exchanges, err := replay.Load(filepath.Join("..", "testdata", "claude-code", "cache_model_change"))
	if err != nil {
		t.Fatal(err)
	}
	store := New()
	tr := instrument.New(store, instrument.WithContentCapture(nil))
	replay.Play(tr, exchanges)
	tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	s := store.Sessions()
	if len(s) != 1 || s[0].FirstPrompt != "Remember the word pineapple." || !slices.Equal(s[0].Models, []string{"claude-opus-5-5", "claude-sonnet-4-5"}) {
		t.Errorf("sessions %+v", s)
	}
}

// TestSessionTitle: with titles kept, an interactive session is named by the title Claude Code
// asked for; without, it is not.
func TestSessionTitle(t *testing.T) {
	for _, keep := range []bool{true, false} {
		exchanges, err := replay.Load(filepath.Join("..", "testdata", "claude-code", "interactive"))
		if err != nil {
			t.Fatal(err)
		}
		store := New(WithTitles(keep))
		tr := instrument.New(store)
		replay.Play(tr, exchanges)
		tr.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
		title := ""
		for _, s := range store.Sessions() {
			title += s.Title
		}
		if keep && title != "Fake interactive session" || !keep && title != "" {
			t.Errorf("titles kept %v: %q", keep, title)
		}
	}
}
