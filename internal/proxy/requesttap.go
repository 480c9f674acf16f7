package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// requestTap wraps a request body: it copies the bytes the transport reads, up to the parse
// limit, and calls onEnd at EOF, on a read error, or on Close. onEnd leads to finish, after which
// the tap only passes bytes through: the copy already belongs to the Observer.
//
// The transport reads the body on its own goroutine, which can outlive the round trip, while
// finish (and drain) may run on the handler's goroutine; readMu keeps reads of the client's body
// one at a time and mu guards the copy.
type requestTap struct {
	rc            io.ReadCloser
	contentLength int64 // -1 when unknown
	maxBody       int64 // 0: no limit
	onEnd         func()

	readMu sync.Mutex

	mu       sync.Mutex
	copy     *boundedCopy // stops growing at finish: it belongs to the Observer then
	total    int64        // bytes read from the client's body
	eof      bool
	err      error
	tooLarge bool // the body went past maxBody
	finished bool
}

// newRequestTap returns a tap on rc whose copy is bounded by limit and takes its share of budget
// (nil: none).
func newRequestTap(rc io.ReadCloser, contentLength, limit, maxBody int64, budget *copyBudget, onEnd func()) *requestTap {
	return &requestTap{
		rc:            rc,
		contentLength: contentLength,
		maxBody:       maxBody,
		onEnd:         onEnd,
		copy:          newBoundedCopy(limit, contentLength, budget),
	}
}

// Read reads from the client's body and copies what it got.
//
// Once the body has ended (EOF seen, or Content-Length bytes read) Read answers io.EOF itself and
// never reads the client's body again. This matters: Go's HTTP/1 server closes the request body
// when the response headers go out, and the transport makes one more read after Content-Length
// bytes to check for excess. When the upstream answers before that read runs, the read would fail
// with "http: invalid Read on closed Body" and the transport would drop the upstream connection,
// cutting the response stream short. A bare httputil.ReverseProxy has this race.
func (t *requestTap) Read(p []byte) (int, error) {
	t.readMu.Lock()
	t.mu.Lock()
	ended, failed := t.ended(), t.err
	t.mu.Unlock()
	if ended {
		t.readMu.Unlock()
		return 0, io.EOF
	}
	if failed != nil {
		// A body that failed (or went past the size limit) stays failed: reading the client's
		// connection again could race with the server, which owns it again once the handler
		// has returned.
		t.readMu.Unlock()
		return 0, failed
	}
	n, err := t.rc.Read(p)
	t.mu.Lock()
	if t.maxBody > 0 && t.total+int64(n) > t.maxBody {
		// Forward nothing past the limit: the transport sees the error and drops the upstream
		// request, and the proxy answers 413.
		n = int(max(t.maxBody-t.total, 0))
		err = &http.MaxBytesError{Limit: t.maxBody}
		t.tooLarge = true
	}
	t.total += int64(n)
	if !t.finished {
		t.copy.add(p[:n])
	}
	switch {
	case err == io.EOF:
		t.eof = true
	case err != nil && t.err == nil:
		t.err = err
	}
	if err == nil && t.ended() {
		err = io.EOF
	}
	t.mu.Unlock()
	t.readMu.Unlock()
	if err != nil {
		t.onEnd()
	}
	return n, err
}

// overLimit reports whether the body went past the proxy's maximum request size.
func (t *requestTap) overLimit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tooLarge
}

// ended reports whether the client's body is known to be over. mu must be held.
func (t *requestTap) ended() bool {
	return t.eof || (t.contentLength >= 0 && t.total >= t.contentLength)
}

// Close closes the client's body; a body closed before its end is reported as it stands.
func (t *requestTap) Close() error {
	err := t.rc.Close()
	t.onEnd()
	return err
}

// drain reads what the transport left of the body, up to just past the copy's limit, so that an
// exchange whose upstream could not be reached is still reported with its request body.
func (t *requestTap) drain() {
	t.mu.Lock()
	left := max(t.copy.limit, 0) + 1 - t.total
	done := t.finished || t.ended() || t.err != nil
	t.mu.Unlock()
	if done || left <= 0 {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(t, left))
}

// finish stops copying and returns what the Observer gets: the copy (nil when empty or not
// usable), the bytes read so far, and why the copy is not usable, if it is not.
func (t *requestTap) finish() (body []byte, size int64, parseErr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = true
	size = t.total
	// A body with a known length is whole once that many bytes passed, even if the transport
	// has not read the EOF yet (the upstream may answer before it does).
	whole := t.ended()
	switch {
	case t.err != nil:
		t.copy.drop()
		return nil, size, fmt.Sprintf("reading request body: %v (%d bytes forwarded)", t.err, size)
	case !whole:
		t.copy.drop()
		return nil, size, fmt.Sprintf("request body not read to its end (%d bytes forwarded)", size)
	}
	// The copy now belongs to the Observer: the tap lives as long as the response, and holding
	// it here kept every request body alive until its stream ended.
	b, err := t.copy.take()
	switch {
	case errors.Is(err, errOverParseLimit):
		return nil, size, fmt.Sprintf("request body over the parse limit of %d bytes (%d bytes forwarded)", t.copy.limit, size)
	case err != nil:
		return nil, size, err.Error()
	}
	return b, size, ""
}
