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

// The entry points below are implemented in headers.go, body.go, bodycache.go, response.go and
// provider.go:
//
//	// ParseHeaders reads the Claude Code headers cctrace uses; credentials are never read.
//	func ParseHeaders(h http.Header) Headers
//	// ClassifyRoute maps a method and URL path to an Endpoint, the Anthropic API's and the
//	// Vertex AI and Bedrock paths, with the model and streaming those carry.
//	func ClassifyRoute(method, path string) Route
//	// ParseBody decodes a Messages API (or count_tokens) request body. contentEncoding is the
//	// request's Content-Encoding ("" for identity); gzip, deflate, br and zstd are decoded.
//	func ParseBody(body []byte, contentEncoding string) (*Body, error)
//	// BodyCache.DecodeRequest decodes a request's body as ParseBody does, from where it stops
//	// repeating the previous body of its conversation.
//	func (c *BodyCache) DecodeRequest(req *Request, body []byte) error
//	// DecodeResponse decodes a response body as forwarded: a JSON message, a count_tokens
//	// answer, a JSON error, or an event stream (SSE, or Bedrock's AWS event stream), whose
//	// events it times by resp.Chunks.
//	func DecodeResponse(resp *Response, endpoint Endpoint, body []byte)
