package tracing

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

func TestSinkRateLimits(t *testing.T) {
	steps := turnSteps()
	for i, st := range steps {
		if st.span.ID != sid(2) || st.started {
			continue
		}
		prev := st.finish
		steps[i].finish = func(s *instrument.Span) {
			prev(s)
			s.Chat.Request.Identity.Account = "acct-0123456789abcdef"
			s.Chat.Response.RateLimit = wire.ParseRateLimit(http.Header{
				"Anthropic-Ratelimit-Unified-Status":               {"allowed"},
				"Anthropic-Ratelimit-Unified-Representative-Claim": {"five_hour"},
				"Anthropic-Ratelimit-Unified-5h-Utilization":       {"0.42"},
				"Anthropic-Ratelimit-Unified-5h-Reset":             {"1796414400"},
				"Anthropic-Ratelimit-Unified-5h-Status":            {"allowed"},
				"Anthropic-Ratelimit-Tokens-Remaining":             {"100"},
				"Retry-After":                                      {"2"},
			})
		}
	}
	got := record(t, steps)
	chat := attrMap(got[sid(2)])
	for key, want := range map[string]any{
		"cctrace.ratelimit.account":               "acct-0123456789abcdef",
		"cctrace.ratelimit.status":                "allowed",
		"cctrace.ratelimit.representative_window": "five_hour",
		"cctrace.ratelimit.5h.utilization":        0.42,
		"cctrace.ratelimit.5h.reset":              int64(1796414400),
		"cctrace.ratelimit.5h.status":             "allowed",
		"cctrace.ratelimit.tokens.remaining":      int64(100),
		"cctrace.ratelimit.retry_after_seconds":   2.0,
	} {
		if key == "cctrace.ratelimit.representative_window" {
			want = "5h"
		}
		v, ok := chat[attribute.Key(key)]
		if !ok || v.AsInterface() != want {
			t.Errorf("%s = %v (%v), want %v", key, v.AsInterface(), ok, want)
		}
	}
	if _, ok := chat["cctrace.upstream.refusal"]; ok {
		t.Error("an answered request carries a refusal")
	}
	if v := attrMap(got[sid(6)])["cctrace.upstream.refusal"].AsString(); v != wire.RefusalOverloaded {
		t.Errorf("the 529's refusal = %q, want %q", v, wire.RefusalOverloaded)
	}
	if _, ok := attrMap(got[sid(6)])["cctrace.ratelimit.status"]; ok {
		t.Error("a response without rate-limit headers carries a status")
	}
}
