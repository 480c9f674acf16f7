package main

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"

	"github.com/cctrace/cctrace/internal/proxy"
)

// memoryTarget is the soft memory limit cctrace gives the Go runtime (see holdMemory): with the
// ~11 MB of its binary that RSS also counts, 67 MB at 128 streams of 1 MB requests in the
// bench, against issue 6's 64 MB plus 64 KB per stream (72 MB). Without it the collector let
// the heap grow to twice what was live, and RSS reached 88 MB.
const memoryTarget = 56 << 20

// limitFor returns the soft memory limit for a live heap of live bytes: memoryTarget, or half
// as much again as what is live when that is more. The limit only makes the collector run
// earlier than GOGC (gcPercent) would, and never so close to the live heap that it would collect
// without end: cctrace's budgets bound its live heap to about 40 MB (8 MiB of body copies in
// flight, 8 MiB waiting to be decoded, 8 MiB of pooled buffers, BodyCache's 10 MB), but a
// host with many long sessions could hold more, and a fixed limit near it would make the
// collector take the CPU that forwarding needs.
func limitFor(live uint64) int64 {
	return max(memoryTarget, int64(live+live/2))
}

// gcPercent is the GOGC that holdMemory sets: below the soft memory limit the heap may grow to
// four times what is live before the collector runs, instead of twice. cctrace's live heap is a
// few MiB while it serves a session or two, so at GOGC=100 it collected about once per 40
// requests of a busy session, and each collection's mark phase (2–3 ms on 2 CPUs) slowed the
// requests in flight: at 10 KB c1 cctrace's TTFB p99 was 1.45× bare's, 1.25× with 300, and p50
// 1.17× against 1.13× (issue 6, BENCHMARKS.md). Under load the limit, not GOGC, decides when
// to collect, so peak RSS stayed where it was (68 against 69 MB with 128 streams of 1 MB).
const gcPercent = 300

var holdOnce sync.Once

// holdMemory sets GOGC to gcPercent and keeps the runtime's soft memory limit at limitFor the
// live heap, updated after every garbage collection, unless GOGC or GOMEMLIMIT is set in the
// environment (getenv): then the user's settings stand as the runtime read them. It reports
// whether it acts.
func holdMemory(getenv func(string) string) bool {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return false
	}
	holdOnce.Do(func() {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(limitFor(liveHeap()))
		afterEachGC(func() {
			if !holdStopped.Load() {
				debug.SetMemoryLimit(limitFor(liveHeap()))
			}
		})
	})
	return true
}

// holdStopped stops holdMemory's updates, for tests.
var holdStopped atomic.Bool

// afterEachGC calls f after every garbage collection, for the life of the process, from the
// runtime's finalizer goroutine: a sentinel object whose finalizer runs f and sets itself again.
func afterEachGC(f func()) {
	type sentinel struct{ _ [32]byte } // not a tiny object, which may share a block and never be finalized
	var rearm func(*sentinel)
	rearm = func(s *sentinel) {
		f()
		runtime.SetFinalizer(s, rearm)
	}
	runtime.SetFinalizer(&sentinel{}, rearm)
}

// liveHeap returns the heap bytes live at the last garbage collection.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// releaseThreshold is how much heap the Go runtime may hold beyond what is live before an idle
// cctrace gives it back to the operating system.
const releaseThreshold = 16 << 20

// releaseMemory returns to the operating system the heap a burst of requests grew and no longer
// needs. The pipeline calls it when it goes idle after a burst (pipeline.WithIdle), with the
// number of requests the proxy is still serving. Without it the runtime keeps a burst's heap
// until later garbage collections shrink its goal, and an idle proxy collects seldom: after a
// burst of 1 MB requests cctrace sat at 125 MB RSS, most of it free heap (issue 6).
//
// It only acts when no request is in flight: the pipeline also goes idle while long replies
// stream, and a forced collection and the return of every free page would then take CPU from
// forwarding them, for little, since their buffers are still in use. A pipeline that went idle
// while streams go on goes busy again when they end, and idle once more after. Then it costs
// one forced collection of cctrace's live heap, a few milliseconds of CPU, on the pipeline's
// goroutine, while nothing waits. The proxy's pool of body buffers goes too.
func releaseMemory(inFlight int64) {
	if inFlight > 0 {
		return
	}
	pooled := proxy.ReleasePooledBodies()
	if uint64(pooled)+reclaimableHeap() >= releaseThreshold {
		debug.FreeOSMemory()
	}
}

// reclaimableHeap estimates the heap bytes a collection and a scavenge would return: what the
// runtime holds for the heap and has not yet released, less what was live at the last
// collection.
func reclaimableHeap() uint64 {
	s := []rtmetrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	rtmetrics.Read(s)
	var held uint64
	for _, x := range s[:3] {
		if x.Value.Kind() == rtmetrics.KindUint64 {
			held += x.Value.Uint64()
		}
	}
	var live uint64
	if s[3].Value.Kind() == rtmetrics.KindUint64 {
		live = s[3].Value.Uint64()
	}
	if held <= live {
		return 0
	}
	return held - live
}
