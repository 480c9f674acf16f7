// Package bench is cctrace's performance harness: a fast local upstream that answers like the
// Messages API, a load generator that measures what a client sees through each proxy variant,
// the variants themselves (bare httputil.ReverseProxy, nginx, the cctrace binary), /proc
// readings of their CPU and memory, and the report.
//
// Every server binds to 127.0.0.1 only, and every load loop is bounded in count and time.
package bench

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// Headers the load generator sends so that the upstream can check and time each exchange. They
// pass through every proxy unchanged.
const (
	headerID   = "X-Bench-Id"   // unique per request: keys the upstream's send times
	headerBody = "X-Bench-Body" // "LENGTH:CRC32" of the body the client sent
	headerPace = "X-Bench-Pace" // gap between events, as a time.Duration string; none when absent
)

// Upstream is a fast local stand-in for the Messages API. It reads each request body to its end
// and checks it against the length and CRC-32 the client announced (answering 422 when they
// differ, so a proxy that alters a body fails the run), then streams the same SSE reply to every
// request, flushing each event and noting when it left. The zero value is not usable; call
// StartUpstream.
type Upstream struct {
	stream *traffic.Stream
	base   time.Time
	srv    *http.Server
	ln     net.Listener
	done   chan struct{}

	mu    sync.Mutex
	noted map[string]noted // by request id
}

// noted is what the upstream noted of one exchange, as times since its base.
type noted struct {
	bodyRead time.Duration   // the request body was read to its end
	answer   time.Duration   // the first event (with the headers) was about to be written
	sent     []time.Duration // each event was flushed
}

// StartUpstream starts an upstream serving stream on a free port of 127.0.0.1.
func StartUpstream(stream *traffic.Stream) (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting upstream: %w", err)
	}
	u := &Upstream{stream: stream, base: time.Now(), ln: ln, done: make(chan struct{}), noted: make(map[string]noted)}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(u.done)
		_ = u.srv.Serve(ln)
	}()
	return u, nil
}

// URL returns the upstream's base URL, http://127.0.0.1:PORT.
func (u *Upstream) URL() string { return "http://" + u.ln.Addr().String() }

// Close stops the upstream, cutting any stream still running.
func (u *Upstream) Close() error {
	err := u.srv.Close()
	<-u.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// since returns the time elapsed since the upstream started, on the monotonic clock the load
// generator shares (it runs in the same process).
func (u *Upstream) since() time.Duration { return time.Since(u.base) }

// ServeHTTP answers POST requests with the stream and anything else with 200 "ok" (readiness).
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	n, sum, err := readBody(r.Body)
	bodyRead := u.since()
	if err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if want := r.Header.Get(headerBody); want != bodyDigest(n, sum) {
		http.Error(w, fmt.Sprintf("request body changed on the way: got %s, client sent %s", bodyDigest(n, sum), want), http.StatusUnprocessableEntity)
		return
	}
	var pace time.Duration
	if p := r.Header.Get(headerPace); p != "" {
		if pace, err = time.ParseDuration(p); err != nil {
			http.Error(w, "bad "+headerPace, http.StatusBadRequest)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", "req_bench"+r.Header.Get(headerID))
	rc := http.NewResponseController(w)
	sent := make([]time.Duration, 0, len(u.stream.Events))
	next := time.Now()
	answer := u.since()
	for i, ev := range u.stream.Events {
		if pace > 0 && i > 0 {
			// Pace against the schedule, not the previous write, so that slow writes do not
			// stretch the stream.
			next = next.Add(pace)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		sent = append(sent, u.since())
	}
	if id := r.Header.Get(headerID); id != "" {
		u.mu.Lock()
		u.noted[id] = noted{bodyRead: bodyRead, answer: answer, sent: sent}
		u.mu.Unlock()
	}
}

// take returns and forgets what the upstream noted of request id; the zero noted when it has
// nothing. The upstream stores it before its handler returns, and the client only sees the end
// of a chunked body after that, so it is there once the client has read the whole stream.
func (u *Upstream) take(id string) noted {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.noted[id]
	delete(u.noted, id)
	return x
}

var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// readBody reads r to its end and returns its length and CRC-32 (IEEE).
func readBody(r io.Reader) (int64, uint32, error) {
	bp := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(bp)
	h := crc32.NewIEEE()
	n, err := io.CopyBuffer(h, r, *bp)
	return n, h.Sum32(), err
}

func bodyDigest(n int64, sum uint32) string {
	return strconv.FormatInt(n, 10) + ":" + strconv.FormatUint(uint64(sum), 16)
}
