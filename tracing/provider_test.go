package tracing

import (
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

// TestProviderName: gen_ai.provider.name is the semantic conventions' name of the provider the
// requests went to, on chat spans (from the request) and on the turn's and subagents'
// invoke_agent spans (from WithProvider).
func TestProviderName(t *testing.T) {
	for p, want := range map[wire.Provider]string{
		wire.ProviderAnthropic: "anthropic",
		wire.ProviderVertex:    "gcp.vertex_ai",
		wire.ProviderBedrock:   "aws.bedrock",
		wire.ProviderFoundry:   "azure.ai.inference",
	} {
		t.Run(p.String(), func(t *testing.T) {
			steps := turnSteps()
			for _, st := range steps {
				if c := st.span.Chat; c != nil {
					c.Request.Provider = p
				}
			}
			got := record(t, steps, WithProvider(p))
			if len(got) == 0 {
				t.Fatal("no spans")
			}
			for id, s := range got {
				name, ok := attrMap(s)["gen_ai.provider.name"]
				if op := attrMap(s)["gen_ai.operation.name"].AsString(); op == "execute_tool" {
					continue
				}
				if !ok || name.AsString() != want {
					t.Errorf("span %s %q: gen_ai.provider.name %q, want %q", id, s.Name(), name.AsString(), want)
				}
			}
		})
	}
}
