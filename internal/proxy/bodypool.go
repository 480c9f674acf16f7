package proxy

import (
	"math/bits"
	"sync"
)

// Body copies come from size-classed pools: without them every exchange allocates a buffer the
// size of its body, hands it to the Observer, which decodes it and drops it, and with bodies of a
// few MiB that garbage is most of what the collector does.
//
// The classes are the powers of two from 64 KiB to 32 MiB (DefaultParseLimit). A body takes the
// smallest class that holds it, so its buffer is never more than twice its size: that keeps the
// memory of bodies waiting to be decoded within twice what the Observer counts of them. Bodies of
// up to 32 KiB (which would waste more of a 64 KiB buffer than that), of unknown size, or over
// 32 MiB get a buffer of their own, as before.
const (
	minBodyClassShift = 16
	maxBodyClassShift = 25
	minBodyClass      = 1 << minBodyClassShift
	maxBodyClass      = 1 << maxBodyClassShift
)

// bodyPools holds, per class, *[]byte of length 0 and capacity exactly the class size.
var bodyPools [maxBodyClassShift - minBodyClassShift + 1]sync.Pool

// bodyClass returns the index in bodyPools of the class a body of n bytes takes, and false when
// it takes none.
func bodyClass(n int64) (int, bool) {
	if n <= minBodyClass/2 || n > maxBodyClass {
		return 0, false
	}
	return max(bits.Len64(uint64(n-1)), minBodyClassShift) - minBodyClassShift, true
}

// getBody returns an empty buffer with room for n bytes: pooled, with its class's capacity, when
// n takes a class, else allocated with capacity n.
func getBody(n int64) []byte {
	class, ok := bodyClass(n)
	if !ok {
		return make([]byte, 0, n)
	}
	if bp, _ := bodyPools[class].Get().(*[]byte); bp != nil {
		return (*bp)[:0]
	}
	return make([]byte, 0, minBodyClass<<class)
}

// RecycleBody gives a body copy that the proxy handed to an Observer back to the proxy, to copy
// a later body into. Only an Observer that is done with b and keeps no reference into it (no
// subslice, no string or []byte sharing its memory) may call it, and only once per body: a later
// exchange overwrites it. Calling it is optional; a body never recycled is left to the garbage
// collector. A b whose capacity is not exactly the size of one of the pools' classes (nil, a
// small body, or one that outgrew its buffer) is ignored.
func RecycleBody(b []byte) {
	c := cap(b)
	if c < minBodyClass || c > maxBodyClass || c&(c-1) != 0 {
		return
	}
	b = b[:0]
	bodyPools[bits.Len(uint(c))-1-minBodyClassShift].Put(&b)
}
