package main

import (
	"math"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
	"time"
)

var sink [][]byte

// TestReleaseMemory checks that the heap a burst left behind is seen as reclaimable and given
// back to the operating system.
func TestReleaseMemory(t *testing.T) {
	released := func() uint64 {
		s := []rtmetrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		rtmetrics.Read(s)
		return s[0].Value.Uint64()
	}
	// A burst: 64 MiB of live buffers, collected once while live so that the heap grows to
	// hold them, then dropped.
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
	}
	runtime.GC()
	sink = nil
	runtime.GC()
	if r := reclaimableHeap(); r < 32<<20 {
		t.Fatalf("reclaimable heap after dropping 64 MiB: %d bytes, want at least 32 MiB", r)
	}
	before := released()
	releaseMemory(1)
	if got := released() - before; got >= 32<<20 {
		t.Errorf("releaseMemory released %d bytes with a request in flight, want it to wait", got)
	}
	before = released()
	releaseMemory(0)
	if got := released() - before; got < 32<<20 {
		t.Errorf("releaseMemory released %d bytes, want at least 32 MiB", got)
	}
	if r := reclaimableHeap(); r >= releaseThreshold {
		t.Errorf("reclaimable heap after releaseMemory: %d bytes, want below %d", r, releaseThreshold)
	}
}

func TestLimitFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, memoryTarget},
		{20 << 20, memoryTarget},
		{memoryTarget * 2 / 3, memoryTarget},
		{64 << 20, 96 << 20},
	} {
		if got := limitFor(tc.live); got != tc.want {
			t.Errorf("limitFor(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// TestHoldMemory checks that the soft memory limit follows the live heap after each
// collection, that GOGC is set to gcPercent, and that GOGC or GOMEMLIMIT in the environment
// leave the runtime alone.
func TestHoldMemory(t *testing.T) {
	t.Cleanup(func() {
		holdStopped.Store(true)
		debug.SetMemoryLimit(math.MaxInt64)
		debug.SetGCPercent(100)
	})
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		env := func(k string) string {
			if k == name {
				return "100"
			}
			return ""
		}
		if holdMemory(env) || debug.SetMemoryLimit(-1) != math.MaxInt64 || gogc() != 100 {
			t.Fatalf("with %s set: holdMemory acted, limit %d, GOGC %d", name, debug.SetMemoryLimit(-1), gogc())
		}
	}
	if !holdMemory(func(string) string { return "" }) {
		t.Fatal("holdMemory did not act with an empty environment")
	}
	if got := debug.SetMemoryLimit(-1); got != memoryTarget {
		t.Fatalf("limit %d with a small heap, want %d", got, memoryTarget)
	}
	if got := gogc(); got != gcPercent {
		t.Fatalf("GOGC %d, want %d", got, gcPercent)
	}
	// A live heap of 96 MiB: the limit must make room for half as much again, or the
	// collector would run without end.
	for range 96 {
		sink = append(sink, make([]byte, 1<<20))
	}
	waitLimit := func(ok func(int64) bool) int64 {
		t.Helper()
		var got int64
		for range 100 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // the finalizer goroutine's turn
			if got = debug.SetMemoryLimit(-1); ok(got) {
				return got
			}
		}
		t.Fatalf("limit %d after collections", got)
		return 0
	}
	waitLimit(func(l int64) bool { return l >= 144<<20 })
	sink = nil
	waitLimit(func(l int64) bool { return l == memoryTarget })
}

// gogc returns the runtime's GOGC, leaving it as it is.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
