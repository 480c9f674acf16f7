package metrics

import (
	"math"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

// TestProviderCost: the model ids each provider's Claude Code sends map to the table's families,
// and regional endpoints carry their provider's premium.
func TestProviderCost(t *testing.T) {
	p := DefaultPrices()
	u := wire.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadInputTokens: 20000, CacheCreationInputTokens: 3000}
	base, ok := p.Cost("claude-opus-5-5", u)
	if !ok || base == 0 {
		t.Fatal("claude-opus-5-5 is not priced")
	}
	tests := []struct {
		provider wire.Provider
		global   bool
		model    string
		factor   float64 // of the Anthropic API's cost
	}{
		{wire.ProviderAnthropic, false, "claude-opus-5-5", 1},
		{wire.ProviderVertex, true, "claude-opus-5-5", 1},
		{wire.ProviderVertex, false, "claude-opus-5-5", 1.1},
		{wire.ProviderVertex, false, "claude-opus-5-5@20261101", 1.1},
		{wire.ProviderBedrock, false, "global.anthropic.claude-opus-5-5", 1},
		{wire.ProviderBedrock, true, "us.anthropic.claude-opus-5-5", 1.1},
		{wire.ProviderBedrock, false, "anthropic.claude-opus-5-5-v1:0", 1.1},
		{wire.ProviderBedrock, false, "arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-opus-5-5", 1},
		{wire.ProviderFoundry, false, "claude-opus-5-5", 1},
	}
	for _, tt := range tests {
		t.Run(tt.provider.String()+" "+tt.model, func(t *testing.T) {
			got, ok := p.ProviderCost(tt.provider, tt.global)(tt.model, u)
			if !ok || math.Abs(got-base*tt.factor) > 1e-12 {
				t.Errorf("cost %v (%v), want %v", got, ok, base*tt.factor)
			}
		})
	}
	// Older models have no regional premium.
	old, _ := p.Cost("claude-sonnet-4", u)
	if got, _ := p.ProviderCost(wire.ProviderBedrock, false)("us.anthropic.claude-sonnet-4-20250514-v1:0", u); math.Abs(got-old) > 1e-12 {
		t.Errorf("Sonnet 4 on Bedrock: %v, want %v", got, old)
	}
	if _, ok := p.ProviderCost(wire.ProviderVertex, false)("gemini-3-pro", u); ok {
		t.Error("an unknown model was priced")
	}
}

func TestProviderPricesOverride(t *testing.T) {
	table := `{"version":"v","models":[{"ids":["claude-x"],"input":1,"output":1}],
	  "providers":{"bedrock":{"models":[{"ids":["claude-x"],"input":2,"output":2}],"regional_premium":{"multiplier":1.5,"ids":["claude-x"]}}}}`
	p, err := ParsePrices([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	u := wire.Usage{InputTokens: 1e6}
	if got, _ := p.ProviderCost(wire.ProviderBedrock, false)("global.anthropic.claude-x", u); got != 2 {
		t.Errorf("bedrock global: %v, want 2", got)
	}
	if got, _ := p.ProviderCost(wire.ProviderBedrock, false)("eu.anthropic.claude-x", u); got != 3 {
		t.Errorf("bedrock regional: %v, want 3", got)
	}
	if got, _ := p.ProviderCost(wire.ProviderVertex, false)("claude-x", u); got != 1 {
		t.Errorf("vertex (no table): %v, want 1", got)
	}
	for _, bad := range []string{
		`"providers":{"azure":{}}`,
		`"providers":{"vertex":{"regional_premium":{"multiplier":0.5,"ids":[]}}}`,
		`"providers":{"vertex":{"models":[{"ids":[],"input":1}]}}`,
		`"providers":{"vertex":{"unknown":1}}`,
	} {
		if _, err := ParsePrices([]byte(`{"version":"v","models":[{"ids":["a"]}],` + bad + `}`)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
