// Package pipeline connects the proxy to the tracker: it takes what the proxy observed, off the
// forwarding path, decodes bodies with instrument/wire on its own goroutine, and feeds the tracker
// in order.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
)

// Pipeline is a proxy.Observer that feeds a tracker from one goroutine. Observer calls never
// block: events queue in memory, and when the bodies waiting to be decoded would exceed the byte
// budget new bodies are dropped (the exchange is still tracked, as undecodable). The zero value is
// not usable; call New.
type Pipeline struct {
	tracker *instrument.Tracker
	log     *slog.Logger
	now     func() time.Time
	tick    time.Duration
	budget  int
	// endpoints remembers, per exchange in flight, what its response decodes as. Only the
	// pipeline goroutine touches it.
	endpoints map[uint64]wire.Endpoint
	// unlogged counts dropped bodies not yet warned about; lastWarn is when the last warning
	// went out. Only the pipeline goroutine touches them.
	unlogged int
	lastWarn time.Time
	// bodies decodes request bodies, each from where the last body of its conversation stops
	// being the same. Only the pipeline goroutine touches it.
	bodies *wire.BodyCache
	// bufs takes back each body once it is decoded (see WithBodyBuffers).
	bufs *bodybuf.Pool
	// resolve attributes each request to a person before the tracker sees it (WithResolve).
	resolve func(*wire.Request)
	// spare is the last batch's array, emptied, for the queue to fill next: the queue and
	// the batch being handled take turns with two arrays instead of a new one per batch. Only
	// the pipeline goroutine touches it.
	spare []event

	mu      sync.Mutex
	queue   []event
	queued  int // body bytes pushed and not yet decoded
	dropped int // bodies dropped since the pipeline goroutine last looked
	wake    chan struct{}
	done    chan struct{}
}

type event struct {
	req    *wire.Request
	resp   *wire.Response
	body   []byte
	decode *decoding
}

// decoding is a request to decode for a caller that waits (Decode): req is the caller's copy,
// body the caller's, neither counted nor given back to the pool.
type decoding struct {
	req  *wire.Request
	body []byte
	done chan struct{}
}

// errStopped is what Decode answers once the pipeline has stopped.
var errStopped = errors.New("pipeline stopped")

// Decode decodes the body of req into it (req.Body, or req.ParseError) as the pipeline decodes
// every request, on the pipeline's goroutine and ahead of what is queued, and returns once it
// has: for a decision that needs a request's body before it is forwarded (a budget gate), so
// that the forwarding goroutine waits for the decoder rather than decode. body stays the
// caller's, and is only read. Decode returns ctx's error if ctx ends first (req is then left as
// it was), and an error once the pipeline has stopped.
func (p *Pipeline) Decode(ctx context.Context, req *wire.Request, body []byte) error {
	d := &decoding{req: new(wire.Request), body: body, done: make(chan struct{})}
	*d.req = *req
	p.push(event{decode: d})
	select {
	case <-d.done:
		req.Body, req.ParseError = d.req.Body, d.req.ParseError
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return errStopped
	}
}

// Option configures a Pipeline.
type Option func(*Pipeline)

// WithLogger sets the logger for decoding problems. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(p *Pipeline) { p.log = l } }

// WithClock sets the clock used for the tracker's timeouts. Default time.Now.
func WithClock(now func() time.Time) Option { return func(p *Pipeline) { p.now = now } }

// WithTickInterval sets how often the tracker's timeouts are checked. Default 1 second.
func WithTickInterval(d time.Duration) Option { return func(p *Pipeline) { p.tick = d } }

// WithBodyBuffers gives each body back to pool once it is decoded (or dropped): the pool the
// proxy copies bodies into (proxy.WithBodyBuffers). Default: none, bodies are left to the
// collector.
func WithBodyBuffers(pool *bodybuf.Pool) Option { return func(p *Pipeline) { p.bufs = pool } }

// WithResolve sets how each request is attributed to a person and team (its Identity's User
// and Team), once its body is decoded and before the tracker sees it: the tracker puts what it
// finds on the request's spans. It runs on the pipeline's goroutine, off the forwarding path.
// Default (and nil): requests keep the identity the proxy gave them.
func WithResolve(resolve func(*wire.Request)) Option {
	return func(p *Pipeline) { p.resolve = resolve }
}

// DefaultQueueBudget is the default of WithQueueBudget. Decoding keeps up with hundreds of MB/s
// of request bodies, so the queue only fills when bodies arrive faster than that for a while;
// then a small budget is what keeps cctrace's memory bounded, at the price of some exchanges
// tracked without their bodies decoded.
const DefaultQueueBudget = 6 << 20

// WithQueueBudget bounds the body bytes pushed and not yet decoded. A body is always accepted
// when nothing else is waiting, however large, so that one big request is still decoded; so is a
// response body of up to 64 KiB (most answers, whole event streams included), whose usage the
// cost is counted from. Default DefaultQueueBudget (6 MiB).
func WithQueueBudget(n int) Option { return func(p *Pipeline) { p.budget = n } }

// New returns a pipeline feeding tr. Call Run to start it.
func New(tr *instrument.Tracker, opts ...Option) *Pipeline {
	p := &Pipeline{
		tracker:   tr,
		log:       slog.Default(),
		now:       time.Now,
		tick:      time.Second,
		budget:    DefaultQueueBudget,
		endpoints: make(map[uint64]wire.Endpoint),
		// The tracker is done with a body's messages before the next body is decoded.
		bodies: wire.NewBodyCache(0, wire.ReuseMessages()),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// RequestRead queues a request; see proxy.Observer.
func (p *Pipeline) RequestRead(req *wire.Request, body []byte) {
	p.push(event{req: req, body: body})
}

// ResponseDone queues a response; see proxy.Observer.
func (p *Pipeline) ResponseDone(resp *wire.Response, body []byte) {
	p.push(event{resp: resp, body: body})
}

// smallAnswer is the size up to which a response body is always queued (and counted): an answer
// carries the usage that cost is counted from, and a burst of large uploads must not cost it.
// It is the proxy's small copy, which it always makes.
const smallAnswer = 64 << 10

func (p *Pipeline) push(ev event) {
	p.mu.Lock()
	small := ev.resp != nil && len(ev.body) <= smallAnswer
	// A Decode is never dropped: its body is not counted (its caller holds it), and a held
	// request waits for it.
	if p.queued > 0 && p.queued+len(ev.body) > p.budget && !small && ev.decode == nil {
		p.bufs.Put(ev.body)
		ev.body = nil
		p.dropped++
		if ev.req != nil && ev.req.ParseError == "" {
			ev.req.ParseError = wire.NotDecodedQueueFull
		}
		if ev.resp != nil && ev.resp.ParseError == "" {
			ev.resp.ParseError = wire.NotDecodedQueueFull
		}
	}
	p.queued += len(ev.body)
	p.queue = append(p.queue, ev)
	p.mu.Unlock()
	// A wake-up already pending covers this event too: Run takes the whole queue.
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run feeds the tracker until ctx is done, then drains what was queued, ends every open span
// (Tracker.Close) and returns.
func (p *Pipeline) Run(ctx context.Context) {
	defer close(p.done)
	ticker := time.NewTicker(p.tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			p.drain()
			p.warnDropped(true)
			p.tracker.Close(p.now())
			return
		case <-p.wake:
			p.drain()
		case <-ticker.C:
			p.drain()
			p.tracker.Tick(p.now())
		}
	}
}

// Done is closed when Run has returned.
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Flush processes everything queued so far; for tests and shutdown paths that need the tracker
// to have seen all finished exchanges. It must not be called concurrently with Run.
func (p *Pipeline) Flush() { p.drain() }

// maxSpareEvents bounds the array drain keeps for the next batch: a burst's queue is let go.
const maxSpareEvents = 1024

func (p *Pipeline) drain() {
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue, p.spare = p.spare, nil
		p.unlogged += p.dropped
		p.dropped = 0
		p.mu.Unlock()
		p.warnDropped(false)
		if len(batch) == 0 {
			p.spare = batch
			return
		}
		for _, ev := range batch {
			if d := ev.decode; d != nil {
				_ = p.bodies.DecodeRequest(d.req, d.body)
				if b := d.req.Body; b != nil {
					// Its messages are in the array the next decode overwrites
					// (wire.ReuseMessages), and its caller reads them after that.
					b.Messages = slices.Clone(b.Messages)
				}
				close(d.done)
			}
		}
		for i := range batch {
			if batch[i].decode != nil {
				batch[i] = event{}
				continue
			}
			n := len(batch[i].body)
			p.handle(batch[i])
			// Nothing handle keeps refers to the body (wire copies the text it keeps; a
			// BodyCache keeps offsets and hashes), so a later exchange's copy may reuse it.
			// recycle_test.go checks it.
			p.bufs.Put(batch[i].body)
			batch[i] = event{}
			if n > 0 {
				// Bodies count against the budget until decoded, not only while queued: a
				// batch being decoded holds them too.
				p.mu.Lock()
				p.queued -= n
				p.mu.Unlock()
			}
		}
		if cap(batch) <= maxSpareEvents {
			p.spare = batch[:0] // its events were cleared above
		}
	}
}

// dropWarnInterval is the least time between two warnings that bodies were dropped: under
// sustained overload that is one line a minute, with a count, not one per batch.
const dropWarnInterval = time.Minute

// warnDropped logs the bodies dropped since the last warning, if there are any and the last
// warning is old enough (or final, at shutdown).
func (p *Pipeline) warnDropped(final bool) {
	if p.unlogged == 0 {
		return
	}
	now := p.now()
	if !final && !p.lastWarn.IsZero() && now.Sub(p.lastWarn) < dropWarnInterval {
		return
	}
	p.log.Warn("decode queue full: bodies not decoded", "count", p.unlogged)
	p.unlogged, p.lastWarn = 0, now
}

func (p *Pipeline) handle(ev event) {
	switch {
	case ev.req != nil:
		req := ev.req
		p.endpoints[req.ExchangeID] = req.Endpoint
		if err := p.bodies.DecodeRequest(req, ev.body); err != nil {
			p.log.Debug("request body not decoded", "path", req.Path, "error", err)
		}
		if p.resolve != nil {
			p.resolve(req)
		}
		p.tracker.Request(req)
	case ev.resp != nil:
		resp := ev.resp
		if ev.body != nil {
			wire.DecodeResponse(resp, p.endpoints[resp.ExchangeID], ev.body)
		}
		delete(p.endpoints, resp.ExchangeID)
		wire.DecodeRateLimit(resp)
		p.tracker.Response(resp)
	}
}
