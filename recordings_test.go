package cctrace

import (
	"io/fs"
	"path"
	"testing"

	"github.com/cctrace/cctrace/internal/replay"
)

// TestDemoRecordings: every session the demo names is embedded whole, and nothing else is.
func TestDemoRecordings(t *testing.T) {
	embedded := 0
	if err := fs.WalkDir(DemoRecordings, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			embedded++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, name := range DemoSessions {
		dir := path.Join("testdata/claude-code", name)
		exchanges, err := replay.LoadFS(DemoRecordings, dir)
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := replay.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(exchanges) != len(onDisk) {
			t.Errorf("%s: %d exchanges embedded, %d on disk", name, len(exchanges), len(onDisk))
		}
		loaded += len(exchanges)
	}
	if embedded != loaded {
		t.Errorf("%d files embedded, %d of them the demo's", embedded, loaded)
	}
}
