package configfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrorsNameTheLine(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"syntax", "a: [1\n", "f.yaml:1: "},
		{"tab indentation", "a:\n\tb: 1\n", "f.yaml:2: "},
		{"not a mapping", "- a\n", "f.yaml:1: want a mapping with the keys a, b"},
		{"unknown key", "a: 1\nc: 2\n", "f.yaml:2: unknown key \"c\" (want a, b)"},
		{"key twice", "a: 1\nb: 2\na: 3\n", "f.yaml:3: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := ParseYAML("f.yaml", []byte(tt.text))
			if err == nil {
				_, err = Mapping("f.yaml", doc, "a", "b")
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want it to begin %q", err, tt.want)
			}
		})
	}
}

// TestWatchedFollowsRename checks that a file replaced by renaming a new one over it (as editors
// and Kubernetes do) is reread, and that a file gone for a moment keeps the last contents.
func TestWatchedFollowsRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	write := func(text string, age time.Duration) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(-age)
		if err := os.Chtimes(tmp, mt, mt); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("one", time.Hour)
	parse := func(_ string, b []byte) (string, error) { return string(b), nil }
	w, err := Load(path, "test", parse)
	if err != nil {
		t.Fatal(err)
	}
	write("two", time.Minute)
	if !w.Check() || w.Current() != "two" {
		t.Errorf("after a rename: %q", w.Current())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if w.Check() || w.Current() != "two" {
		t.Errorf("after removal: %q, want the last contents kept", w.Current())
	}
}
