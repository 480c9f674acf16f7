package wire

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// subscriptionHeaders are a subscription (OAuth) account's limits as the API reports them on
// every response (docs/wire.md, "Rate limits").
func subscriptionHeaders() http.Header {
	return http.Header{
		"Anthropic-Ratelimit-Unified-Status":                {"allowed_warning"},
		"Anthropic-Ratelimit-Unified-Representative-Claim":  {"five_hour"},
		"Anthropic-Ratelimit-Unified-5h-Utilization":        {"0.42"},
		"Anthropic-Ratelimit-Unified-5h-Reset":              {"1796414400"},
		"Anthropic-Ratelimit-Unified-5h-Status":             {"allowed"},
		"Anthropic-Ratelimit-Unified-7d-Utilization":        {"0.81"},
		"Anthropic-Ratelimit-Unified-7d-Reset":              {"1796846400"},
		"Anthropic-Ratelimit-Unified-7d-Status":             {"allowed_warning"},
		"Anthropic-Ratelimit-Unified-7d-Sonnet-Utilization": {"0.05"},
		"Anthropic-Ratelimit-Unified-Overage-Status":        {"rejected"},
		"Anthropic-Ratelimit-Unified-Overage-Reset":         {"1796846400"},
		"Anthropic-Ratelimit-Unified-Overage-In-Use":        {"false"},
		"Anthropic-Ratelimit-Unified-Fallback-Percentage":   {"0.5"},
		"Request-Id":   {"req_011"},
		"Content-Type": {"text/event-stream"},
	}
}

func TestRateLimitHeader(t *testing.T) {
	h := subscriptionHeaders()
	h["retry-after"] = []string{"7"} // built by hand: not canonical
	got := RateLimitHeader(h)
	if len(got) != len(h)-2 {
		t.Errorf("kept %d headers, want %d: %v", len(got), len(h)-2, got)
	}
	for _, k := range []string{"Request-Id", "Content-Type"} {
		if _, ok := got[k]; ok {
			t.Errorf("kept %s", k)
		}
	}
	if got.Get("Retry-After") != "7" {
		t.Errorf("retry-after not kept under its canonical name: %v", got)
	}
	if RateLimitHeader(http.Header{"Content-Type": {"application/json"}}) != nil {
		t.Error("a response without rate-limit headers gave a header map")
	}
}

func TestParseRateLimit(t *testing.T) {
	reset5h, reset7d := time.Unix(1796414400, 0).UTC(), time.Unix(1796846400, 0).UTC()
	keyReset := time.Date(2026, 12, 4, 10, 0, 1, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want *RateLimit
	}{
		{
			name: "subscription",
			h:    subscriptionHeaders(),
			want: &RateLimit{
				Status:         "allowed_warning",
				Representative: "five_hour",
				Windows: []LimitWindow{
					{Name: "5h", Utilization: 0.42, HasUtilization: true, Reset: reset5h, Status: "allowed"},
					{Name: "7d", Utilization: 0.81, HasUtilization: true, Reset: reset7d, Status: "allowed_warning"},
					{Name: "7d-sonnet", Utilization: 0.05, HasUtilization: true},
				},
				Overage: Overage{Status: "rejected", Reset: reset7d},
			},
		},
		{
			name: "API key, refused",
			h: http.Header{
				"Anthropic-Ratelimit-Requests-Limit":          {"50"},
				"Anthropic-Ratelimit-Requests-Remaining":      {"0"},
				"Anthropic-Ratelimit-Requests-Reset":          {"2026-12-04T10:00:01Z"},
				"Anthropic-Ratelimit-Tokens-Limit":            {"40000"},
				"Anthropic-Ratelimit-Tokens-Remaining":        {"39000"},
				"Anthropic-Ratelimit-Input-Tokens-Limit":      {"30000"},
				"Anthropic-Ratelimit-Input-Tokens-Remaining":  {"29500"},
				"Anthropic-Ratelimit-Input-Tokens-Reset":      {"2026-12-04T10:00:01Z"},
				"Anthropic-Ratelimit-Output-Tokens-Limit":     {"8000"},
				"Anthropic-Ratelimit-Output-Tokens-Remaining": {"not a number"},
				"Anthropic-Ratelimit-Output-Tokens-Something": {"1"},
				"Retry-After": {"12"},
			},
			want: &RateLimit{
				Kinds: []KindLimit{
					{Kind: "input-tokens", Limit: 30000, Remaining: 29500, Reset: keyReset},
					{Kind: "output-tokens", Limit: 8000, Remaining: -1},
					{Kind: "requests", Limit: 50, Remaining: 0, Reset: keyReset},
					{Kind: "tokens", Limit: 40000, Remaining: 39000},
				},
				RetryAfter: 12 * time.Second,
			},
		},
		{
			name: "hostile values",
			h: http.Header{
				"Anthropic-Ratelimit-Unified-Status":         {"Allowed\x00<b>"},
				"Anthropic-Ratelimit-Unified-5h-Utilization": {"NaN"},
				"Anthropic-Ratelimit-Unified-5h-Reset":       {"tomorrow"},
				"Anthropic-Ratelimit-Unified--Utilization":   {"0.3"},
			},
			want: &RateLimit{Status: "allowedb"},
		},
		{name: "none", h: nil, want: nil},
		{name: "nothing that parses", h: http.Header{"Retry-After": {"soon"}}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseRateLimit(RateLimitHeader(tc.h))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseRateLimit =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseRateLimitBoundsWindows(t *testing.T) {
	h := http.Header{}
	for i := range 100 {
		h.Set("Anthropic-Ratelimit-Unified-W"+string(rune('a'+i%26))+string(rune('a'+i/26))+"-Utilization", "0.1")
	}
	if got := ParseRateLimit(h); len(got.Windows) != maxLimitWindows {
		t.Errorf("kept %d windows, want %d", len(got.Windows), maxLimitWindows)
	}
}

func TestRepresentativeWindow(t *testing.T) {
	windows := []LimitWindow{
		{Name: "5h", Utilization: 0.2, HasUtilization: true},
		{Name: "7d", Utilization: 0.7, HasUtilization: true},
		{Name: "7d_opus", Utilization: 0.1, HasUtilization: true},
	}
	for _, tc := range []struct {
		claim, want string
		ok          bool
	}{
		{"five_hour", "5h", true},
		{"seven_day", "7d", true},
		{"seven_day_opus", "7d_opus", true},
		{"7d", "7d", true},
		{"", "7d", true},
		{"a_window_of_a_later_api", "7d", true},
	} {
		r := &RateLimit{Representative: tc.claim, Windows: windows}
		w, ok := r.RepresentativeWindow()
		if ok != tc.ok || w.Name != tc.want {
			t.Errorf("claim %q: window %q %v, want %q %v", tc.claim, w.Name, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (&RateLimit{Representative: "five_hour"}).RepresentativeWindow(); ok {
		t.Error("a claim without windows found one")
	}
}

func TestDecodeRateLimit(t *testing.T) {
	resp := &Response{RateLimitHeader: RateLimitHeader(subscriptionHeaders())}
	DecodeRateLimit(resp)
	if resp.RateLimit == nil || resp.RateLimit.Status != "allowed_warning" {
		t.Errorf("RateLimit = %+v", resp.RateLimit)
	}
	DecodeRateLimit(nil)
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		resp *Response
		want string
	}{
		{&Response{Status: 429, ErrorType: "rate_limit_error"}, RefusalRateLimit},
		{&Response{Status: 429}, RefusalRateLimit},
		{&Response{Status: 529, ErrorType: "overloaded_error"}, RefusalOverloaded},
		{&Response{Status: 200, ErrorType: "overloaded_error"}, RefusalOverloaded},
		{&Response{Status: 529}, RefusalOverloaded},
		{&Response{Status: 500, ErrorType: "api_error"}, ""},
		{&Response{Status: 200}, ""},
		{nil, ""},
	} {
		if got := Refusal(tc.resp); got != tc.want {
			t.Errorf("Refusal(%+v) = %q, want %q", tc.resp, got, tc.want)
		}
	}
}
