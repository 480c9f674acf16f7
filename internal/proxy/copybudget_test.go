package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/bodybuf"
	testharness "github.com/cctrace/cctrace/internal/testkit/harness"
)

// newTestBudget returns a budget of limit bytes that logs to logs, its copies' buffers lent by a
// pool, as in cctrace.
func newTestBudget(limit int64, logs io.Writer) *copyBudget {
	return &copyBudget{limit: limit, log: slog.New(slog.NewTextHandler(logs, nil)), bufs: &bodybuf.Pool{}}
}

// checkReserved fails the test unless b holds want bytes.
func checkReserved(t *testing.T, b *copyBudget, want int64) {
	t.Helper()
	if got := b.reserved.Load(); got != want {
		t.Fatalf("budget holds %d bytes, want %d", got, want)
	}
}

// checkRefused fails the test unless c was refused while other copies held others bytes.
func checkRefused(t *testing.T, c *boundedCopy, others int64) {
	t.Helper()
	body, err := c.take()
	var refused *copyRefused
	if body != nil || !errors.As(err, &refused) || refused.others != others {
		t.Fatalf("take() = %d bytes, %v; want nil and a refusal with %d bytes held by others", len(body), err, others)
	}
	want := fmt.Sprintf("not decoded: cctrace was already copying %d bytes of other bodies (copy budget of %d bytes)", others, refused.budget)
	if err.Error() != want {
		t.Errorf("refusal says %q, want %q", err, want)
	}
}

func TestCopyBudget(t *testing.T) {
	const limit = 1 << 20 // parse limit
	small := func(n int) []byte { return bytes.Repeat([]byte("b"), n) }

	t.Run("admits what fits, refuses the rest, releases on take and on drop", func(t *testing.T) {
		b := newTestBudget(1000, io.Discard)
		first := newBoundedCopy(limit, 600, b)
		checkReserved(t, b, 600)
		refused := newBoundedCopy(limit, 500, b)
		checkReserved(t, b, 600)
		if refused.buf != nil {
			t.Error("a refused copy holds a buffer")
		}
		refused.add(small(500)) // the body still passes; nothing is copied
		if refused.buf != nil {
			t.Error("a refused copy copied")
		}
		checkRefused(t, refused, 600)
		second := newBoundedCopy(limit, 400, b)
		checkReserved(t, b, 1000)

		first.add(small(600))
		if body, err := first.take(); err != nil || len(body) != 600 {
			t.Fatalf("take() = %d bytes, %v; want 600, nil", len(body), err)
		}
		checkReserved(t, b, 400)
		second.drop()
		checkReserved(t, b, 0)
	})

	t.Run("a known length reserves the capacity of its buffer", func(t *testing.T) {
		b := newTestBudget(1<<20, io.Discard)
		c := newBoundedCopy(limit, 100<<10, b)
		checkReserved(t, b, 112<<10)
		c.add(small(100 << 10))
		if body, err := c.take(); err != nil || len(body) != 100<<10 {
			t.Fatalf("take() = %d bytes, %v", len(body), err)
		}
		checkReserved(t, b, 0)
	})

	t.Run("always admits a small copy, and counts it", func(t *testing.T) {
		b := newTestBudget(1000, io.Discard)
		b.small = 300
		huge := newBoundedCopy(limit, 5000, b)
		errResp := newBoundedCopy(limit, 300, b) // a 429's JSON body, say
		checkReserved(t, b, 5300)
		chunked := newBoundedCopy(limit, -1, b)
		chunked.add(small(200))
		checkReserved(t, b, 5500)
		chunked.add(small(200)) // 400 bytes: no longer small
		checkRefused(t, chunked, 5300)
		checkRefused(t, newBoundedCopy(limit, 301, b), 5300)
		errResp.add(small(300))
		if body, err := errResp.take(); err != nil || len(body) != 300 {
			t.Fatalf("take() = %d bytes, %v; want 300, nil", len(body), err)
		}
		huge.drop()
		checkReserved(t, b, 0)
	})

	t.Run("always admits a copy when no other holds any", func(t *testing.T) {
		b := newTestBudget(1000, io.Discard)
		huge := newBoundedCopy(limit, 5000, b)
		checkReserved(t, b, 5000)
		checkRefused(t, newBoundedCopy(limit, 1, b), 5000)
		huge.add(small(5000))
		if body, err := huge.take(); err != nil || len(body) != 5000 {
			t.Fatalf("take() = %d bytes, %v; want 5000, nil", len(body), err)
		}
		checkReserved(t, b, 0)

		alone := newBoundedCopy(limit, -1, b)
		for range 5 {
			alone.add(small(1000))
		}
		checkReserved(t, b, 5000)
		if body, err := alone.take(); err != nil || len(body) != 5000 {
			t.Fatalf("unknown length alone: take() = %d bytes, %v; want 5000, nil", len(body), err)
		}
		checkReserved(t, b, 0)
	})

	t.Run("an unknown length reserves each chunk and lets go of all when refused", func(t *testing.T) {
		b := newTestBudget(1000, io.Discard)
		chunked := newBoundedCopy(limit, -1, b)
		checkReserved(t, b, 0)
		chunked.add(small(300))
		chunked.add(small(300))
		checkReserved(t, b, 600)
		other := newBoundedCopy(limit, 300, b)
		checkReserved(t, b, 900)
		chunked.add(small(200)) // 1100 in all: no room
		checkReserved(t, b, 300)
		if chunked.buf != nil {
			t.Error("a refused copy kept its buffer")
		}
		chunked.add(small(1)) // nothing more is reserved once refused
		checkReserved(t, b, 300)
		checkRefused(t, chunked, 300)
		other.drop()
		checkReserved(t, b, 0)
	})

	t.Run("going over the parse limit releases", func(t *testing.T) {
		b := newTestBudget(1000, io.Discard)
		c := newBoundedCopy(600, 600, b)
		checkReserved(t, b, 600)
		c.add(small(601))
		checkReserved(t, b, 0)
		if _, err := c.take(); err != errOverParseLimit {
			t.Errorf("take() error %v, want errOverParseLimit", err)
		}
		// Past the parse limit is the reason that counts, even after a refusal.
		chunked := newBoundedCopy(600, -1, b)
		other := newBoundedCopy(600, 600, b)
		chunked.add(small(600))
		chunked.add(small(1))
		if _, err := chunked.take(); err != errOverParseLimit {
			t.Errorf("take() error %v, want errOverParseLimit", err)
		}
		other.drop()
		checkReserved(t, b, 0)
	})

	t.Run("no limit", func(t *testing.T) {
		for _, limit := range []int64{0, -1} {
			b := newTestBudget(limit, io.Discard)
			copies := []*boundedCopy{newBoundedCopy(1<<20, 600<<10, b), newBoundedCopy(1<<20, 600<<10, b), newBoundedCopy(1<<20, -1, b)}
			copies[2].add(small(600 << 10))
			for _, c := range copies {
				if c.refused != nil {
					t.Fatalf("budget %d refused a copy", limit)
				}
				c.drop()
			}
			checkReserved(t, b, 0)
		}
	})

	t.Run("warns once for a burst of refusals", func(t *testing.T) {
		var logs testharness.Buffer
		b := newTestBudget(1000, &logs)
		held := newBoundedCopy(limit, 1000, b)
		for range 10 {
			newBoundedCopy(limit, 10, b)
		}
		if n := strings.Count(logs.String(), "copy budget full"); n != 1 {
			t.Fatalf("%d warnings for 10 refusals, want 1:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "bodies=1 ") {
			t.Errorf("the first warning does not count one body:\n%s", logs.String())
		}
		// A minute later, the next refusal tells how many there were since.
		b.lastWarn.Add(-int64(copyBudgetWarnInterval))
		newBoundedCopy(limit, 10, b)
		if n := strings.Count(logs.String(), "copy budget full"); n != 2 || !strings.Contains(logs.String(), "bodies=10 ") {
			t.Errorf("after a minute: %d warnings, want 2, the second counting 10 bodies:\n%s", n, logs.String())
		}
		held.drop()
		checkReserved(t, b, 0)
	})

	t.Run("logs the end of a burst without a later refusal", func(t *testing.T) {
		var logs testharness.Buffer
		b := newTestBudget(1000, &logs)
		b.interval = 20 * time.Millisecond
		held := newBoundedCopy(limit, 1000, b)
		for range 10 {
			newBoundedCopy(limit, 10, b)
		}
		// The first refusal is logged at once; the nine held back once the interval is over,
		// though no copy is refused after them.
		deadline := time.Now().Add(testharness.Patience)
		for strings.Count(logs.String(), "copy budget full") < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := strings.Count(logs.String(), "copy budget full"); n != 2 || !strings.Contains(logs.String(), "bodies=9 ") {
			t.Errorf("%d warnings, want 2, the second counting 9 bodies:\n%s", n, logs.String())
		}
		held.drop()
		checkReserved(t, b, 0)
	})
}

// TestCopyBudgetThroughProxy sends several slow uploads through a proxy whose copy budget holds
// two of them. The two that start first are copied; the others, with or without a
// Content-Length, are forwarded byte for byte but not copied, and reported with a ParseError
// that says why. Once all are done the budget is whole again.
func TestCopyBudgetThroughProxy(t *testing.T) {
	const (
		bodySize = 100 << 10 // copies take 112 KiB buffers
		budget   = 2 * 112 << 10
		chunk    = 8 << 10
	)
	// Uploads 0 and 1 are admitted, 2 to 4 (with a Content-Length) refused when they start, and
	// 5 (chunked) refused at its first chunk.
	const uploads, admitted, chunked = 6, 2, 5
	bodies := make([][]byte, uploads+1)
	for i := range bodies {
		bodies[i] = numberedBody(uint64(i+1), bodySize)
	}

	arrived := make(chan int, uploads+1)
	upstreamErrs := make(chan error, uploads+1)
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/upload/%d", &i); err != nil || i < 0 || i >= len(bodies) {
			upstreamErrs <- fmt.Errorf("unexpected path %q", r.URL.Path)
			return
		}
		arrived <- i
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, bodies[i]) {
			upstreamErrs <- fmt.Errorf("upload %d: upstream received %d bytes (%v), not the %d sent", i, len(got), err, len(bodies[i]))
		}
		w.WriteHeader(http.StatusNoContent)
	}), WithCopyBudget(budget), WithBodyBuffers(&bodybuf.Pool{}))

	// Start every upload, one after the other: each has reached the upstream (so the proxy has
	// reserved its copy, or not) before the next starts. None has sent a byte of its body.
	pipes := make([]*io.PipeWriter, uploads)
	var wg sync.WaitGroup
	defer func() {
		for _, pw := range pipes {
			if pw != nil {
				_ = pw.Close()
			}
		}
		wg.Wait()
	}()
	clientErrs := make(chan error, uploads)
	for i := range uploads {
		pr, pw := io.Pipe()
		pipes[i] = pw
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/upload/%d", h.proxyURL, i), pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = bodySize
		if i == chunked {
			req.ContentLength = -1
		}
		wg.Go(func() {
			res, err := h.client.Do(req)
			if err != nil {
				clientErrs <- fmt.Errorf("upload %d: %w", i, err)
				_ = pr.CloseWithError(err)
				return
			}
			_ = readAll(t, res.Body)
			if res.StatusCode != http.StatusNoContent {
				clientErrs <- fmt.Errorf("upload %d: status %d", i, res.StatusCode)
			}
		})
		select {
		case got := <-arrived:
			if got != i {
				t.Fatalf("upload %d reached the upstream, want %d", got, i)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("upload %d did not reach the upstream", i)
		}
	}
	if got := h.proxy.copies.reserved.Load(); got != budget {
		t.Fatalf("the proxy reserved %d bytes for the uploads, want %d", got, budget)
	}

	// send writes upload i's body in chunks, pausing between them as a slow client does.
	send := func(i int) {
		for b := bodies[i]; len(b) > 0; b = b[min(chunk, len(b)):] {
			if _, err := pipes[i].Write(b[:min(chunk, len(b))]); err != nil {
				clientErrs <- fmt.Errorf("upload %d: writing the body: %w", i, err)
				return
			}
			time.Sleep(time.Millisecond)
		}
		_ = pipes[i].Close()
	}
	// The refused uploads go first, all at once, while the admitted ones hold the budget; then
	// the admitted ones, side by side.
	var senders sync.WaitGroup
	for i := admitted; i < uploads; i++ {
		senders.Go(func() { send(i) })
	}
	senders.Wait()
	for range uploads - admitted {
		h.rec.next(t)
	}
	for i := range admitted {
		senders.Go(func() { send(i) })
	}
	senders.Wait()
	for range admitted {
		h.rec.next(t)
	}
	wg.Wait()
	if got := h.proxy.copies.reserved.Load(); got != 0 {
		t.Errorf("after every upload the budget still holds %d bytes", got)
	}

	// With the budget whole again, the next body is copied.
	res, err := h.client.Post(h.proxyURL+fmt.Sprintf("/upload/%d", uploads), "application/json", bytes.NewReader(bodies[uploads]))
	if err != nil {
		t.Fatal(err)
	}
	_ = readAll(t, res.Body)
	<-arrived
	h.rec.next(t)

	close(clientErrs)
	for err := range clientErrs {
		t.Error(err)
	}
	close(upstreamErrs)
	for err := range upstreamErrs {
		t.Error(err)
	}
	refusal := fmt.Sprintf("not decoded: cctrace was already copying %d bytes of other bodies (copy budget of %d bytes)", budget, budget)
	for _, rec := range h.rec.all() {
		var i int
		if _, err := fmt.Sscanf(rec.req.Path, "/upload/%d", &i); err != nil {
			t.Fatalf("observed path %q", rec.req.Path)
		}
		if rec.req.BodySize != bodySize {
			t.Errorf("upload %d: observed body size %d, want %d", i, rec.req.BodySize, bodySize)
		}
		if i < admitted || i == uploads {
			if rec.req.ParseError != "" || !bytes.Equal(rec.reqBody, bodies[i]) {
				t.Errorf("upload %d: copy of %d bytes, parse error %q; want the body it sent", i, len(rec.reqBody), rec.req.ParseError)
			}
			continue
		}
		if rec.reqBody != nil || rec.req.ParseError != refusal {
			t.Errorf("upload %d: copy of %d bytes, parse error %q; want none and %q", i, len(rec.reqBody), rec.req.ParseError, refusal)
		}
	}
	if got := h.proxy.copies.reserved.Load(); got != 0 {
		t.Errorf("the budget holds %d bytes once all is done", got)
	}
	if n := strings.Count(h.logs.String(), "copy budget full"); n != 1 {
		t.Errorf("%d copy budget warnings for one burst, want 1", n)
	}
}
