// Package bodybuf lends the buffers that copies of request and response bodies are made in. The
// proxy fills one as a body passes and hands it to the pipeline, which decodes it and gives it
// back. Without that round trip every exchange allocates a buffer the size of its body, and with
// bodies of a few MiB that garbage sets how often the collector runs: on 2 CPUs shared with the
// client and the upstream, each collection takes CPU from forwarding.
package bodybuf

import (
	"math/bits"
	"sync"
)

// Buffers come in size classes from 64 KiB to 32 MiB, four per power of two (64, 80, 96, 112,
// 128, 160 KiB and so on), so that a body leaves less than a quarter of its buffer unused. A
// body of at most 32 KiB (which would leave more of a 64 KiB buffer unused than that) or over
// 32 MiB gets a buffer of its own that is not pooled.
const (
	minClassShift = 16
	maxClassShift = 25
	minClass      = 1 << minClassShift
	maxClass      = 1 << maxClassShift

	// stepShift is log2 of the classes per power of two: from 1<<s up the classes are
	// q<<(s-stepShift) for q from 1<<stepShift to 2<<stepShift-1.
	stepShift = 2
	steps     = 1 << stepShift

	numClasses = (maxClassShift-minClassShift)*steps + 1
)

// Smallest is the capacity of the smallest buffer a Pool lends from its classes: a copy that does
// not know its final size and starts there grows through lent buffers only, leaving none of its
// steps to the collector.
const Smallest = minClass

// Pool lends body buffers by size class. Buffers given back stay in a sync.Pool per class, so the
// collector frees those not used again for two collections. A nil *Pool lends nothing: Get
// allocates and Put drops. A Pool is safe for concurrent use; the zero value is ready to use.
type Pool struct {
	classes [numClasses]sync.Pool
}

// Get returns an empty buffer with room for n bytes, of capacity p.Cap(n).
func (p *Pool) Get(n int64) []byte {
	class, ok := classOf(n)
	if !ok || p == nil {
		return make([]byte, 0, n)
	}
	if b, ok := p.classes[class].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, classSize(class))
}

// Put gives back a buffer Get returned, to be filled again by a later Get: only once its holder
// is done with it and keeps no reference into it (no subslice, no string sharing its memory).
// A buffer whose capacity is not a class's (nil, a small one, one that outgrew its class) is
// left to the collector.
func (p *Pool) Put(b []byte) {
	c := int64(cap(b))
	class, ok := classOf(c)
	if !ok || p == nil || classSize(class) != c {
		return
	}
	b = b[:0]
	p.classes[class].Put(&b)
}

// Cap returns the capacity of the buffer p.Get(n) returns: what a copy of n bytes holds.
func (p *Pool) Cap(n int64) int64 {
	if class, ok := classOf(n); ok && p != nil {
		return classSize(class)
	}
	return n
}

// classOf returns the smallest class that holds n bytes, and false when n takes none.
func classOf(n int64) (int, bool) {
	if n <= minClass/2 || n > maxClass {
		return 0, false
	}
	if n <= minClass {
		return 0, true
	}
	// 1<<s <= n-1 < 1<<(s+1); n-1 lies in the step q of that power of two, and the class above
	// it, q+1 (which may be the next power of two), is the smallest that holds n.
	s := bits.Len64(uint64(n-1)) - 1
	q := int((n - 1) >> (s - stepShift))
	return (s-minClassShift)*steps + q + 1 - steps, true
}

// classSize returns the capacity of the buffers of class i.
func classSize(i int) int64 {
	s, q := i/steps, i%steps
	return int64(steps+q) << (minClassShift + s - stepShift)
}
