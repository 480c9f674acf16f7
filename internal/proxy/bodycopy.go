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
// when unknown; the buffer starts at that size when it fits the limit.
func newBoundedCopy(limit, sizeHint int64) *boundedCopy {
	c := &boundedCopy{limit: limit}
	if sizeHint > 0 && sizeHint <= limit {
		c.buf = make([]byte, 0, sizeHint)
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
		c.buf = nil
		return
	}
	c.buf = append(c.buf, p...)
}

// result returns the copy, nil for an empty body; ok is false when the body went over the limit.
func (c *boundedCopy) result() (body []byte, ok bool) {
	if c.over {
		return nil, false
	}
	if c.n == 0 {
		return nil, true
	}
	return c.buf, true
}
