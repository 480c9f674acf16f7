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
// needs. The pipeline calls it when it goes idle after a burst (pipeline.WithIdle). Without it
// the runtime keeps a burst's heap until later garbage collections shrink its goal, and an idle
// proxy collects seldom: after a burst of 1 MB requests cctrace sat at 125 MB RSS, most of it
// free heap (issue 6). A forced collection of cctrace's live heap costs a few milliseconds of
// CPU once per burst, on the pipeline's goroutine, while nothing waits for it. The proxy's pool
// of body buffers, kept for the next burst, goes too.
func releaseMemory() {
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
