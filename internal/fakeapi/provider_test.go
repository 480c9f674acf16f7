package fakeapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cctrace/cctrace/instrument/wire"
)

const providerBody = `{"messages":[{"role":"user","content":"Run echo hello-from-fakeapi"}],"max_tokens":100,"tools":[{"name":"Bash"}]}`

func TestProviderFakes(t *testing.T) {
	script, err := Scenario("tool_roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	awsCreds := aws.Credentials{AccessKeyID: "AKIDFAKE", SecretAccessKey: "fake-secret"}
	sign := func(creds aws.Credentials) func(*http.Request) {
		return func(r *http.Request) {
			sum := sha256.Sum256([]byte(providerBody))
			if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name       string
		provider   wire.Provider
		auth       Auth
		method     string
		path       string
		prepare    func(*http.Request)
		wantStatus int
		wantRule   string
		wantModel  string
		wantType   string // Content-Type
	}{
		{"vertex", wire.ProviderVertex, Auth{BearerToken: "tok"}, "POST",
			"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-5-5:streamRawPredict",
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer tok") }, 200, "main", "claude-opus-5-5", "text/event-stream; charset=utf-8"},
		{"vertex wrong token", wire.ProviderVertex, Auth{BearerToken: "tok"}, "POST",
			"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-5-5:streamRawPredict",
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, "unauthorized", "", "application/json"},
		{"bedrock", wire.ProviderBedrock, Auth{AWS: &awsCreds, AWSRegion: "us-east-1"}, "POST",
			"/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream", sign(awsCreds), 200, "main", "us.anthropic.claude-opus-5-5", "application/vnd.amazon.eventstream"},
		{"bedrock wrong secret", wire.ProviderBedrock, Auth{AWS: &awsCreds, AWSRegion: "us-east-1"}, "POST",
			"/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream",
			sign(aws.Credentials{AccessKeyID: "AKIDFAKE", SecretAccessKey: "other"}), 403, "unauthorized", "", "application/json"},
		{"bedrock unsigned", wire.ProviderBedrock, Auth{AWS: &awsCreds, AWSRegion: "us-east-1"}, "POST",
			"/model/us.anthropic.claude-opus-5-5/invoke", nil, 403, "unauthorized", "", "application/json"},
		{"bedrock inference profiles", wire.ProviderBedrock, Auth{}, "GET", "/inference-profiles?type=SYSTEM_DEFINED",
			nil, 200, "inference_profiles", "", "application/json"},
		{"bedrock not streamed", wire.ProviderBedrock, Auth{}, "POST", "/model/us.anthropic.claude-opus-5-5/invoke",
			nil, 200, "main", "us.anthropic.claude-opus-5-5", "application/json"},
		{"foundry", wire.ProviderFoundry, Auth{APIKey: "key"}, "POST", "/anthropic/v1/messages?beta=true",
			func(r *http.Request) { r.Header.Set("Api-Key", "key") }, 200, "main", "", "application/json"},
		{"foundry without key", wire.ProviderFoundry, Auth{APIKey: "key"}, "POST", "/anthropic/v1/messages?beta=true",
			nil, 401, "unauthorized", "", "application/json"},
		{"vertex path on bedrock", wire.ProviderBedrock, Auth{}, "POST",
			"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-5-5:streamRawPredict", nil, 404, "not_found", "", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := New(script, WithProvider(tt.provider, tt.auth))
			ts := httptest.NewServer(srv)
			defer ts.Close()
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader(providerBody)
			}
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, body)
			if tt.prepare != nil {
				tt.prepare(req)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			sv := srv.Served()[0]
			if resp.StatusCode != tt.wantStatus || sv.Status != tt.wantStatus || sv.Rule != tt.wantRule || sv.Model != tt.wantModel {
				t.Errorf("status %d (served %d), rule %q, model %q; want %d %q %q: %s", resp.StatusCode, sv.Status, sv.Rule, sv.Model, tt.wantStatus, tt.wantRule, tt.wantModel, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.wantType {
				t.Errorf("Content-Type %q, want %q", ct, tt.wantType)
			}
			if tt.wantType == "application/vnd.amazon.eventstream" {
				// The frames carry the same answer SSE would: decode them as cctrace does.
				r := wire.Response{ContentType: tt.wantType}
				wire.DecodeResponse(&r, wire.EndpointMessages, raw)
				if r.Message == nil || r.Message.StopReason != "tool_use" || r.Incomplete || r.ParseError != "" || r.Message.Usage.CacheReadInputTokens != sv.Usage.CacheReadInputTokens {
					t.Errorf("frames decode to %+v", r)
				}
			}
		})
	}
}

// TestRecordBinaryResponse: a Bedrock exchange is recorded with its provider and its answer in
// base64, and plays back byte for byte.
func TestRecordBinaryResponse(t *testing.T) {
	script, _ := Scenario("tool_roundtrip")
	dir := t.TempDir()
	srv := New(script, WithProvider(wire.ProviderBedrock, Auth{}), WithRecordDir(dir))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream", "application/json", strings.NewReader(providerBody))
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "001.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Provider       string `json:"provider"`
		Response       *string
		ResponseBase64 []byte `json:"response_base64"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Provider != "bedrock" || rec.Response != nil || !bytes.Equal(rec.ResponseBase64, sent) {
		t.Errorf("recorded provider %q, response %v, %d base64 bytes of the %d sent", rec.Provider, rec.Response, len(rec.ResponseBase64), len(sent))
	}
}

func TestRecordedScenario(t *testing.T) {
	for name, want := range map[string]struct {
		scenario string
		provider wire.Provider
	}{
		"tool_roundtrip":         {"tool_roundtrip", wire.ProviderAnthropic},
		"bedrock_tool_roundtrip": {"tool_roundtrip", wire.ProviderBedrock},
		"vertex_subagent":        {"subagent", wire.ProviderVertex},
		"foundry_tool_roundtrip": {"tool_roundtrip", wire.ProviderFoundry},
		"retry_529":              {"retry_529", wire.ProviderAnthropic},
		"anthropic_x":            {"anthropic_x", wire.ProviderAnthropic},
	} {
		if s, p := RecordedScenario(name); s != want.scenario || p != want.provider {
			t.Errorf("RecordedScenario(%q) = %q, %v", name, s, p)
		}
	}
}
