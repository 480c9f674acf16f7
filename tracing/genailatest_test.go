package tracing

import (
	"strings"
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// TestGenAILatest: with the latest experimental GenAI conventions asked for, chat spans carry
// the cache writes they carried as gen_ai.usage.cache_creation.input_tokens as
// gen_ai.usage.cache_write.input_tokens, and invoke_agent spans carry no cache counts; the
// default keeps v1.41.0's names.
func TestGenAILatest(t *testing.T) {
	before := record(t, turnSteps())
	after := record(t, turnSteps(), WithGenAILatest())
	checked := 0
	for id, s := range before {
		old, now := attrMap(s), attrMap(after[id])
		written, ok := old[semconv.GenAIUsageCacheCreationInputTokensKey]
		if !ok {
			continue
		}
		_, creation := now[semconv.GenAIUsageCacheCreationInputTokensKey]
		write, isWritten := now[keyUsageCacheWrite]
		_, read := now[semconv.GenAIUsageCacheReadInputTokensKey]
		if strings.HasPrefix(s.Name(), "chat ") {
			checked++
			if creation || !isWritten || write != written || !read {
				t.Errorf("%s: cache_creation %v, cache_write %v (want %v), cache_read %v", s.Name(), creation, write, written, read)
			}
		} else if creation || isWritten || read {
			t.Errorf("%s: an agent span carries cache counts under the latest names", s.Name())
		}
		if now[semconv.GenAIUsageInputTokensKey] != old[semconv.GenAIUsageInputTokensKey] {
			t.Errorf("%s: input tokens changed with the names", s.Name())
		}
	}
	if checked == 0 {
		t.Fatal("no chat span with usage")
	}
}
