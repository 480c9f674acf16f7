package wire

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want Headers
	}{
		{
			name: "main chain request",
			h: http.Header{
				"X-Claude-Code-Session-Id": {"0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10"},
				"X-Client-Request-Id":      {"b1a2c3d4-0000-4000-8000-000000000001"},
				"User-Agent":               {"claude-cli/2.1.328 (external, cli)"},
				"Anthropic-Version":        {"2023-06-01"},
				"Anthropic-Beta":           {"claude-code-20250219, interleaved-thinking-2025-05-14,,context-management-2025-06-27 ", "oauth-2025-04-20"},
				"X-Stainless-Retry-Count":  {"2"},
				"X-Api-Key":                {"sk-ant-api03-secret"},
				"Authorization":            {"Bearer sk-ant-oat01-secret"},
				"Cookie":                   {"session=secret"},
			},
			want: Headers{
				SessionID:        "0d8c6a52-5e4b-4f3a-9e21-6c3b8a1f2d10",
				ClientRequestID:  "b1a2c3d4-0000-4000-8000-000000000001",
				UserAgent:        "claude-cli/2.1.328 (external, cli)",
				AnthropicVersion: "2023-06-01",
				Beta:             []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27", "oauth-2025-04-20"},
				RetryCount:       2,
			},
		},
		{
			name: "subagent request with hand-built lower-case keys",
			h: http.Header{
				"x-claude-code-session-id":      {"s1"},
				"x-claude-code-agent-id":        {"a3f9c1d27b8e4c05"},
				"x-claude-code-parent-agent-id": {"parent01"},
				"traceparent":                   {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
				"x-stainless-retry-count":       {"not a number"},
			},
			want: Headers{
				SessionID:     "s1",
				AgentID:       "a3f9c1d27b8e4c05",
				ParentAgentID: "parent01",
				Traceparent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			},
		},
		{
			name: "negative retry count",
			h:    http.Header{"X-Stainless-Retry-Count": {"-1"}},
			want: Headers{},
		},
		{name: "none", h: http.Header{}, want: Headers{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseHeaders(tt.h)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseHeaders = %+v, want %+v", got, tt.want)
			}
			if s := strings.ToLower(strings.Join(append(got.Beta, got.SessionID, got.AgentID, got.UserAgent), " ")); strings.Contains(s, "secret") {
				t.Errorf("a credential leaked into %+v", got)
			}
		})
	}
}

// TestClassifyRouteAnthropicPaths checks the Anthropic API's paths, with the forms a gateway or
// a client may give them.
func TestClassifyRouteAnthropicPaths(t *testing.T) {
	tests := []struct {
		method, path string
		want         Endpoint
	}{
		{"POST", "/v1/messages", EndpointMessages},
		{"POST", "/v1/messages/", EndpointMessages},
		{"POST", "/v1/messages?beta=true", EndpointMessages},
		{"POST", "/anthropic/v1/messages", EndpointMessages},
		{"POST", "/v1/messages/count_tokens", EndpointCountTokens},
		{"POST", "/gw/team-a/v1/messages/count_tokens/", EndpointCountTokens},
		{"GET", "/v1/messages", EndpointOther},
		{"POST", "/v1/messages/batches", EndpointOther},
		{"POST", "/v1/complete", EndpointOther},
		{"POST", "/v2/messages", EndpointOther},
		{"POST", "/xv1/messages", EndpointOther},
		{"HEAD", "/", EndpointOther},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := ClassifyRoute(tt.method, tt.path).Endpoint; got != tt.want {
				t.Errorf("ClassifyRoute(…).Endpoint = %v, want %v", got, tt.want)
			}
		})
	}
}
