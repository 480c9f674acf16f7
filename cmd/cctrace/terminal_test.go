package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOwnsTerminal(t *testing.T) {
	tests := []struct {
		name                 string
		stdin, stderr, print bool
		want                 bool
	}{
		{"interactive claude", true, true, false, true},
		{"claude -p in a terminal", true, true, true, false},
		{"stderr to a file", true, false, false, false},
		{"stdin from a pipe", false, true, false, false},
		{"CI", false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownsTerminal(tt.stdin, tt.stderr, tt.print); got != tt.want {
				t.Errorf("ownsTerminal(%v, %v, %v) = %v, want %v", tt.stdin, tt.stderr, tt.print, got, tt.want)
			}
		})
	}
}

func TestRunLogPath(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 45, 0, 0, time.Local)
	state := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tt := range []struct {
		xdg, want string
	}{
		{state, filepath.Join(state, "cctrace", "run-20261204-184500-4242.log")},
		{"", filepath.Join(home, ".local", "state", "cctrace", "run-20261204-184500-4242.log")},
		{"relative/state", filepath.Join(home, ".local", "state", "cctrace", "run-20261204-184500-4242.log")},
	} {
		got, err := runLogPath(func(string) string { return tt.xdg }, at, 4242)
		if err != nil || got != tt.want {
			t.Errorf("XDG_STATE_HOME=%q: %q, %v; want %q", tt.xdg, got, err, tt.want)
			continue
		}
		info, err := os.Stat(filepath.Dir(got))
		if err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("log directory: %v, %v; want mode 0700", info.Mode(), err)
		}
	}
}
