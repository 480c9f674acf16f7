package proxy

import "github.com/cctrace/cctrace/instrument/wire"

// Observer receives what the proxy saw of each exchange. Both calls happen on forwarding
// goroutines, so an Observer must return at once (hand off to a channel, never block or parse).
//
// For every exchange, RequestRead is called exactly once, then ResponseDone exactly once.
//
// The body copies are the Observer's. When the proxy has a pool of buffers (WithBodyBuffers), an
// Observer that is done with a body (and keeps no reference into it) may give it back to that
// pool, once, so that a later exchange's copy does not allocate.
type Observer interface {
	// RequestRead is called when the request body has been read to its end (or abandoned, or was
	// found to be over the parse limit). req.Body is nil: decoding is the observer's job, off the
	// forwarding path. body is a copy of the request body as it arrived (still content-encoded as
	// the client sent it); nil when there was none, or it exceeded the parse limit or did not
	// fit the copy budget (then req.ParseError says so). The observer owns req and body.
	RequestRead(req *wire.Request, body []byte)
	// ResponseDone is called once the response body ended, failed, or the client went away.
	// body is a copy of the response body as forwarded (still content-encoded as the upstream
	// sent it; nil when there was none, or it exceeded the parse limit or did not fit the copy
	// budget, and then resp.ParseError says so); for an event stream resp.Chunks says when each
	// part of it reached the client. Decoding is the observer's job (wire.DecodeResponse), off
	// the forwarding path. The observer owns resp and body.
	ResponseDone(resp *wire.Response, body []byte)
}
