package main

import (
	"path/filepath"

	"github.com/cctrace/cctrace/internal/history"
)

// historyFile is the name of the SQLite history in the state directory.
const historyFile = "history.db"

// historyStore is the store --history names: itself when given, else history.db in the state
// directory, else (no state directory, as for demo) memory.
func historyStore(o options) string {
	switch {
	case o.history != "":
		return o.history
	case o.teams.stateDir != "":
		return filepath.Join(o.teams.stateDir, historyFile)
	}
	return string(history.KindMemory)
}
