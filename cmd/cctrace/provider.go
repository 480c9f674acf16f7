package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/provider"
)

// foundryKeyEnv holds the Foundry resource's key. It is read from the environment only, never
// from a flag: a flag's value shows in the process list and in -h.
const foundryKeyEnv = "CCTRACE_FOUNDRY_API_KEY"

// newUpstream resolves where cctrace forwards to and how it authenticates there, from the flags
// and, where they leave it open, the environment Claude Code itself reads for the provider
// (CLOUD_ML_REGION, ANTHROPIC_FOUNDRY_RESOURCE) and the cloud's own (the AWS configuration).
func newUpstream(ctx context.Context, o options, log *slog.Logger) (*provider.Upstream, error) {
	p, err := wire.ParseProvider(o.provider)
	if err != nil {
		return nil, fmt.Errorf("invalid --provider: %w", err)
	}
	resource := o.foundryResource
	if resource == "" {
		resource = os.Getenv("ANTHROPIC_FOUNDRY_RESOURCE")
	}
	return provider.New(ctx, provider.Config{
		Provider:        p,
		Upstream:        o.upstream,
		Region:          providerRegion(o),
		FoundryResource: resource,
		FoundryAPIKey:   os.Getenv(foundryKeyEnv),
		Logger:          log,
	})
}

// providerRegion is --region, or for Vertex AI the location Claude Code reads (CLOUD_ML_REGION).
// Bedrock's default is left to the AWS configuration.
func providerRegion(o options) string {
	if o.region != "" {
		return o.region
	}
	if strings.EqualFold(o.provider, "vertex") {
		return os.Getenv("CLOUD_ML_REGION")
	}
	return ""
}

// clientEnv is the environment that points Claude Code at the proxy at base, in the mode of the
// provider cctrace forwards to, with Claude Code's own authentication off where cctrace adds it.
func clientEnv(p wire.Provider, base string) []string {
	switch p {
	case wire.ProviderVertex:
		return []string{"CLAUDE_CODE_USE_VERTEX=1", "ANTHROPIC_VERTEX_BASE_URL=" + base + "/v1", "CLAUDE_CODE_SKIP_VERTEX_AUTH=1"}
	case wire.ProviderBedrock:
		return []string{"CLAUDE_CODE_USE_BEDROCK=1", "ANTHROPIC_BEDROCK_BASE_URL=" + base, "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1"}
	case wire.ProviderFoundry:
		return []string{"CLAUDE_CODE_USE_FOUNDRY=1", "ANTHROPIC_FOUNDRY_BASE_URL=" + base + "/anthropic", "CLAUDE_CODE_SKIP_FOUNDRY_AUTH=1"}
	default:
		return []string{"ANTHROPIC_BASE_URL=" + base}
	}
}

// checkCredentials obtains a credential once at start-up, off the start's path, and says in one
// line where it came from or what to do: the first request would fail the same way.
func (a *app) checkCredentials(ctx context.Context) {
	if a.upstream.Provider() == wire.ProviderAnthropic {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		desc, err := a.upstream.Check(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			fmt.Fprintf(a.out, "cctrace: warning: no upstream credentials: %v\n", err)
		default:
			a.log.Info("upstream credentials", "provider", a.upstream.Provider().String(), "source", desc)
		}
	}()
}
