package metrics

import (
	"slices"
	"strings"
	"testing"
)

// TestGenAILatest: with the latest experimental GenAI conventions asked for, the GenAI metrics
// are the inference duration, the token counters by kind and the per-operation token
// histograms, and v1.41.0's two are gone; the counters add up to the answers' usage.
func TestGenAILatest(t *testing.T) {
	families := func(opts ...Option) map[string]float64 {
		m, reg := newMetrics(t, opts...)
		feed(m, scenario()...)
		out := map[string]float64{}
		for _, mf := range mustGather(t, reg) {
			if !strings.HasPrefix(mf.GetName(), "gen_ai_") {
				continue
			}
			for _, s := range mf.GetMetric() {
				out[mf.GetName()] += s.GetCounter().GetValue() + s.GetHistogram().GetSampleSum()
			}
		}
		return out
	}
	old, now := families(), families(WithGenAILatest())
	names := func(m map[string]float64) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if want := []string{nameGenAIOperationDuration, nameGenAITokenUsage}; !slices.Equal(names(old), want) {
		t.Errorf("default GenAI families %v, want %v", names(old), want)
	}
	want := []string{
		"gen_ai_client_inference_duration_seconds",
		"gen_ai_client_inference_operation_input_tokens",
		"gen_ai_client_inference_operation_output_tokens",
		"gen_ai_client_inference_usage_cache_read_input_tokens_total",
		"gen_ai_client_inference_usage_cache_write_input_tokens_total",
		"gen_ai_client_inference_usage_input_tokens_total",
		"gen_ai_client_inference_usage_output_tokens_total",
	}
	if !slices.Equal(names(now), want) {
		t.Fatalf("latest GenAI families %v, want %v", names(now), want)
	}
	// The scenario's answers: input 20010 + 3000 + 20305 + 50000 + 8000 + 100, output 200 +
	// 500 + 100 + 2000 + 300 + 10, cache reads 20000, cache writes 20000 + 300.
	for name, v := range map[string]float64{
		"gen_ai_client_inference_usage_input_tokens_total":             101415,
		"gen_ai_client_inference_operation_input_tokens":               101415,
		"gen_ai_client_inference_usage_output_tokens_total":            3110,
		"gen_ai_client_inference_usage_cache_read_input_tokens_total":  20000,
		"gen_ai_client_inference_usage_cache_write_input_tokens_total": 20300,
	} {
		if now[name] != v {
			t.Errorf("%s = %v, want %v", name, now[name], v)
		}
	}
	if now["gen_ai_client_inference_duration_seconds"] != old[nameGenAIOperationDuration] {
		t.Errorf("inference duration %v, v1.41.0's operation duration %v", now["gen_ai_client_inference_duration_seconds"], old[nameGenAIOperationDuration])
	}
}
