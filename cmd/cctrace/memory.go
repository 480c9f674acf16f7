package main

import (
	"runtime/debug"
	rtmetrics "runtime/metrics"

	"github.com/cctrace/cctrace/internal/proxy"
)

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
