package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneRuntime(t *testing.T) {
	gc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneRuntime()
	if got := debug.SetGCPercent(100); got != defaultGOGC {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, defaultGOGC)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != defaultMemoryLimit {
		t.Errorf("GOMEMLIMIT unset: memory limit %d, want %d", got, defaultMemoryLimit)
	}

	// Set in the environment: the runtime already read them, and cctrace leaves them alone.
	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "off")
	tuneRuntime()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: GC percent %d", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT=off: memory limit %d", got)
	}
}
