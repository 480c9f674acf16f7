package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestIsClaudeCode(t *testing.T) {
	dir := t.TempDir()
	// The native installer: ~/.local/bin/claude links to ~/.local/share/claude/versions/X.
	version := filepath.Join(dir, "share", "claude", "versions", "2.1.328")
	link := filepath.Join(dir, "bin", "cc")
	for _, d := range []string{filepath.Dir(version), filepath.Dir(link)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(version, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(version, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       bool
	}{
		{"claude", "/usr/local/bin/claude", true},
		{"/opt/claude-code/bin/claude.exe", "/opt/claude-code/bin/claude.exe", true},
		{"cc", link, true}, // an alias for the installer's binary
		{"sh", "/bin/sh", false},
		{"claude-wrapper", "/usr/bin/claude-wrapper", false},
	}
	for _, tt := range tests {
		if got := isClaudeCode(tt.name, tt.path); got != tt.want {
			t.Errorf("isClaudeCode(%q, %q) = %v, want %v", tt.name, tt.path, got, tt.want)
		}
	}
}

func TestClaudeArguments(t *testing.T) {
	tests := []struct {
		args            []string
		print, settings bool
	}{
		{nil, false, false},
		{[]string{"-p", "hi"}, true, false},
		{[]string{"--model", "opus", "--print", "hi"}, true, false},
		{[]string{"--settings", "{}"}, false, true},
		{[]string{`--settings={"x":1}`, "-p"}, true, true},
		{[]string{"--", "-p", "--settings"}, false, false},
	}
	for _, tt := range tests {
		if got := claudePrintMode(tt.args); got != tt.print {
			t.Errorf("claudePrintMode(%q) = %v", tt.args, got)
		}
		if got := passesSettings(tt.args); got != tt.settings {
			t.Errorf("passesSettings(%q) = %v", tt.args, got)
		}
	}
}

func TestHasStatusLine(t *testing.T) {
	home, project, config := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	files := func() []string { return settingsFiles(getenv, home, project) }

	if hasStatusLine(files()) {
		t.Error("no settings at all, yet a status line")
	}
	write(filepath.Join(home, ".claude", "settings.json"), `{"model":"opus","statusLine":null}`)
	write(filepath.Join(project, ".claude", "settings.json"), `not json`)
	if hasStatusLine(files()) {
		t.Error("settings without a status line, yet one found")
	}
	write(filepath.Join(project, ".claude", "settings.local.json"), `{"statusLine":{"type":"command","command":"mine"}}`)
	if !hasStatusLine(files()) {
		t.Error("the project's local settings set a status line; not found")
	}
	if err := os.Remove(filepath.Join(project, ".claude", "settings.local.json")); err != nil {
		t.Fatal(err)
	}
	env["CLAUDE_CONFIG_DIR"] = config
	write(filepath.Join(config, "settings.json"), `{"statusLine":{"type":"command","command":"mine"}}`)
	if !hasStatusLine(files()) {
		t.Error("the user's settings in CLAUDE_CONFIG_DIR set a status line; not found")
	}
}

func TestStatusLineSettings(t *testing.T) {
	for exe, want := range map[string]string{
		"/usr/local/bin/cctrace":            "/usr/local/bin/cctrace statusline",
		"/home/a b/go/bin/cctrace":          "'/home/a b/go/bin/cctrace' statusline",
		"/tmp/it's/cctrace":                 `'/tmp/it'\''s/cctrace' statusline`,
		"/tmp/go-build123/b001/exe/cctrace": "/tmp/go-build123/b001/exe/cctrace statusline",
	} {
		var s struct {
			StatusLine struct {
				Type            string `json:"type"`
				Command         string `json:"command"`
				RefreshInterval int    `json:"refreshInterval"`
			} `json:"statusLine"`
		}
		if err := json.Unmarshal([]byte(statusLineSettings(exe)), &s); err != nil {
			t.Fatal(err)
		}
		if s.StatusLine.Type != "command" || s.StatusLine.Command != want || s.StatusLine.RefreshInterval != 2 {
			t.Errorf("statusLineSettings(%q) = %+v, want command %q", exe, s.StatusLine, want)
		}
	}
}

func TestWithStatusLine(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Chdir(project)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := withStatusLine([]string{"--model", "opus"})
	if want := []string{"--settings", statusLineSettings(exe), "--model", "opus"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != "--model" {
		t.Errorf("withStatusLine = %q, want %q", got, want)
	}
	if got := withStatusLine([]string{"--settings", "x.json"}); len(got) != 2 {
		t.Errorf("with --settings given: %q", got)
	}
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"statusLine":{"type":"command","command":"mine"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := withStatusLine(nil); len(got) != 0 {
		t.Errorf("with the user's own status line: %q", got)
	}
}
