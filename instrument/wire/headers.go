package wire

import (
	"net/http"
	"strconv"
	"strings"
)

// ParseHeaders reads the Claude Code headers cctrace uses. Only the named headers are looked
// up, so credentials (x-api-key, Authorization, Cookie) are never read, let alone copied.
func ParseHeaders(h http.Header) Headers {
	out := Headers{
		SessionID:        headerValue(h, "X-Claude-Code-Session-Id"),
		AgentID:          headerValue(h, "X-Claude-Code-Agent-Id"),
		ParentAgentID:    headerValue(h, "X-Claude-Code-Parent-Agent-Id"),
		ClientRequestID:  headerValue(h, "X-Client-Request-Id"),
		UserAgent:        headerValue(h, "User-Agent"),
		AnthropicVersion: headerValue(h, "Anthropic-Version"),
		Traceparent:      headerValue(h, "Traceparent"),
	}
	for _, line := range headerValues(h, "Anthropic-Beta") {
		for beta := range strings.SplitSeq(line, ",") {
			if beta = strings.TrimSpace(beta); beta != "" {
				out.Beta = append(out.Beta, beta)
			}
		}
	}
	if n, err := strconv.Atoi(headerValue(h, "X-Stainless-Retry-Count")); err == nil && n > 0 {
		out.RetryCount = n
	}
	return out
}

// headerValue returns the first value of a header, trimmed. name must be in canonical form.
func headerValue(h http.Header, name string) string {
	if v := headerValues(h, name); len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// headerValues finds a header by its canonical name and, failing that, by a case-insensitive
// match, for header maps built by hand rather than by net/http.
func headerValues(h http.Header, name string) []string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}
