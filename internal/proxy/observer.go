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
	// For event streams that were not content-encoded, resp.Message and the other decoded fields
	// are already filled (decoded inline, after each chunk was flushed) and body is nil. For
	// everything else body is a copy of the response body as sent (still content-encoded; nil
	// when over the parse limit or the copy budget, and resp.ParseError says so), to be decoded
	// by the observer. The observer owns resp and body.
	ResponseDone(resp *wire.Response, body []byte)
}
