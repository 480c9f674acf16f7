package main

import (
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the Go runtime's soft memory limit for the proxy when the environment
// does not set GOMEMLIMIT. With the collector at its defaults the heap grows to twice what is
// live before each collection; under a burst of large requests what cctrace holds for bodies
// (its copy and decode budgets) is most of what is live, so a limit somewhat above that keeps
// the proxy's resident size near a hundred MiB. It is soft: a heap that needs more (many active
// conversations on a shared cctrace) gets more, at the cost of more frequent collections, and
// GOMEMLIMIT (which the Helm chart sets from its values) replaces it.
const defaultMemoryLimit = 80 << 20

// setMemoryLimit applies defaultMemoryLimit unless GOMEMLIMIT is set.
func setMemoryLimit() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
