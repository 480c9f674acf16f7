package wire

// This file states the decoder entry points. Their bodies live in headers.go, body.go,
// response.go, provider.go and eventstream.go.

// HashText hashes text for equality checks across requests (FNV-1a, 64 bits).
// It is what Body.FirstHumanTextHash and AgentCall.PromptHash use.
func HashText(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// The entry points below are implemented in headers.go, body.go, response.go, provider.go and
// eventstream.go:
//
//	// ParseHeaders reads the Claude Code headers cctrace uses; credentials are never read.
//	func ParseHeaders(h http.Header) Headers
//	// ClassifyPath maps a method and URL path to an Endpoint.
//	func ClassifyPath(method, path string) Endpoint
//	// ClassifyRoute also classifies Vertex AI's and Bedrock's paths, and names the model and
//	// streaming they carry (provider.go).
//	func ClassifyRoute(method, path string) Route
//	// ParseBody decodes a Messages API (or count_tokens) request body. contentEncoding is the
//	// request's Content-Encoding ("" for identity); gzip, deflate, br and zstd are decoded.
//	func ParseBody(body []byte, contentEncoding string) (*Body, error)
//
//	// StreamDecoder decodes an SSE response incrementally, chunk by chunk as forwarded.
//	type StreamDecoder struct{ … }
//	func NewStreamDecoder() *StreamDecoder
//	// NewEventStreamDecoder decodes Bedrock's AWS event-stream frames the same way
//	// (eventstream.go).
//	func NewEventStreamDecoder() *StreamDecoder
//	// Write feeds the next chunk, received at now. It never fails; bad events are skipped and
//	// remembered for Finish.
//	func (d *StreamDecoder) Write(p []byte, now time.Time)
//	// Finish fills resp.Message, FirstChunk, ErrorType, ErrorMessage, Incomplete and
//	// ParseError from what was seen.
//	func (d *StreamDecoder) Finish(resp *Response)
//
//	// DecodeResponse decodes a complete non-streamed (or content-encoded) response body, per
//	// resp.ContentType, resp.ContentEncoding and the endpoint: a JSON message, a count_tokens
//	// answer, a JSON error, or an event stream decoded at once (all events at resp.End).
//	func DecodeResponse(resp *Response, endpoint Endpoint, body []byte)
