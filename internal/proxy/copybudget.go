package proxy

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
)

// copyBudget bounds the bytes of body copies a Proxy is making at once (see WithCopyBudget).
//
// A copy holds its buffer from the moment its body starts to arrive until the Observer takes it,
// so copies in flight, not bodies waiting to be decoded, are what a burst of large uploads fills
// memory with: 128 clients each uploading 1 MiB at once held 128 copies. The budget refuses a
// copy instead of waiting for room, so forwarding never waits for it; the refused body is
// forwarded as always and only goes undecoded.
//
// It is shared by the transport goroutines reading request bodies and the handler goroutines
// reading response bodies, hence the atomics.
type copyBudget struct {
	limit int64 // <= 0: no limit
	small int64 // copies of at most this many bytes are always admitted (and counted)
	log   *slog.Logger
	bufs  *bodybuf.Pool // lends the copies their buffers; nil: each allocates its own

	reserved atomic.Int64 // bytes held by copies in flight
	refused  atomic.Int64 // copies refused since the last warning
	lastWarn atomic.Int64 // when that warning was logged, in Unix nanoseconds; 0: never
	// pending is set while a timer is due to log the refusals held back since the last warning.
	pending atomic.Bool
	// interval is the least time between two warnings; 0 means copyBudgetWarnInterval.
	interval time.Duration
}

// copyBudgetWarning is the message of the warning that copies were refused.
const copyBudgetWarning = "copy budget full: bodies forwarded without being decoded"

// copyBudgetWarnInterval is the least time between two warnings that copies were refused: a
// burst of refusals is one line in the log, not one per exchange.
const copyBudgetWarnInterval = time.Minute

// smallCopy is the size up to which a Proxy always admits a copy (and still counts it): error
// responses (429, 529, 400 …) and short requests are what a burst of large uploads must not
// cost, and 64 KiB per exchange is within the memory target's allowance per stream.
const smallCopy = 64 << 10

// reserve takes n more bytes for a copy that holds own bytes already. It refuses when they do
// not fit and other copies hold some: like the pipeline's queue, the budget always admits a copy
// when it is the only one, so that one body larger than the budget is still decoded, and always
// admits a small one (up to b.small bytes). On refusal it takes nothing and returns what the other copies
// held.
func (b *copyBudget) reserve(n, own int64) (ok bool, others int64) {
	for {
		cur := b.reserved.Load()
		others = cur - own
		if b.limit > 0 && others > 0 && own+n > b.small && cur+n > b.limit {
			b.warn(others)
			return false, others
		}
		if b.reserved.CompareAndSwap(cur, cur+n) {
			return true, others
		}
	}
}

// pool returns the pool that lends the copies their buffers: nil, which allocates, when b is.
func (b *copyBudget) pool() *bodybuf.Pool {
	if b == nil {
		return nil
	}
	return b.bufs
}

// release gives back n bytes a copy held. A nil b has nothing to give back.
func (b *copyBudget) release(n int64) {
	if b != nil && n != 0 {
		b.reserved.Add(-n)
	}
}

// warn counts a refused copy and logs, at most once per copyBudgetWarnInterval, how many were
// refused since the last time. Refusals held back are logged when the interval is over, by a
// timer, so that the end of a burst reaches the log even when no copy is refused after it.
func (b *copyBudget) warn(others int64) {
	b.refused.Add(1)
	now := time.Now().UnixNano()
	last := b.lastWarn.Load()
	interval := b.interval
	if interval <= 0 {
		interval = copyBudgetWarnInterval
	}
	if last != 0 && now-last < int64(interval) {
		if b.pending.CompareAndSwap(false, true) {
			time.AfterFunc(time.Duration(last+int64(interval)-now), b.flush)
		}
		return
	}
	if !b.lastWarn.CompareAndSwap(last, now) {
		return // another copy's refusal is logging it
	}
	b.log.Warn(copyBudgetWarning,
		"bodies", b.refused.Swap(0), "copying_bytes", others, "budget_bytes", b.limit)
}

// flush logs the refusals held back since the last warning, if any.
func (b *copyBudget) flush() {
	b.pending.Store(false)
	if n := b.refused.Swap(0); n > 0 {
		b.lastWarn.Store(time.Now().UnixNano())
		b.log.Warn(copyBudgetWarning, "bodies", n, "budget_bytes", b.limit)
	}
}

// copyRefused is why a copy was not made: the copy budget was full.
type copyRefused struct {
	others int64 // bytes other copies held then
	budget int64
}

func (e *copyRefused) Error() string {
	return fmt.Sprintf(wire.NotDecodedCopyBudget+"%d bytes of other bodies (copy budget of %d bytes)", e.others, e.budget)
}
