package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit: serve and run get defaultMemoryLimit, unless GOMEMLIMIT says otherwise.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "") // restored after the test
	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(1 << 40)
	setMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT the limit is %d, want %d", got, defaultMemoryLimit)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	setMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT set the limit is %d, want it left alone", got)
	}
}
