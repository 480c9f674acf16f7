package proxy

import (
	"math/bits"
	"slices"
	"sync"
)

// Body copies come from size-classed pools: without them every exchange allocates a buffer the
// size of its body, hands it to the Observer, which decodes it and drops it, and with bodies of a
// few MiB that garbage is most of what the collector does.
//
// The classes run from 64 KiB to 32 MiB (DefaultParseLimit), four per power of two: 64, 80, 96,
// 112, 128, 160 KiB and so on, each a quarter of its power of two apart. A body takes the
// smallest class that holds it, so from 64 KiB up the part of its buffer it leaves unused is less
// than a quarter of the body. With one class per power of two that part reached the body's own size: 128
// uploads of just over 1 MiB each held 2 MiB buffers, 256 MiB in all, while they were copied.
// Bodies of up to 32 KiB (which would waste more of a 64 KiB buffer than that), of unknown size,
// or over 32 MiB get a buffer of their own, as before.
const (
	minBodyClassShift = 16
	maxBodyClassShift = 25
	minBodyClass      = 1 << minBodyClassShift
	maxBodyClass      = 1 << maxBodyClassShift

	// bodyClassSteps is the number of classes per power of two, a power of two itself; the
	// classes from 1<<s up are q<<(s-bodyClassStepShift) for q from bodyClassSteps to
	// 2*bodyClassSteps-1.
	bodyClassStepShift = 2
	bodyClassSteps     = 1 << bodyClassStepShift

	// numBodyClasses counts the classes: bodyClassSteps per power of two below the largest,
	// and the largest.
	numBodyClasses = (maxBodyClassShift-minBodyClassShift)*bodyClassSteps + 1
)

// maxPooledBodyBytes bounds the bytes of buffers the pool keeps between copies: as much as the
// copy budget lets copies hold at once (DefaultCopyBudget). A sync.Pool would keep whatever a
// burst gave back until two garbage collections had passed, and a quiet proxy collects seldom:
// after 128 uploads of 200 KB, 13 MB of buffers stayed in the pools, half of cctrace's live heap
// while the streams went on (issue 6). A steady load needs few: each copy takes a buffer and each
// decoded body gives one back, so the pool only has to cover how much the number of bodies in
// flight changes. ReleasePooledBodies empties it.
const maxPooledBodyBytes = DefaultCopyBudget

// bodyPool holds buffers given back, each of length 0 and capacity exactly the size of its
// class, the one given back last at the end, at most maxPooledBodyBytes of them. When a buffer
// given back does not fit, the ones given back longest ago make room: a pool that was filled
// by 200 KB bodies must not refuse every buffer of the 1 MB ones that follow.
var bodyPool struct {
	mu    sync.Mutex
	bytes int64
	bufs  [][]byte
}

// bodyClass returns the index of the class a body of n bytes takes, and false when
// it takes none.
func bodyClass(n int64) (int, bool) {
	if n <= minBodyClass/2 || n > maxBodyClass {
		return 0, false
	}
	if n <= minBodyClass {
		return 0, true
	}
	// 1<<s <= n-1 < 1<<(s+1); n-1 lies in the step q of that power of two, and the class above
	// it, q+1 (which may be the next power of two), is the smallest that holds n.
	s := bits.Len64(uint64(n-1)) - 1
	q := int((n - 1) >> (s - bodyClassStepShift))
	return (s-minBodyClassShift)*bodyClassSteps + q + 1 - bodyClassSteps, true
}

// bodyClassSize returns the capacity of the buffers of class i.
func bodyClassSize(i int) int64 {
	s, q := i/bodyClassSteps, i%bodyClassSteps
	return int64(bodyClassSteps+q) << (minBodyClassShift + s - bodyClassStepShift)
}

// bodyCap returns the capacity of the buffer getBody(n) returns: what a copy of n bytes holds.
func bodyCap(n int64) int64 {
	if class, ok := bodyClass(n); ok {
		return bodyClassSize(class)
	}
	return n
}

// getBody returns an empty buffer with room for n bytes: pooled, with its class's capacity, when
// n takes a class, else allocated with capacity n.
func getBody(n int64) []byte {
	class, ok := bodyClass(n)
	if !ok {
		return make([]byte, 0, n)
	}
	size := bodyClassSize(class)
	bodyPool.mu.Lock()
	// At most maxPooledBodyBytes/minBodyClass buffers to look through, the latest first.
	for i := len(bodyPool.bufs) - 1; i >= 0; i-- {
		if b := bodyPool.bufs[i]; int64(cap(b)) == size {
			bodyPool.bufs = slices.Delete(bodyPool.bufs, i, i+1)
			bodyPool.bytes -= size
			bodyPool.mu.Unlock()
			return b
		}
	}
	bodyPool.mu.Unlock()
	return make([]byte, 0, size)
}

// RecycleBody gives a body copy that the proxy handed to an Observer back to the proxy, to copy
// a later body into. Only an Observer that is done with b and keeps no reference into it (no
// subslice, no string or []byte sharing its memory) may call it, and only once per body: a later
// exchange overwrites it. Calling it is optional; a body never recycled is left to the garbage
// collector. A b whose capacity is not exactly the size of one of the classes (nil, a
// small body, or one that outgrew its buffer) is ignored, and so is one larger than the whole
// pool (see maxPooledBodyBytes).
func RecycleBody(b []byte) {
	if _, ok := classOfSize(int64(cap(b))); !ok || int64(cap(b)) > maxPooledBodyBytes {
		return
	}
	bodyPool.mu.Lock()
	bodyPool.bufs = append(bodyPool.bufs, b[:0])
	bodyPool.bytes += int64(cap(b))
	drop := 0
	for bodyPool.bytes > maxPooledBodyBytes {
		bodyPool.bytes -= int64(cap(bodyPool.bufs[drop]))
		drop++
	}
	bodyPool.bufs = slices.Delete(bodyPool.bufs, 0, drop)
	bodyPool.mu.Unlock()
}

// ReleasePooledBodies empties the pool of body buffers, leaving them to the garbage collector,
// and returns how many bytes they held: for an idle proxy giving its memory back.
func ReleasePooledBodies() int64 {
	bodyPool.mu.Lock()
	defer bodyPool.mu.Unlock()
	n := bodyPool.bytes
	clear(bodyPool.bufs)
	bodyPool.bufs, bodyPool.bytes = bodyPool.bufs[:0], 0
	return n
}

// classOfSize returns the class whose buffers have capacity c, and false when c is no class's.
func classOfSize(c int64) (int, bool) {
	if c < minBodyClass || c > maxBodyClass {
		return 0, false
	}
	s := bits.Len64(uint64(c)) - 1
	if c&(1<<(s-bodyClassStepShift)-1) != 0 {
		return 0, false // between two classes
	}
	q := int(c>>(s-bodyClassStepShift)) - bodyClassSteps
	return (s-minBodyClassShift)*bodyClassSteps + q, true
}
