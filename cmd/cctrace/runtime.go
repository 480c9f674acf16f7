package main

import (
	"os"
	"runtime/debug"
)

// The Go runtime's defaults, unless the environment sets GOGC or GOMEMLIMIT itself.
//
// cctrace's garbage is mostly request body copies and what decoding them allocates. With the
// default GOGC=100 the collector runs every time the heap doubles a small live heap, which on a
// loaded 2-core machine costs forwarding time; a soft memory limit bounds what a higher GOGC
// lets the heap grow to, so that cctrace stays within its memory target (BENCHMARKS.md: 64 MB
// plus 64 KB per stream in flight). The limit is soft: a live heap above it (a burst of very
// large bodies) is not an error, the collector just works harder until it shrinks.
const (
	defaultGOGC        = 200
	defaultMemoryLimit = 48 << 20
)

// tuneRuntime applies the defaults above where the environment does not say otherwise.
func tuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
