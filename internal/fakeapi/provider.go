package fakeapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Auth is the credential the fake demands of every request, as the cloud it plays would: the
// upstream's 401 or 403, in that cloud's error shape, when it is missing or wrong. The zero
// value demands nothing (the Anthropic API fake takes any key).
type Auth struct {
	// BearerToken is the Authorization: Bearer token required (Vertex AI, Foundry with Entra ID).
	BearerToken string
	// APIKey is the api-key header required (Foundry with a resource key).
	APIKey string
	// AWS are the credentials whose SigV4 signature is required, for service bedrock in
	// AWSRegion (Bedrock). The fake recomputes the signature with the AWS SDK's signer and
	// compares.
	AWS       *aws.Credentials
	AWSRegion string
}

// WithProvider makes the fake answer as provider does: its paths (the model in a Vertex AI or
// Bedrock path, Bedrock's inference-profile listing), its credential (auth) and its framing
// (Bedrock's AWS event stream). The default is the Anthropic API, demanding no credential.
func WithProvider(provider wire.Provider, auth Auth) Option {
	return func(c *config) { c.provider, c.auth = provider, auth }
}

// providerRoute decides what a request is for the provider played: a Messages call (with the
// model the path names, if any), count_tokens, Bedrock's inference-profile listing, or nothing.
func (s *Server) providerRoute(hr *http.Request) (route wire.Route, profiles, ok bool) {
	path := hr.URL.Path
	switch s.cfg.provider {
	case wire.ProviderVertex:
		if !strings.HasPrefix(path, "/v1/projects/") {
			return wire.Route{}, false, false
		}
	case wire.ProviderBedrock:
		if hr.Method == http.MethodGet && path == "/inference-profiles" {
			return wire.Route{}, true, true
		}
		if !strings.HasPrefix(path, "/model/") {
			return wire.Route{}, false, false
		}
	case wire.ProviderFoundry:
		p, found := strings.CutPrefix(path, "/anthropic")
		if !found || (p != "/v1/messages" && p != "/v1/messages/count_tokens") {
			return wire.Route{}, false, false
		}
	default:
		if path != "/v1/messages" && path != "/v1/messages/count_tokens" {
			return wire.Route{}, false, false
		}
	}
	route = wire.ClassifyRoute(hr.Method, path)
	return route, false, route.Endpoint != wire.EndpointOther
}

// authFailure checks the request's credential; it returns "" when it is what Auth demands, and
// otherwise why not (never the credential itself).
func (s *Server) authFailure(hr *http.Request, body []byte) string {
	a := s.cfg.auth
	switch {
	case a.BearerToken != "":
		got, ok := strings.CutPrefix(hr.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return "no bearer token"
		}
		if got != a.BearerToken {
			return "wrong bearer token"
		}
	case a.APIKey != "":
		got := hr.Header.Get("Api-Key")
		if got == "" {
			return "no api-key"
		}
		if got != a.APIKey {
			return "wrong api-key"
		}
	case a.AWS != nil:
		if err := VerifySigV4(hr, body, *a.AWS, a.AWSRegion); err != nil {
			return err.Error()
		}
	}
	return ""
}

// authStatus is the status the provider played answers a refused credential with.
func (s *Server) authStatus() int {
	if s.cfg.provider == wire.ProviderBedrock {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// writeAuthFailure answers a request whose credential failed, as the cloud would.
func (s *Server) writeAuthFailure(w http.ResponseWriter, why string) {
	status := s.authStatus()
	switch s.cfg.provider {
	case wire.ProviderVertex:
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"code": status, "status": "UNAUTHENTICATED",
			"message": "Request had invalid authentication credentials. Expected OAuth 2 access token (fakeapi: " + why + ").",
		}})
	case wire.ProviderBedrock:
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
		writeJSON(w, status, map[string]string{
			"message": "The request signature we calculated does not match the signature you provided (fakeapi: " + why + ").",
		})
	case wire.ProviderFoundry:
		writeJSON(w, status, map[string]any{"error": map[string]string{
			"code":    "401",
			"message": "Access denied due to invalid subscription key or wrong API endpoint (fakeapi: " + why + ").",
		}})
	default:
		writeJSON(w, status, errorBody("authentication_error", "fakeapi: "+why, ""))
	}
}

// writeInferenceProfiles answers Bedrock's ListInferenceProfiles with the system-defined profiles
// of the models the fake answers as.
func writeInferenceProfiles(w http.ResponseWriter, region string) {
	var profiles []map[string]any
	for _, id := range []string{"us.anthropic.claude-opus-5-5", "us.anthropic.claude-haiku-5-5"} {
		arn := fmt.Sprintf("arn:aws:bedrock:%s:123456789012:inference-profile/%s", region, id)
		profiles = append(profiles, map[string]any{
			"inferenceProfileId": id, "inferenceProfileArn": arn, "inferenceProfileName": id,
			"status": "ACTIVE", "type": "SYSTEM_DEFINED",
			"models": []map[string]string{{"modelArn": fmt.Sprintf("arn:aws:bedrock:%s::foundation-model/%s", region, strings.TrimPrefix(id, "us."))}},
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"inferenceProfileSummaries": profiles})
}

// VerifySigV4 checks a request's AWS SigV4 signature as the service would, by signing a copy
// of it with creds (the headers it names as signed, the same time, the body's hash) with the AWS
// SDK's signer and comparing the two. body is the request's body, already read.
func VerifySigV4(r *http.Request, body []byte, creds aws.Credentials, region string) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errors.New("no Authorization header")
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return errors.New("not a SigV4 Authorization header")
	}
	var credential, signedHeaders string
	for part := range strings.SplitSeq(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signedHeaders = v
		}
	}
	if keyID, _, _ := strings.Cut(credential, "/"); keyID != creds.AccessKeyID {
		return errors.New("unknown access key id")
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return errors.New("no valid X-Amz-Date")
	}
	if d := time.Since(when); d > 15*time.Minute || d < -15*time.Minute {
		return errors.New("signature expired")
	}
	u := *r.URL
	u.Scheme, u.Host = "https", r.Host
	again, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("rebuilding the request: %w", err)
	}
	again.URL.RawPath = r.URL.RawPath
	again.Host = r.Host
	for h := range strings.SplitSeq(signedHeaders, ";") {
		switch h {
		case "host":
		case "content-length":
			again.ContentLength = int64(len(body))
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	again.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hex.EncodeToString(sum[:]), "bedrock", region, when); err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	if again.Header.Get("Authorization") != auth {
		return errors.New("signature mismatch")
	}
	return nil
}

// bedrockFrame encodes one Anthropic stream event as Bedrock sends it: a chunk event whose
// payload is {"bytes": base64 of the event JSON}.
func bedrockFrame(w io.Writer, event []byte) error {
	payload, err := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString(event)})
	if err != nil {
		return fmt.Errorf("encoding chunk payload: %w", err)
	}
	return eventstream.NewEncoder().Encode(w, eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue("chunk")},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		},
		Payload: payload,
	})
}

// bedrockException encodes a mid-stream error as Bedrock sends it: an exception frame.
func bedrockException(w io.Writer, errType, msg string) error {
	exception := "internalServerException"
	switch errType {
	case "overloaded_error":
		exception = "serviceUnavailableException"
	case "rate_limit_error":
		exception = "throttlingException"
	}
	payload, _ := json.Marshal(map[string]string{"message": msg})
	return eventstream.NewEncoder().Encode(w, eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":exception-type", Value: eventstream.StringValue(exception)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("exception")},
		},
		Payload: payload,
	})
}

// RecordedScenario splits the name of a recording directory (testdata/claude-code) into the
// scenario and the provider the fake played: "bedrock_tool_roundtrip" is the tool_roundtrip
// scenario answered as Bedrock, "tool_roundtrip" the same as the Anthropic API, and
// "ratelimit_subscription" the ratelimit scenario with the CLI logged in by a bearer token.
func RecordedScenario(name string) (scenario string, provider wire.Provider) {
	// A subscription's recording runs the scenario with a bearer token instead of an API key.
	name = strings.TrimSuffix(name, "_subscription")
	if prefix, rest, ok := strings.Cut(name, "_"); ok {
		if p, err := wire.ParseProvider(prefix); err == nil && p != wire.ProviderAnthropic {
			return rest, p
		}
	}
	return name, wire.ProviderAnthropic
}
