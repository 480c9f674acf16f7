package proxy

import (
	"errors"
	"time"
	"unsafe"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
)

// boundedCopy keeps a copy of a body as it passes, up to a limit; past the limit it drops what it
// had and only counts. The zero value copies nothing and counts everything as over the limit.
//
// A copy with a budget holds its share of it from start to take or drop: the capacity of its
// buffer when the body's length is known, else the bytes copied so far. When its share does not
// fit the copy is not made (or, for a body of unknown length, stops and lets go of what it had)
// and take says why.
type boundedCopy struct {
	limit  int64
	budget *copyBudget // nil: none
	n      int64
	buf    []byte
	chunks []wire.Chunk // an event stream's, each counted as chunkBytes
	held   int64        // bytes of budget reserved
	over   bool
	// refused is set when the budget had no room for the copy; it then copies nothing more.
	refused *copyRefused
}

// errOverParseLimit is what take answers for a body over the copy's limit.
var errOverParseLimit = errors.New("over the parse limit")

// newBoundedCopy returns a copy bounded by limit, taking its share of budget (nil: none) and
// its buffer from the budget's pool. sizeHint is the body's Content-Length, or -1 when unknown;
// when it fits the limit the buffer starts with room for that many bytes, and the copy reserves
// that buffer's capacity at once. A body that outgrows its buffer moves to a larger one.
func newBoundedCopy(limit, sizeHint int64, budget *copyBudget) *boundedCopy {
	c := &boundedCopy{limit: limit, budget: budget}
	if sizeHint > 0 && sizeHint <= limit && c.reserve(budget.pool().Cap(sizeHint)) {
		c.buf = budget.pool().Get(sizeHint)
	}
	return c
}

// reserve takes n more bytes of the budget; when they do not fit it drops the copy, marks it
// refused and returns false.
func (c *boundedCopy) reserve(n int64) bool {
	if c.budget == nil {
		return true
	}
	ok, others := c.budget.reserve(n, c.held)
	if !ok {
		c.refused = &copyRefused{others: others, budget: c.budget.limit}
		c.drop()
		return false
	}
	c.held += n
	return true
}

// add appends the next bytes of the body.
func (c *boundedCopy) add(p []byte) {
	if len(p) == 0 || !c.grow(int64(len(p))) {
		return
	}
	if need := len(c.buf) + len(p); need > cap(c.buf) {
		// A body of unknown length (an event stream) moves up the pool's size classes, rather
		// than leave a buffer to the collector at each step.
		pool := c.budget.pool()
		n := max(need, 2*cap(c.buf))
		if pool != nil {
			n = max(n, bodybuf.Smallest)
		}
		buf := append(pool.Get(int64(n)), c.buf...)
		pool.Put(c.buf)
		c.buf = buf
	}
	c.buf = append(c.buf, p...)
}

// chunkBytes is what one chunk's time costs a copy, against its limit and budget.
const chunkBytes = int64(unsafe.Sizeof(wire.Chunk{}))

// mark notes that the body copied so far reached the client at at.
func (c *boundedCopy) mark(at time.Time) {
	if c.grow(chunkBytes) {
		c.chunks = append(c.chunks, wire.Chunk{End: len(c.buf), At: at})
	}
}

// grow counts n more bytes of the copy and reports whether it is still being made: not over the
// limit, and within its share of the budget.
func (c *boundedCopy) grow(n int64) bool {
	c.n += n
	switch {
	case c.over:
		return false
	case c.n > c.limit:
		c.over = true
		c.drop()
		return false
	case c.refused != nil:
		return false
	}
	return c.budget == nil || c.n <= c.held || c.reserve(c.n-c.held)
}

// take hands the copy over: nil for an empty body; errOverParseLimit when the body went over the
// limit, a *copyRefused when the budget had no room for it. The copy lets go of its buffer, which
// from then on belongs to the caller, and of its share of the budget.
func (c *boundedCopy) take() (body []byte, err error) {
	switch {
	case c.over:
		return nil, errOverParseLimit
	case c.refused != nil:
		return nil, c.refused
	case c.n == 0:
		c.drop()
		return nil, nil
	}
	body, c.buf = c.buf, nil
	c.budget.release(c.held)
	c.held = 0
	return body, nil
}

// drop gives the buffer back to the pool, as nothing will read it, and the copy's share of the
// budget.
func (c *boundedCopy) drop() {
	c.budget.pool().Put(c.buf)
	c.buf, c.chunks = nil, nil
	c.budget.release(c.held)
	c.held = 0
}
