package inflight

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func TestDirSavesAndTakes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "inflight")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, state := range map[string]string{
		"tracker/session/a1b2":       `{"v":1}`,
		"tracker/session/with/slash": `{"v":2}`,
		"other/x":                    `{"v":3}`,
	} {
		if err := d.SaveInFlight(ctx, name, []byte(state)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SaveInFlight(ctx, "tracker/session/a1b2", []byte(`{"v":4}`)); err != nil {
		t.Fatal(err) // replaces
	}
	if err := d.SaveInFlight(ctx, "tracker/session/gone", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.SaveInFlight(ctx, "tracker/session/gone", nil); err != nil {
		t.Fatal(err) // removes
	}
	if err := d.SaveInFlight(ctx, "never/saved", nil); err != nil {
		t.Fatalf("removing what is not there: %v", err)
	}
	got, err := d.TakeInFlight(ctx, "tracker/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"tracker/session/a1b2": []byte(`{"v":4}`), "tracker/session/with/slash": []byte(`{"v":2}`)}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("took %q, want %q", got, want)
	}
	if again, err := d.TakeInFlight(ctx, "tracker/"); err != nil || len(again) != 0 {
		t.Errorf("took %q, %v a second time, want nothing", again, err)
	}
	rest, err := d.TakeInFlight(ctx, "")
	if err != nil || len(rest) != 1 || string(rest["other/x"]) != `{"v":3}` {
		t.Errorf("took %q, %v, want the one left", rest, err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory %v, %v: want it private", info.Mode(), err)
	}
}

// TestDirTakesOnce: of several takers of the same states, each state goes to one.
func TestDirTakesOnce(t *testing.T) {
	ctx := context.Background()
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := d.SaveInFlight(ctx, "s/"+string(rune('a'+i%26))+string(rune('a'+i/26)), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := d.TakeInFlight(ctx, "s/")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			taken += len(got)
			mu.Unlock()
		})
	}
	wg.Wait()
	if taken != n {
		t.Errorf("%d states taken in all, want %d", taken, n)
	}
}
