package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// What cctrace run knows of Claude Code as its command: how to tell it, whether it runs in
// print mode, and how to give it cctrace's status line without taking the user's.

// isClaudeCode reports whether the command cctrace run starts is Claude Code: named claude (or
// claude.exe, the npm package's native binary), as typed or where path resolves to, or the
// native installer's versions/<version> binary that ~/.local/bin/claude links to.
func isClaudeCode(name, path string) bool {
	isClaude := func(p string) bool {
		base := filepath.Base(p)
		return base == "claude" || base == "claude.exe"
	}
	if isClaude(name) || isClaude(path) {
		return true
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	versions := filepath.Dir(real)
	return isClaude(real) || (filepath.Base(versions) == "versions" && filepath.Base(filepath.Dir(versions)) == "claude")
}

// claudePrintMode reports whether Claude Code's arguments ask for print mode (-p, --print): it
// answers and exits, and does not take over the terminal.
func claudePrintMode(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-p" || a == "--print" {
			return true
		}
	}
	return false
}

// passesSettings reports whether Claude Code's arguments carry --settings already: a second
// one would replace it.
func passesSettings(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--settings" || strings.HasPrefix(a, "--settings=") {
			return true
		}
	}
	return false
}

// settingsFiles are the settings files of Claude Code's in which a user sets a status line of
// their own: the user's (in CLAUDE_CONFIG_DIR, else ~/.claude) and the project's in dir.
func settingsFiles(getenv func(string) string, home, dir string) []string {
	user := getenv("CLAUDE_CONFIG_DIR")
	if user == "" {
		user = filepath.Join(home, ".claude")
	}
	return []string{
		filepath.Join(user, "settings.json"),
		filepath.Join(dir, ".claude", "settings.json"),
		filepath.Join(dir, ".claude", "settings.local.json"),
	}
}

// hasStatusLine reports whether any of the settings files sets statusLine. A file that is
// missing or is not JSON sets nothing (Claude Code reports a broken one itself).
func hasStatusLine(files []string) bool {
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var s struct {
			StatusLine json.RawMessage `json:"statusLine"`
		}
		if json.Unmarshal(raw, &s) == nil && len(s.StatusLine) > 0 && string(s.StatusLine) != "null" {
			return true
		}
	}
	return false
}

// statusLineSettings is the --settings value that gives Claude Code the status line command
// `exe statusline`, run again every 2 seconds as well as when Claude Code redraws, so that a
// running turn's figures keep moving while its tools run. Claude Code drops a run that the
// next one overtakes: the interval leaves the command, which takes milliseconds, a wide margin
// on a busy machine.
func statusLineSettings(exe string) string {
	raw, _ := json.Marshal(map[string]any{"statusLine": map[string]any{
		"type":            "command",
		"command":         shellWord(exe) + " statusline",
		"refreshInterval": 2,
	}})
	return string(raw)
}

// plainWord matches what a POSIX shell takes literally.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellWord quotes s for the shell Claude Code runs status line commands with.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// withStatusLine returns Claude Code's arguments with cctrace's status line given in
// --settings, unless they pass settings of their own or the user's or the project's settings
// set a status line: theirs wins.
func withStatusLine(args []string) []string {
	if passesSettings(args) {
		return args
	}
	home, _ := os.UserHomeDir()
	dir, _ := os.Getwd()
	exe, err := os.Executable()
	if err != nil || hasStatusLine(settingsFiles(os.Getenv, home, dir)) {
		return args
	}
	return append([]string{"--settings", statusLineSettings(exe)}, args...)
}
