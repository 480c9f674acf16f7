package tracing

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestChatSpanContext replays a recorded session with a /compact: every answered chat span
// carries its input by part, adding up to gen_ai.usage.input_tokens, and its cache breakpoints;
// the request after the compaction says the cache missed because of it.
func TestChatSpanContext(t *testing.T) {
	ended := replaySpans(t, "compaction")
	chats, misses := 0, 0
	for _, s := range ended {
		if !strings.HasPrefix(s.Name(), "chat ") {
			continue
		}
		chats++
		got := attrMap(s)
		parts, tokens := got[keyContextParts].AsStringSlice(), got[keyContextPartTokens].AsInt64Slice()
		if len(parts) == 0 || len(parts) != len(tokens) || len(got[keyContextPartBytes].AsInt64Slice()) != len(parts) {
			t.Fatalf("%s: parts %v, tokens %v", s.Name(), parts, tokens)
		}
		sum := int64(0)
		for _, n := range tokens {
			sum += n
		}
		if want := got[semconv.GenAIUsageInputTokensKey].AsInt64(); sum != want {
			t.Errorf("parts add up to %d tokens, gen_ai.usage.input_tokens is %d", sum, want)
		}
		if bps := got[keyCacheBreakpoints].AsStringSlice(); len(bps) != 3 || bps[0] != "system[1]" {
			t.Errorf("breakpoints %v, want Claude Code's three", bps)
		}
		if cause, ok := got[keyCacheMissCause]; ok {
			misses++
			if cause != attribute.StringValue("compaction") || got[keyCacheMissTokens].AsInt64() <= 0 {
				t.Errorf("cache miss %v of %d tokens, want compaction", cause.String(), got[keyCacheMissTokens].AsInt64())
			}
		}
	}
	if chats != 4 || misses != 1 {
		t.Errorf("%d chat spans, %d cache misses; want the recording's 4 and 1", chats, misses)
	}
}
