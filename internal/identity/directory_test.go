package identity

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/configfile"
)

func TestParseDirectoryErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"syntax", "people:\n  - name: a\n    identities: [x\n", "dir.yaml:2: did not find"},
		{"unknown top key", "persons: []\n", "dir.yaml:1: unknown key \"persons\""},
		{"not a list", "people: alice\n", "dir.yaml:1: people must be a list"},
		{"unknown person key", "people:\n  - name: a\n    mail: a@b\n    identities: [a]\n", "dir.yaml:3: unknown key \"mail\""},
		{"no name", "people:\n  - team: x\n    identities: [a]\n", "dir.yaml:2: a person without a name"},
		{"no identities", "people:\n  - name: a\n", "dir.yaml:2: person \"a\" has no identities"},
		{"duplicate person", "people:\n  - name: a\n    identities: [x]\n  - name: a\n    identities: [y]\n", "dir.yaml:4: person \"a\" is already listed on line 2"},
		{"identity twice", "people:\n  - name: a\n    identities: [x]\n  - name: b\n    identities:\n      - x\n", "dir.yaml:6: an identity is already given on line 3"},
		{"pasted key, twice", "people:\n  - name: a\n    identities: [sk-ant-SECRETMARKER]\n  - name: b\n    identities: [sk-ant-SECRETMARKER]\n", "dir.yaml:5: an identity is already"},
		{"pasted key, spaced", "people:\n  - name: a\n    identities: [\" sk-ant-SECRETMARKER\"]\n", "dir.yaml:3: an identity has control"},
		{"control bytes", "people:\n  - name: \"a\\u0007\"\n    identities: [x]\n", "dir.yaml:2: name"},
		{"identity not a string", "people:\n  - name: a\n    identities: [[x]]\n", "dir.yaml:3: an identity must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDirectory("dir.yaml", []byte(tt.text))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want it to begin %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "SECRETMARKER") {
				t.Errorf("error %v echoes a value that may be a secret", err)
			}
		})
	}
	for _, empty := range []string{"", "# nobody yet\n", "people:\n"} {
		if d, err := ParseDirectory("dir.yaml", []byte(empty)); err != nil || len(d.byIdentity) != 0 {
			t.Errorf("%q: %v, %v", empty, d.byIdentity, err)
		}
	}
}

// TestDirectoryReload checks that a changed directory takes effect, and that a malformed one is
// refused with the previous one kept in force and the refusal reported.
func TestDirectoryReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "directory.yaml")
	write := func(text string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		// Each write gets its own modification time, however fast the test runs.
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write("people:\n  - name: alice\n    identities: [a]\n", base)
	var reports []error
	w, err := configfile.Load(path, "directory", ParseDirectory, configfile.WithReport(func(kind string, err error) {
		reports = append(reports, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(id string) string { p, _ := w.Current().Lookup(id); return p.Name }
	if lookup("a") != "alice" {
		t.Fatal("alice not loaded")
	}

	write("people:\n  - name: alicia\n    identities: [a]\n", base.Add(time.Second))
	if !w.Check() || lookup("a") != "alicia" {
		t.Errorf("after a valid change: %q", lookup("a"))
	}
	write("people:\n  - name: broken\n    identities: a\n", base.Add(2*time.Second))
	if w.Check() || lookup("a") != "alicia" {
		t.Errorf("after a malformed change: %q, want the previous file in force", lookup("a"))
	}
	if len(reports) != 3 || reports[0] != nil || reports[1] != nil || reports[2] == nil ||
		!strings.Contains(reports[2].Error(), path+":3:") {
		t.Errorf("reports %v", reports)
	}
	if w.Check() {
		t.Error("an unchanged file reloaded")
	}

	if err := os.WriteFile(path, []byte("people: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := configfile.Load(path, "directory", ParseDirectory); err == nil || !strings.HasPrefix(err.Error(), path+":") {
		t.Errorf("loading a malformed file at start: %v", err)
	}
}

func TestStateSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s1, created, err := StateSecret(dir)
	if err != nil || !created || len(s1) < MinSecretBytes {
		t.Fatalf("first: %d bytes, created %v, %v", len(s1), created, err)
	}
	s2, created, err := StateSecret(dir)
	if err != nil || created || string(s1) != string(s2) {
		t.Fatalf("second: created %v, same %v, %v", created, string(s1) == string(s2), err)
	}
	st, err := os.Stat(filepath.Join(dir, SecretFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, %v", st.Mode(), err)
	}
}

// TestStateSecretRace: processes starting at once with no secret yet all end up with the one
// that was written, never an error for a file still empty, and no temporary file is left.
func TestStateSecretRace(t *testing.T) {
	for range 20 {
		dir := filepath.Join(t.TempDir(), "state")
		got := make([]string, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				s, _, err := StateSecret(dir)
				got[i], errs[i] = string(s), err
			})
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != got[0] {
				t.Fatalf("caller %d: %q, %v; caller 0: %q", i, got[i], errs[i], got[0])
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, SecretFileName+".*")); len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	}
}
