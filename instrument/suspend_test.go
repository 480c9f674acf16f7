package instrument

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/replay"
)

// memStore is an InFlightStore in memory.
type memStore struct {
	mu     sync.Mutex
	states map[string][]byte
	err    error // what every call fails with, when set
}

func (m *memStore) SaveInFlight(_ context.Context, name string, state []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.states == nil {
		m.states = map[string][]byte{}
	}
	if len(state) == 0 {
		delete(m.states, name)
	} else {
		m.states[name] = state
	}
	return nil
}

func (m *memStore) TakeInFlight(_ context.Context, prefix string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	out := map[string][]byte{}
	for name, state := range m.states {
		if strings.HasPrefix(name, prefix) {
			out[name] = state
			delete(m.states, name)
		}
	}
	return out, nil
}

// restarted replays the recorded session dir through one tracker up to exchange stop (the
// exchanges before it), closes that tracker at the given time, and replays the rest through a
// second one that resumes what the first kept in store: a cctrace restarted mid-turn. With
// running, the second tracker runs from before the first one stops, and does not call Resume:
// another replica, already running, that the session moves to. Both report to rec.
func restarted(t *testing.T, dir string, stop int, at time.Time, store InFlightStore, rec *recorder, running bool, opts ...Option) *Tracker {
	t.Helper()
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seed uint64
	ids := WithIDSource(func() uint64 { seed++; return seed })
	first := New(rec, append([]Option{ids, WithInFlight(store)}, opts...)...)
	second := New(rec, append([]Option{ids, WithInFlight(store)}, opts...)...)
	replay.Play(first, exchanges[:stop])
	first.Close(at)
	if !running {
		if _, err := second.Resume(context.Background()); err != nil {
			t.Log(err) // a store that fails: the second process goes on without it
		}
	}
	replay.Play(second, exchanges[stop:])
	second.Tick(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	return second
}

// TestRestartMidToolKeepsTheTurn: cctrace stops while the turn's Bash runs (slow_tool: the CLI
// sends the result to the next process) and the next process resumes the turn: one root, its
// real start, the Bash call a success that counts once, as if nothing had happened
// (slow_tool/want.tree); with WithReplica too, also when the session moves to a replica that was
// already running.
func TestRestartMidToolKeepsTheTurn(t *testing.T) {
	const dir = "../testdata/claude-code/slow_tool"
	want, err := os.ReadFile(dir + "/want.tree")
	if err != nil {
		t.Fatal(err)
	}
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	stop := exchanges[1].Request.Time.Add(-time.Second) // while Bash runs
	for _, tc := range []struct {
		name    string
		running bool
		opts    []Option
	}{
		{"one process", false, nil},
		{"replica", false, []Option{WithReplica()}},
		{"another replica", true, []Option{WithReplica()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			rec := newRecorder(t)
			restarted(t, dir, 1, stop, store, rec, tc.running, tc.opts...)
			if got := rec.traces(); strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				t.Errorf("across the restart:\n%s\nwant (no restart):\n%s", got, want)
			}
			var roots, tools int
			for _, s := range rec.spans {
				switch {
				case s.Turn != nil:
					roots++
					if !s.Start.Equal(exchanges[0].Request.Time) {
						t.Errorf("the turn starts at %v, want its first request's %v", s.Start, exchanges[0].Request.Time)
					}
					if s.Turn.ToolCalls != 1 || s.Turn.Requests != 2 {
						t.Errorf("turn totals %+v: want the two requests and the tool call, each once", s.Turn.Totals)
					}
				case s.Tool != nil:
					tools++
					if s.Tool.Outcome != ToolSuccess || s.Status == StatusError {
						t.Errorf("Bash: outcome %s, status %v", s.Tool.Outcome, s.Status)
					}
				}
			}
			if roots != 1 || tools != 1 {
				t.Errorf("%d roots and %d tool spans, want one each", roots, tools)
			}
			if len(store.states) != 0 {
				t.Errorf("states left in the store: %v", store.states)
			}
		})
	}
}

// TestRestartWithoutAStore: a store that fails, or none, leaves Close as it was: the turn ends
// as shutdown, and the next process starts a turn of its own.
func TestRestartWithoutAStore(t *testing.T) {
	exchanges, err := replay.Load("../testdata/claude-code/slow_tool")
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	restarted(t, "../testdata/claude-code/slow_tool", 1, exchanges[1].Request.Time.Add(-time.Second),
		&memStore{err: errors.New("disk full")}, rec, false)
	got := rec.traces()
	for _, want := range []string{"outcome=shutdown", "trigger=continuation", "execute_tool Bash [outcome=shutdown ERROR:shutdown]"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
}

// TestResumeDropsWhatItCannotRead: a state of another format is reported and dropped; the
// others are resumed.
func TestResumeDropsWhatItCannotRead(t *testing.T) {
	store := &memStore{states: map[string][]byte{
		inFlightPrefix + "a": []byte(`{"version": 99}`),
		inFlightPrefix + "b": []byte(`not json`),
	}}
	tr := New(newRecorder(t), WithInFlight(store))
	n, err := tr.Resume(context.Background())
	if n != 0 || err == nil {
		t.Errorf("Resume = %d, %v; want 0 and an error naming both", n, err)
	}
	if len(store.states) != 0 {
		t.Errorf("states left: %v", store.states)
	}
}
