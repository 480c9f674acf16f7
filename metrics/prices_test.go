package metrics

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

func TestDefaultPrices(t *testing.T) {
	p, err := ParsePrices(pricesJSON)
	if err != nil {
		t.Fatalf("embedded prices.json: %v", err)
	}
	if p.Version != "2026-12-06" || !strings.Contains(p.Source, "platform.claude.com") {
		t.Errorf("version %q, source %q: want the dated table citing Anthropic's pricing page", p.Version, p.Source)
	}
	if DefaultPrices() == nil {
		t.Fatal("DefaultPrices() = nil")
	}
	// Every id of the built-in table is already in family form, so that dated and prefixed ids of
	// each model reach it.
	for _, m := range p.models {
		for _, id := range m.IDs {
			if Family(id) != id {
				t.Errorf("%s: id %q is not in family form (Family = %q)", m.Name, id, Family(id))
			}
		}
	}
}

func TestFamily(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"Claude-Opus-4-6[1m]", "claude-opus-4-6"},
		{"claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5"},
		{"anthropic/claude-opus-4.5", "claude-opus-4-5"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"anthropic.claude-haiku-5-5", "claude-haiku-5-5"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"claude-3.5-sonnet", "claude-3-5-sonnet"},
		{"claude-opus-4-0", "claude-opus-4-0"},
		{" gpt-x ", "gpt-x"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Family(tc.in); got != tc.want {
				t.Errorf("Family(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// usageOf builds a usage whose cost is easy to check by hand: in, 2×out, 3×cache read, 4×5m
// writes and 5×1h writes, all in units of scale tokens.
func usageOf(scale int) wire.Usage {
	return wire.Usage{
		InputTokens:              1 * scale,
		OutputTokens:             2 * scale,
		CacheReadInputTokens:     3 * scale,
		CacheCreationInputTokens: 9 * scale,
		CacheCreation5m:          4 * scale,
		CacheCreation1h:          5 * scale,
	}
}

// TestPriceFamilies prices one request per model family. With usageOf(1000) the cost in USD is
// (input + 2·output + 3·cache_read + 4·write_5m + 5·write_1h) / 1000 for the family's rates.
func TestPriceFamilies(t *testing.T) {
	const small, large = 1000, 100000 // total input 13k and 1.3M tokens
	for _, tc := range []struct {
		family, model string
		scale         int
		want          float64 // USD
	}{
		{"fable 5.1", "claude-fable-5-1", small, (10 + 100 + 0.75 + 50 + 100) / 1000.0},
		{"mythos 5.1", "claude-mythos-5-1", small, (10 + 100 + 0.75 + 50 + 100) / 1000.0},
		{"fable 5", "claude-fable-5", small, (10 + 100 + 3 + 50 + 100) / 1000.0},
		{"mythos 5", "claude-mythos-5", small, (10 + 100 + 3 + 50 + 100) / 1000.0},
		{"opus 5.5", "claude-opus-5-5", small, (4 + 40 + 0.6 + 20 + 40) / 1000.0},
		{"opus 5", "claude-opus-5", small, (5 + 50 + 1.5 + 25 + 50) / 1000.0},
		{"opus 4.8", "claude-opus-4-8", small, (5 + 50 + 1.5 + 25 + 50) / 1000.0},
		{"opus 4.7", "claude-opus-4-7[1m]", small, (5 + 50 + 1.5 + 25 + 50) / 1000.0},
		{"opus 4.6", "claude-opus-4-6", small, (5 + 50 + 1.5 + 25 + 50) / 1000.0},
		{"opus 4.5 is a third of opus 4.1", "claude-opus-4-5-20251101", small, (5 + 50 + 1.5 + 25 + 50) / 1000.0},
		{"opus 4.1", "claude-opus-4-1-20250805", small, (15 + 150 + 4.5 + 75 + 150) / 1000.0},
		{"opus 4", "claude-opus-4-20250514", small, (15 + 150 + 4.5 + 75 + 150) / 1000.0},
		{"opus 4 alias", "claude-opus-4-0", small, (15 + 150 + 4.5 + 75 + 150) / 1000.0},
		{"opus 3", "claude-3-opus-20240229", small, (15 + 150 + 4.5 + 75 + 150) / 1000.0},
		{"sonnet 5.5", "claude-sonnet-5-5", small, (2 + 20 + 0.3 + 10 + 20) / 1000.0},
		{"sonnet 5", "claude-sonnet-5", small, (2 + 20 + 0.6 + 10 + 20) / 1000.0},
		{"sonnet 4.6", "claude-sonnet-4-6", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"sonnet 4.5", "claude-sonnet-4-5-20250929", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"sonnet 4.5 bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"sonnet 4.5 over 200k", "claude-sonnet-4-5-20250929[1m]", large, (6 + 45 + 1.8 + 30 + 60) / 10.0},
		{"sonnet 4", "claude-sonnet-4-20250514", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"sonnet 4 over 200k", "claude-sonnet-4-20250514", large, (6 + 45 + 1.8 + 30 + 60) / 10.0},
		{"sonnet 4.6 has no long-context tier", "claude-sonnet-4-6", large, (3 + 30 + 0.9 + 15 + 30) / 10.0},
		{"sonnet 3.7", "claude-3-7-sonnet-20250219", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"sonnet 3.5", "claude-3-5-sonnet-20241022", small, (3 + 30 + 0.9 + 15 + 30) / 1000.0},
		{"haiku 5.5", "claude-haiku-5-5", small, (0.1 + 1 + 0.03 + 0.5 + 1) / 1000.0},
		{"haiku 5.5 over 100k", "claude-haiku-5-5", large, (0.5 + 5 + 0.15 + 2.5 + 5) / 10.0},
		{"haiku 4.5", "claude-haiku-4-5-20251001", small, (1 + 10 + 0.3 + 5 + 10) / 1000.0},
		{"haiku 3.5", "claude-3-5-haiku-20241022", small, (0.8 + 8 + 0.24 + 4 + 8) / 1000.0},
		{"haiku 3", "claude-3-haiku-20240307", small, (0.25 + 2.5 + 0.09 + 1.2 + 2.5) / 1000.0},
	} {
		t.Run(tc.family, func(t *testing.T) {
			got, ok := DefaultPrices().Cost(tc.model, usageOf(tc.scale))
			if !ok {
				t.Fatalf("Cost(%q): unpriced", tc.model)
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Cost(%q) = %.9f, want %.9f", tc.model, got, tc.want)
			}
		})
	}
}

func TestPriceUnknownModel(t *testing.T) {
	for _, model := range []string{"claude-unknown-9", "gpt-4o", "", "claude"} {
		t.Run(model, func(t *testing.T) {
			if got, ok := DefaultPrices().Cost(model, usageOf(1000)); ok || got != 0 {
				t.Errorf("Cost(%q) = %v, %v; want 0, false", model, got, ok)
			}
		})
	}
}

func TestCacheWriteSplit(t *testing.T) {
	sonnet, ok := DefaultPrices().Lookup("claude-sonnet-4-5")
	if !ok {
		t.Fatal("claude-sonnet-4-5 unpriced")
	}
	for _, tc := range []struct {
		name string
		u    wire.Usage
		want float64 // USD; sonnet 4.5 writes cost $3.75 (5m) and $6 (1h) per million
	}{
		// 100k tokens: below the 200k long-context threshold.
		{"no split: all at the 5m rate", wire.Usage{CacheCreationInputTokens: 100000}, 0.1 * 3.75},
		{"full split", wire.Usage{CacheCreationInputTokens: 100000, CacheCreation5m: 60000, CacheCreation1h: 40000}, 0.06*3.75 + 0.04*6},
		{"only 1h", wire.Usage{CacheCreationInputTokens: 100000, CacheCreation1h: 100000}, 0.1 * 6},
		{"partial split: rest at 5m", wire.Usage{CacheCreationInputTokens: 100000, CacheCreation1h: 50000}, 0.05*3.75 + 0.05*6},
		{"long context applies to cache writes too", wire.Usage{CacheCreationInputTokens: 1000000}, 7.5},
		{"at the threshold: base rates", wire.Usage{InputTokens: 200000}, 0.2 * 3},
		{"one above: long rates", wire.Usage{InputTokens: 200001}, 0.200001 * 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sonnet.Cost(tc.u); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Cost = %.9f, want %.9f", got, tc.want)
			}
		})
	}
}

func TestExactIDWinsOverFamily(t *testing.T) {
	p, err := ParsePrices([]byte(`{"version": "test", "models": [
		{"name": "dated", "ids": ["claude-sonnet-4-5-20250929"], "input": 1, "output": 0, "cache_read": 0, "cache_write_5m": 0, "cache_write_1h": 0},
		{"name": "family", "ids": ["claude-sonnet-4-5"], "input": 2, "output": 0, "cache_read": 0, "cache_write_5m": 0, "cache_write_1h": 0}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ model, want string }{
		{"claude-sonnet-4-5-20250929", "dated"},
		{"claude-sonnet-4-5", "family"},
		{"claude-sonnet-4-5-20260101", "family"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "family"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, ok := p.Lookup(tc.model)
			if !ok || m.Name != tc.want {
				t.Errorf("Lookup(%q) = %v, %v; want %s", tc.model, m, ok, tc.want)
			}
		})
	}
}

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const rates = `"input": 1, "output": 2, "cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2`
	t.Run("valid", func(t *testing.T) {
		p, err := LoadPrices(write("ok.json", `{"version": "2030-01-01", "models": [{"ids": ["my-model"], `+rates+`}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != "2030-01-01" {
			t.Errorf("Version = %q", p.Version)
		}
		if got, ok := p.Cost("my-model-20300101", wire.Usage{InputTokens: 1000000, OutputTokens: 1000000}); !ok || got != 3 {
			t.Errorf("Cost = %v, %v; want 3, true", got, ok)
		}
		if _, ok := p.Lookup("claude-sonnet-4-5"); ok {
			t.Error("an override must replace the built-in table, not extend it")
		}
	})
	t.Run("the embedded table loads from a file", func(t *testing.T) {
		if _, err := LoadPrices("prices.json"); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"not json", `version: 1`, "parsing"},
		{"truncated", `{"version": "x", "models": [`, "parsing"},
		{"trailing data", `{"version": "x", "models": [{"ids": ["a"], ` + rates + `}]} {}`, "trailing data"},
		{"unknown field", `{"version": "x", "models": [{"ids": ["a"], "cache_reads": 1, ` + rates + `}]}`, `unknown field "cache_reads"`},
		{"string price", `{"version": "x", "models": [{"ids": ["a"], "input": "3"}]}`, "parsing"},
		{"no version", `{"models": [{"ids": ["a"], ` + rates + `}]}`, `missing "version"`},
		{"no models", `{"version": "x", "models": []}`, `no "models"`},
		{"no ids", `{"version": "x", "models": [{"name": "A", ` + rates + `}]}`, `model 0 (A): no "ids"`},
		{"empty id", `{"version": "x", "models": [{"ids": [""], ` + rates + `}]}`, "empty id"},
		{"negative", `{"version": "x", "models": [{"ids": ["a"], "input": -1}]}`, `"input" must be a non-negative number, got -1`},
		{"duplicate id", `{"version": "x", "models": [{"name": "A", "ids": ["a"]}, {"name": "B", "ids": ["a"]}]}`, `model 1 (B): id "a" already listed for A`},
		{"bad tier", `{"version": "x", "models": [{"ids": ["a"], "long_context": {"input": 1}}]}`, `long_context: "above_input_tokens" must be positive`},
		{"negative tier rate", `{"version": "x", "models": [{"ids": ["a"], "long_context": {"above_input_tokens": 5, "output": -2}}]}`, `long_context: "output" must be`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(tc.name, " ", "_")+".json", tc.body)
			_, err := LoadPrices(path)
			if err == nil {
				t.Fatalf("LoadPrices: no error, want one containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("LoadPrices error %q: want it to name %s and contain %q", err, path, tc.wantErr)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadPrices(filepath.Join(dir, "nope.json"))
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "reading price table") {
			t.Errorf("LoadPrices(missing) = %v; want a wrapped os.ErrNotExist", err)
		}
	})
}

// TestDefaultPricesCiteTheirSources: every model of the built-in table says where its rates
// were read.
func TestDefaultPricesCiteTheirSources(t *testing.T) {
	for _, m := range DefaultPrices().models {
		if !strings.Contains(m.Source, "https://platform.claude.com/") {
			t.Errorf("%s: source %q, want the page its rates were read on", m.Name, m.Source)
		}
	}
}

// TestPriceBeyondTokens prices what usage bills beside its tokens: fast mode, inference in the
// US, and web searches.
func TestPriceBeyondTokens(t *testing.T) {
	p := DefaultPrices()
	base := wire.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}
	opus := 4 + 0.1*20.0 // claude-opus-5-5: $4 input, $20 output per million
	for _, tc := range []struct {
		name  string
		model string
		edit  func(*wire.Usage)
		want  float64
		ok    bool
	}{
		{"standard", "claude-opus-5-5", func(*wire.Usage) {}, opus, true},
		{"fast mode", "claude-opus-5-5", func(u *wire.Usage) { u.Speed = "fast" }, 2 * opus, true},
		{"fast mode without a fast rate", "claude-sonnet-5-5", func(u *wire.Usage) { u.Speed = "fast" }, 0, false},
		{"US inference", "claude-opus-5-5", func(u *wire.Usage) { u.InferenceGeo = "us" }, 1.1 * opus, true},
		{"US inference of an older model", "claude-opus-4-5", func(u *wire.Usage) { u.InferenceGeo = "us" }, 0.8*5 + 0.1*25, true},
		{"global inference", "claude-opus-5-5", func(u *wire.Usage) { u.InferenceGeo = "global" }, opus, true},
		{"fast and US", "claude-opus-5-5", func(u *wire.Usage) { u.Speed, u.InferenceGeo = "fast", "us" }, 2.2 * opus, true},
		{"web searches at $10 per 1,000", "claude-opus-5-5", func(u *wire.Usage) { u.ServerToolUse.WebSearch = 3 }, opus + 0.03, true},
		{"web fetches and code execution cost their tokens", "claude-opus-5-5", func(u *wire.Usage) {
			u.ServerToolUse.WebFetch, u.ServerToolUse.CodeExecution = 2, 1
		}, opus, true},
		{"Claude Fable 5.2", "claude-fable-5-2", func(*wire.Usage) {}, 8 + 0.1*40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := base
			if tc.model == "claude-opus-4-5" {
				u.InputTokens = 1_000_000 - 200_000 // 0.8M at $5
			}
			tc.edit(&u)
			got, ok := p.Cost(tc.model, u)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Cost = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
