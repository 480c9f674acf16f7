package proxy

// boundedCopy keeps a copy of a body as it passes, up to a limit; past the limit it drops what it
// had and only counts. The zero value copies nothing and counts everything as over the limit.
type boundedCopy struct {
	limit int64
	n     int64
	buf   []byte
	over  bool
}

// newBoundedCopy returns a copy bounded by limit. sizeHint is the body's Content-Length, or -1
// when unknown; when it fits the limit the buffer starts with room for that many bytes, taken
// from the body pools (see getBody). A body that outgrows its buffer moves to a larger one that
// append allocates; the pooled one is left to the garbage collector.
func newBoundedCopy(limit, sizeHint int64) *boundedCopy {
	c := &boundedCopy{limit: limit}
	if sizeHint > 0 && sizeHint <= limit {
		c.buf = getBody(sizeHint)
	}
	return c
}

// add appends the next bytes of the body.
func (c *boundedCopy) add(p []byte) {
	if len(p) == 0 {
		return
	}
	c.n += int64(len(p))
	if c.over {
		return
	}
	if c.n > c.limit {
		c.over = true
		c.drop()
		return
	}
	c.buf = append(c.buf, p...)
}

// take hands the copy over: nil for an empty body; ok is false when the body went over the
// limit. The copy lets go of its buffer, which from then on belongs to the caller.
func (c *boundedCopy) take() (body []byte, ok bool) {
	if c.over {
		return nil, false
	}
	if c.n == 0 {
		c.drop()
		return nil, true
	}
	body, c.buf = c.buf, nil
	return body, true
}

// drop gives the buffer back to the body pools: nothing will read it.
func (c *boundedCopy) drop() {
	RecycleBody(c.buf)
	c.buf = nil
}
