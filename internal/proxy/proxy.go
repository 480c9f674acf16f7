// Package proxy is cctrace's transparent reverse proxy. It forwards every request to the upstream
// and every response back to the client byte for byte and without delay, and taps both bodies
// as they pass to tell an Observer what each exchange carried.
//
// Forwarding never waits for observing: no body is decoded on the forwarding path. Request bytes
// are copied as the transport reads them, response bytes once they were written to the client
// (with the time each part of an event stream was), and the Observer decodes the copies.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Proxy is an http.Handler that forwards to one upstream and reports every exchange to an
// Observer. Build it with New; the zero value is not usable. It is safe for concurrent use.
type Proxy struct {
	upstream *url.URL
	obs      Observer
	cfg      config
	rp       *httputil.ReverseProxy
	lastID   atomic.Uint64
	copies   copyBudget // shared by every exchange's body copies
}

var _ http.Handler = (*Proxy)(nil)

// New returns a Proxy that forwards to upstream, an absolute http or https URL. A base path in
// upstream is kept: with upstream https://gw.example/anthropic, a request for /v1/messages goes
// to https://gw.example/anthropic/v1/messages. A query in upstream is merged with each request's.
func New(upstream *url.URL, obs Observer, opts ...Option) (*Proxy, error) {
	if upstream == nil {
		return nil, errors.New("proxy: no upstream URL")
	}
	if upstream.Scheme != "http" && upstream.Scheme != "https" {
		return nil, fmt.Errorf("proxy: upstream %q: scheme must be http or https", upstream.Redacted())
	}
	if upstream.Host == "" {
		return nil, fmt.Errorf("proxy: upstream %q: no host", upstream.Redacted())
	}
	if obs == nil {
		return nil, errors.New("proxy: no observer")
	}
	u := *upstream
	p := &Proxy{upstream: &u, obs: obs, cfg: newConfig(opts)}
	p.copies.limit = p.cfg.copyBudget
	p.copies.small = smallCopy
	p.copies.log = p.cfg.logger
	p.copies.bufs = p.cfg.bodies
	p.rp = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: p.cfg.transport,
		// Flush every write: event streams must reach the client as they arrive, and for other
		// bodies the cost is one flush per 32 KiB buffer.
		FlushInterval:  -1,
		BufferPool:     bufferPool{},
		ErrorLog:       slog.NewLogLogger(p.cfg.logger.Handler(), slog.LevelWarn),
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.handleError,
	}
	return p, nil
}

// ServeHTTP forwards r to the upstream and the upstream's answer to w. It reports the exchange
// to the Observer: RequestRead once the request body has been read (or the response began), then
// ResponseDone before it returns, whatever happened. A body over the maximum request size is
// answered 413 by the proxy itself (and reported); CONNECT is answered 405 (and not reported).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Close (and so drain) the client's body before returning, not after. With full duplex on,
	// the HTTP/1 server otherwise drains it itself after the handler, hits its end, starts a
	// background read of the connection that nothing stops, and panics ("invalid concurrent
	// Body.Read call") on the next request of a kept-alive connection, or in the transport still
	// reading the body, which takes the whole process down (golang/go#68560). Any answer that
	// leaves the body unread triggers it: an unreachable upstream, an upstream answering early,
	// a 413.
	if r.Body != nil {
		defer r.Body.Close()
	}
	route := wire.ClassifyRoute(r.Method, r.URL.Path)
	x := &exchange{
		p: p,
		req: &wire.Request{
			ExchangeID: p.lastID.Add(1),
			Time:       p.cfg.now(),
			Method:     r.Method,
			Path:       r.URL.Path,
			Endpoint:   route.Endpoint,
			Provider:   p.cfg.provider,
			PathModel:  route.Model,
			PathStream: route.Stream,
			Headers:    wire.ParseHeaders(r.Header),
			Identity:   p.identify(r.Header),
			// The copy stays encoded; the Observer decodes it with this.
			ContentEncoding: r.Header.Get("Content-Encoding"),
		},
	}
	x.resp.ExchangeID = x.req.ExchangeID

	if r.Method == http.MethodConnect {
		// cctrace forwards to its one upstream and is nobody's forward proxy: there is nothing
		// to tunnel to. Not an API exchange, so the Observer does not hear of it.
		writeAPIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "cctrace: CONNECT is not supported: cctrace is a reverse proxy for "+p.upstream.Redacted())
		return
	}
	if limit := p.cfg.maxBody; limit > 0 && r.ContentLength > limit {
		p.rejectTooLarge(w, r, x, fmt.Sprintf("request body of %d bytes", r.ContentLength))
		x.resp.End = p.cfg.now()
		p.obs.ResponseDone(&x.resp, nil)
		return
	}

	if p.cfg.gate != nil && x.req.Endpoint == wire.EndpointMessages && p.cfg.gate.Hold(x.req) {
		if p.gateRequest(w, r, x) {
			return
		}
	}

	r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x))
	// ReverseProxy sends no body when ContentLength is 0, so there is nothing to tap then.
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		x.reqTap = newRequestTap(r.Body, r.ContentLength, p.cfg.parseLimit, p.cfg.maxBody, &p.copies, x.requestRead)
		r.Body = x.reqTap
	}
	// A proxy reads the request body while it writes the response. Without full duplex Go's
	// HTTP/1 server closes the request body when the response headers go out, and a transport
	// still reading it (its final read after Content-Length bytes, or an upstream that answers
	// before the whole body arrived) fails and cuts the upstream connection mid-stream. The
	// request tap already avoids the first case; this covers the rest. HTTP/2 is always full
	// duplex and answers ErrNotSupported, which is fine.
	_ = http.NewResponseController(w).EnableFullDuplex()
	tw := newResponseTap(w, x)
	// ReverseProxy panics with http.ErrAbortHandler when a body copy fails after the headers
	// went out; the deferred call still reports the exchange, and the panic goes on to the server.
	defer x.responseDone(r.Context(), tw)
	p.rp.ServeHTTP(tw, r)
}

// identify returns who sent a request with header h.
func (p *Proxy) identify(h http.Header) wire.Identity {
	if p.cfg.identify == nil {
		return wire.Identity{}
	}
	return p.cfg.identify(h)
}

// rejectTooLarge answers a request whose body is over the maximum request size with the 413 the
// Messages API gives in that case, and reports the exchange as such. what describes the body.
func (p *Proxy) rejectTooLarge(w http.ResponseWriter, r *http.Request, x *exchange, what string) {
	msg := fmt.Sprintf("cctrace: %s is over the limit of %d bytes (--max-request-body)", what, p.cfg.maxBody)
	p.cfg.logger.Warn("request body too large: not forwarded",
		"exchange", x.req.ExchangeID, "method", r.Method, "path", r.URL.Path, "content_length", r.ContentLength, "limit", p.cfg.maxBody)
	if x.reqTap == nil {
		x.req.ParseError = msg
	}
	x.requestRead()
	x.tooLarge = true
	n := writeAPIError(w, http.StatusRequestEntityTooLarge, "request_too_large", msg)
	x.resp.Status = http.StatusRequestEntityTooLarge
	x.resp.HeaderTime = p.cfg.now()
	x.resp.ContentType = "application/json"
	x.resp.BodySize = int64(n)
	x.resp.ErrorType = "request_too_large"
	x.resp.ErrorMessage = msg
}

// rewrite points the outbound request at the upstream. X-Forwarded-* are left off on purpose:
// cctrace is the client's own local proxy, not a gateway the upstream should know about.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	for _, h := range p.cfg.private {
		pr.Out.Header.Del(h)
	}
	if p.cfg.route != nil {
		if u := p.cfg.route(pr.In.URL.Path); u != nil {
			pr.SetURL(u)
			return
		}
	}
	pr.SetURL(p.upstream)
}

// modifyResponse records the response headers and installs the response body tap.
func (p *Proxy) modifyResponse(res *http.Response) error {
	x := exchangeFrom(res.Request.Context())
	if x == nil {
		return nil
	}
	x.requestRead()
	x.resp.Status = res.StatusCode
	x.resp.HeaderTime = p.cfg.now()
	x.resp.RequestID = res.Header.Get("Request-Id")
	x.resp.ContentType = res.Header.Get("Content-Type")
	x.resp.ContentEncoding = res.Header.Get("Content-Encoding")
	x.resp.RateLimitHeader = wire.RateLimitHeader(res.Header)
	x.resp.Streamed = wire.IsEventStream(x.resp.ContentType)
	if res.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy needs the upgraded body as it is (an io.ReadWriteCloser).
		return nil
	}
	x.respCopy = newBoundedCopy(p.cfg.parseLimit, res.ContentLength, &p.copies)
	res.Body = &responseBody{ReadCloser: res.Body, x: x, length: res.ContentLength}
	return nil
}

// handleError is ReverseProxy's ErrorHandler: the upstream could not be reached, or the
// round trip failed before any response header arrived. The exchange is then reported with
// Status 0 (no upstream response) and Err set, while the client gets a 502 with an Anthropic-style
// JSON error, unless something was already written to it.
func (p *Proxy) handleError(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeFrom(r.Context())
	if x != nil && x.reqTap != nil && x.reqTap.overLimit() {
		// The body passed the size limit while it was being sent: the upstream request was
		// dropped on purpose.
		if w, ok := errorWriter(w); ok {
			p.rejectTooLarge(w, r, x, "request body")
		}
		return
	}
	if x != nil {
		x.transportErr = err
		if x.reqTap != nil && r.Context().Err() == nil {
			// The client is still there and has sent (or is sending) its body: read it, so the
			// Observer learns what the failed request was.
			x.reqTap.drain()
		}
		x.requestRead()
	}
	var id uint64
	if x != nil {
		id = x.req.ExchangeID
	}
	if r.Context().Err() != nil {
		p.cfg.logger.Debug("client went away before the upstream answered",
			"exchange", id, "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		p.cfg.logger.Warn("upstream unreachable",
			"exchange", id, "method", r.Method, "path", r.URL.Path, "upstream", p.upstream.Redacted(), "err", err)
	}
	if w, ok := errorWriter(w); ok {
		writeAPIError(w, http.StatusBadGateway, "proxy_error", "cctrace: upstream unreachable: "+err.Error())
	}
}

// errorWriter returns the writer the proxy answers an error of its own on: the client's, past
// the tap, which counts only what the upstream sent. It reports false when an answer has begun
// (its headers are out), and nothing more can be said.
func errorWriter(w http.ResponseWriter) (http.ResponseWriter, bool) {
	tw, ok := w.(*responseTap)
	if !ok {
		return w, true
	}
	if tw.wroteHeader {
		return nil, false
	}
	tw.wroteHeader = true
	return tw.ResponseWriter, true
}

// writeAPIError answers with an Anthropic-style JSON error and returns the body's length.
func writeAPIError(w http.ResponseWriter, status int, errType, msg string) int {
	body, _ := json.Marshal(proxyError{
		Type:  "error",
		Error: proxyErrorDetail{Type: errType, Message: msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return len(body)
}

// proxyError is the body of the proxy's own 502, shaped like an Anthropic API error so that
// clients report it sensibly.
type proxyError struct {
	Type  string           `json:"type"`
	Error proxyErrorDetail `json:"error"`
}

type proxyErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// exchange is one request and its response as they pass through the proxy.
//
// The response fields are only touched on the handler's goroutine: ReverseProxy calls
// ModifyResponse, ErrorHandler and the ResponseWriter from it. The request side may finish on
// the transport's goroutine, which is why it goes through reqOnce.
type exchange struct {
	p *Proxy

	req     *wire.Request
	reqTap  *requestTap // nil when the request had no body
	reqOnce sync.Once

	resp         wire.Response
	respCopy     *boundedCopy // nil for an upgraded connection
	transportErr error        // the round trip failed
	tooLarge     bool         // answered 413 by the proxy itself: resp is filled already
	readErr      error        // reading the upstream body failed
	bodyEnded    bool         // the upstream body was read to its end
}

// requestRead hands the request to the Observer, once.
func (x *exchange) requestRead() {
	x.reqOnce.Do(func() {
		var body []byte
		if x.reqTap != nil {
			body, x.req.BodySize, x.req.ParseError = x.reqTap.finish()
		}
		x.p.obs.RequestRead(x.req, body)
	})
}

// responseDone completes the response and hands it to the Observer. ctx is the client
// request's context.
func (x *exchange) responseDone(ctx context.Context, tw *responseTap) {
	resp := &x.resp
	resp.End = x.p.cfg.now()
	// The client went away if its context ended before it had the whole answer. One that had
	// every byte (the upstream body read to its end, each write and flush to it fine) may close
	// its connection before the handler returns, which ends the context too: a Content-Length
	// answer is over for the client at its last byte. That answer was delivered, not cut.
	gone := ctx.Err() != nil && !(x.bodyEnded && tw.writeErr == nil)
	x.requestRead()
	if x.tooLarge {
		x.p.obs.ResponseDone(resp, nil)
		return
	}
	resp.BodySize = tw.written
	switch {
	case gone:
		resp.Canceled = true
		resp.Err = "client went away: " + context.Cause(ctx).Error()
	case x.transportErr != nil:
		resp.Err = "upstream: " + x.transportErr.Error()
	case x.readErr != nil:
		resp.Err = "upstream: " + x.readErr.Error()
	case tw.writeErr != nil:
		resp.Canceled = true
		resp.Err = "client went away: " + tw.writeErr.Error()
	}
	var body []byte
	if c := x.respCopy; c != nil {
		b, err := c.take()
		x.respCopy = nil // the Observer owns the copy now
		switch {
		case errors.Is(err, errOverParseLimit):
			resp.ParseError = fmt.Sprintf("response body over the parse limit of %d bytes (%d bytes forwarded)",
				x.p.cfg.parseLimit, resp.BodySize)
		case err != nil:
			resp.ParseError = err.Error()
		default:
			body, resp.Chunks = b, c.chunks
		}
	}
	x.p.obs.ResponseDone(resp, body)
}

// bufferPool lends ReverseProxy its 32 KiB copy buffers, so that a long session does not
// allocate one per response.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
