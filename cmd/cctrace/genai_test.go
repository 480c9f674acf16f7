package main

import "testing"

func TestGenAILatest(t *testing.T) {
	for v, want := range map[string]bool{
		"":                                    false,
		"gen_ai_latest_experimental":          true,
		"http, gen_ai_latest_experimental":    true,
		"http/dup,gen_ai_latest_experimental": true,
		"gen_ai_latest":                       false,
		"http":                                false,
	} {
		if got := genAILatest(func(string) string { return v }); got != want {
			t.Errorf("OTEL_SEMCONV_STABILITY_OPT_IN=%q: %v, want %v", v, got, want)
		}
	}
}
