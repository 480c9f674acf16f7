package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// Cell is one load setting: which body, how many clients at once, how the upstream paces the
// stream, and the bounds of the run.
type Cell struct {
	BodySize    int           // request body size in bytes, as passed to traffic.Recording.Body
	Concurrency int           // clients sending at once; each waits for its stream to end
	Pace        time.Duration // gap between SSE events; zero streams them back to back
	Duration    time.Duration // stop starting requests after this long…
	MaxRequests int           // …or after this many, whichever comes first
	// Think is how long each client waits after one stream ends before sending its next request,
	// as Claude Code does while it runs a tool or the human types; zero sends it at once.
	Think time.Duration
}

// Name is a short label such as "200KB c16 paced".
func (c Cell) Name() string {
	pace := "unpaced"
	if c.Pace > 0 {
		pace = "paced " + c.Pace.String()
	}
	name := fmt.Sprintf("%s c%d %s", sizeName(c.BodySize), c.Concurrency, pace)
	if c.Think > 0 {
		name += " think " + c.Think.String()
	}
	return name
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.Itoa(n>>20) + "MB"
	}
	return strconv.Itoa(n>>10) + "KB"
}

// Result is what one run of a cell against one target measured, from the client's side.
type Result struct {
	Requests int           // requests that completed with a byte-identical stream
	Failures []string      // what went wrong, one line per failed request (at most 10 kept)
	Failed   int           // how many requests failed
	Elapsed  time.Duration // from the first request to the last stream's end
	// TTFB is, per request, the time from starting to send it to the first byte of its body.
	TTFB []time.Duration
	// Outbound and Back are two of TTFB's three parts, per request like TTFB: Outbound from
	// starting to send the request to the upstream having read its body to the end (the
	// request's way through the proxy), then the upstream's own time to its first event, then
	// Back from the upstream starting to write that event (and the headers with it) to the
	// client reading the first byte of the body (the answer's way back). The client and the
	// upstream share one process, and so one clock.
	Outbound, Back []time.Duration
	// Total is, per request, the time from starting to send it to the end of its stream.
	Total []time.Duration
	// EventDelay is, per event, the time from the upstream's flush to the client reading the
	// event's last byte. Only recorded for paced cells: back to back, events queue behind
	// each other and the figure means nothing.
	EventDelay []time.Duration
}

// Client sends Claude-Code-shaped requests to one target and checks every answer.
// The zero value is not usable; call NewClient.
type Client struct {
	up    *Upstream
	body  []byte
	nonce int // offset of the body's nonce digits, -1 without
	http  *http.Client
	ids   *atomic.Uint64
}

// NewClient returns a client that posts body to targets forwarding to up, keeping up to
// maxConns connections per target alive between requests.
func NewClient(up *Upstream, body []byte, maxConns int, ids *atomic.Uint64) *Client {
	t := &http.Transport{
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &Client{
		up:    up,
		body:  body,
		nonce: traffic.NonceOffset(body),
		http:  &http.Client{Transport: t, Timeout: 2 * time.Minute},
		ids:   ids,
	}
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Run sends requests to baseURL as cell says, with cell.Concurrency clients each looping until
// the duration or the request count is reached (every client sends at least one request), and
// returns what they measured. ctx cancels the run.
func (c *Client) Run(ctx context.Context, baseURL string, cell Cell) Result {
	var (
		mu      sync.Mutex
		res     Result
		started atomic.Int64
		wg      sync.WaitGroup
	)
	begin := time.Now()
	deadline := begin.Add(cell.Duration)
	for w := range cell.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("b3c1e0d2-0000-4000-8000-%012d", w)
			// Each client stamps its own copy of the body with the request id, so that every
			// request of its session is a new prompt.
			body := bytes.Clone(c.body)
			for first := true; ; first = false {
				if ctx.Err() != nil {
					return
				}
				if !first && cell.Think > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(cell.Think):
					}
				}
				if !first && (time.Now().After(deadline) || started.Load() >= int64(cell.MaxRequests)) {
					return
				}
				started.Add(1)
				m, err := c.one(ctx, baseURL, session, body, cell.Pace)
				mu.Lock()
				if err != nil {
					res.Failed++
					if len(res.Failures) < 10 {
						res.Failures = append(res.Failures, err.Error())
					}
				} else {
					res.Requests++
					res.TTFB = append(res.TTFB, m.ttfb)
					res.Outbound = append(res.Outbound, m.outbound)
					res.Back = append(res.Back, m.back)
					res.Total = append(res.Total, m.total)
					if cell.Pace > 0 {
						res.EventDelay = append(res.EventDelay, m.delays...)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(begin)
	return res
}

type measurement struct {
	ttfb, total    time.Duration
	outbound, back time.Duration
	delays         []time.Duration
}

// one sends one request and reads its stream, checking it byte for byte against what the
// upstream sent.
func (c *Client) one(ctx context.Context, baseURL, session string, body []byte, pace time.Duration) (measurement, error) {
	var m measurement
	n := c.ids.Add(1)
	id := strconv.FormatUint(n, 10)
	if c.nonce >= 0 {
		traffic.Stamp(body, c.nonce, n)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		return m, fmt.Errorf("building request: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "claude-cli/2.1.328 (external, cli)")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	h.Set("X-Claude-Code-Session-Id", session)
	h.Set("X-Client-Request-Id", "bench-"+id)
	h.Set("X-Stainless-Retry-Count", "0")
	h.Set(headerID, id)
	h.Set(headerBody, bodyDigest(int64(len(body)), crc32.ChecksumIEEE(body)))
	if pace > 0 {
		h.Set(headerPace, pace.String())
	}

	want := c.up.stream
	arrived := make([]time.Duration, 0, len(want.Ends))
	start, startAt := time.Now(), c.up.since()
	var firstAt time.Duration
	res, err := c.http.Do(req)
	if err != nil {
		return m, fmt.Errorf("sending request: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return m, fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(msg))
	}
	bp := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(bp)
	buf := *bp
	got := 0
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			now := c.up.since()
			if got == 0 {
				m.ttfb, firstAt = time.Since(start), now
			}
			if got+n > len(want.Bytes) || !bytes.Equal(buf[:n], want.Bytes[got:got+n]) {
				return m, fmt.Errorf("stream differs from the upstream's at or after byte %d", got)
			}
			got += n
			for len(arrived) < len(want.Ends) && want.Ends[len(arrived)] <= got {
				arrived = append(arrived, now)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return m, fmt.Errorf("reading stream after %d bytes: %w", got, rerr)
		}
	}
	m.total = time.Since(start)
	if got != len(want.Bytes) {
		return m, fmt.Errorf("stream ended after %d of %d bytes", got, len(want.Bytes))
	}
	x := c.up.take(id)
	sent := x.sent
	if len(sent) != len(arrived) {
		return m, fmt.Errorf("upstream noted %d events, client read %d", len(sent), len(arrived))
	}
	m.outbound, m.back = x.bodyRead-startAt, firstAt-x.answer
	if pace > 0 {
		m.delays = make([]time.Duration, len(sent))
		for i := range sent {
			m.delays[i] = arrived[i] - sent[i]
		}
	}
	return m, nil
}
