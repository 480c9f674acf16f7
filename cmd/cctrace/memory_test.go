package main

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"
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
