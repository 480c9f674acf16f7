package wire

import (
	"fmt"
	"net/http"
	"strings"
)

// Provider is the service that answered a request: the Anthropic API, or a cloud serving Claude
// through the same Messages API (docs/wire.md, "Cloud modes"). The zero value is
// ProviderAnthropic.
type Provider uint8

// Providers cctrace forwards to.
const (
	ProviderAnthropic Provider = iota // the Anthropic API, or a gateway that speaks it
	ProviderVertex                    // Google Vertex AI
	ProviderBedrock                   // Amazon Bedrock
	ProviderFoundry                   // Microsoft Foundry
)

// Providers lists every Provider, in the order their names are documented.
var Providers = [...]Provider{ProviderAnthropic, ProviderVertex, ProviderBedrock, ProviderFoundry}

// providerNames are each Provider's String and GenAIName.
var providerNames = [...]struct{ name, genAI string }{
	ProviderAnthropic: {"anthropic", "anthropic"},
	ProviderVertex:    {"vertex", "gcp.vertex_ai"},
	ProviderBedrock:   {"bedrock", "aws.bedrock"},
	ProviderFoundry:   {"foundry", "azure.ai.inference"},
}

// String returns the provider's name as cctrace's --provider flag and price table spell it.
func (p Provider) String() string { return providerNames[p.known()].name }

// GenAIName returns the provider's gen_ai.provider.name in the OpenTelemetry GenAI semantic
// conventions, for spans and metrics alike. Foundry serves Claude through the Azure AI
// inference endpoint, and so is "azure.ai.inference".
func (p Provider) GenAIName() string { return providerNames[p.known()].genAI }

// known returns p, or ProviderAnthropic for a value no Provider has.
func (p Provider) known() Provider {
	if int(p) >= len(providerNames) {
		return ProviderAnthropic
	}
	return p
}

// ParseProvider reads a provider name as String spells it (case-insensitive).
func ParseProvider(s string) (Provider, error) {
	for _, p := range Providers {
		if strings.EqualFold(strings.TrimSpace(s), p.String()) {
			return p, nil
		}
	}
	return ProviderAnthropic, fmt.Errorf("unknown provider %q: want anthropic, vertex, bedrock or foundry", s)
}

// Route is what a request's method and path say about it, before its body is read.
// The zero value is a request to no known endpoint.
type Route struct {
	Endpoint Endpoint
	// Model is the model the path names: Vertex AI and Bedrock carry it there instead of in the
	// body. Empty for the Anthropic API's paths.
	Model string
	// Stream is true when the path itself asks for a streamed answer (Vertex AI's
	// :streamRawPredict, Bedrock's invoke-with-response-stream): Bedrock's body then has no
	// "stream" member.
	Stream bool
}

// ClassifyRoute maps a method and URL path to a Route: the Anthropic API's paths (a trailing
// slash, a query and a path prefix before /v1, such as a gateway's /anthropic/v1/messages, are
// tolerated), and the cloud paths Claude Code sends in its Vertex AI and Bedrock modes, after any
// prefix a gateway's base URL adds.
//
//	POST …/v1/messages                                            Anthropic API
//	POST …/v1/messages/count_tokens                               Anthropic API count tokens
//	POST …/publishers/anthropic/models/{model}:streamRawPredict   Vertex AI, streamed
//	POST …/publishers/anthropic/models/{model}:rawPredict         Vertex AI
//	POST …/publishers/anthropic/models/count-tokens:rawPredict    Vertex AI count tokens
//	POST …/model/{model id}/invoke-with-response-stream           Bedrock, streamed
//	POST …/model/{model id}/invoke                                Bedrock
//
// A Bedrock model id may be an ARN with slashes in it (an application inference profile),
// which the client escapes and the URL's Path holds unescaped: the model is everything between
// /model/ and the action.
func ClassifyRoute(method, path string) Route {
	if method != http.MethodPost {
		return Route{}
	}
	path, _, _ = strings.Cut(path, "?")
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		return Route{Endpoint: EndpointMessages}
	case strings.HasSuffix(path, "/v1/messages/count_tokens"):
		return Route{Endpoint: EndpointCountTokens}
	}
	if model, action, ok := vertexModel(path); ok {
		switch {
		case model == "count-tokens" && action == "rawPredict":
			return Route{Endpoint: EndpointCountTokens}
		case action == "streamRawPredict":
			return Route{Endpoint: EndpointMessages, Model: model, Stream: true}
		case action == "rawPredict":
			return Route{Endpoint: EndpointMessages, Model: model}
		}
		return Route{}
	}
	const prefix = "/model/"
	i := strings.Index(path, prefix)
	if i < 0 {
		return Route{}
	}
	rest := path[i+len(prefix):]
	for _, a := range [...]struct {
		suffix string
		stream bool
	}{{"/invoke-with-response-stream", true}, {"/invoke", false}} {
		if model, ok := strings.CutSuffix(rest, a.suffix); ok && model != "" {
			return Route{Endpoint: EndpointMessages, Model: model, Stream: a.stream}
		}
	}
	return Route{}
}

// vertexModel splits a Vertex AI publisher model path into its model and its action
// ("…/publishers/anthropic/models/claude-opus-5-5:streamRawPredict" → "claude-opus-5-5",
// "streamRawPredict").
func vertexModel(path string) (model, action string, ok bool) {
	const marker = "/publishers/anthropic/models/"
	i := strings.LastIndex(path, marker)
	if i < 0 {
		return "", "", false
	}
	rest := path[i+len(marker):]
	if strings.IndexByte(rest, '/') >= 0 {
		return "", "", false
	}
	model, action, ok = strings.Cut(rest, ":")
	return model, action, ok && model != ""
}
