package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// Secrets the tests hand out; none may show up in a log line or an error a client sees.
const (
	gceToken     = "ya29.SECRET-gce-token"
	awsKeyID     = "AKIDSECRETKEYID"
	awsSecret    = "SECRET/aws+secret-access-key"
	foundryKey   = "SECRET-foundry-key"
	entraToken   = "SECRET-entra-token"
	clientSecret = "SECRET-client-placeholder"
)

var secrets = []string{gceToken, awsSecret, foundryKey, entraToken, clientSecret}

// TestMain points Application Default Credentials at a fake metadata server on loopback for the
// whole process (the metadata package decides once per process whether it runs on Google
// Cloud), and keeps every credential chain away from this machine's files and from the
// link-local metadata addresses of real clouds.
func TestMain(m *testing.M) {
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "no Metadata-Flavor", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"expires_in":3600,"token_type":"Bearer"}`, gceToken)
		case "/computeMetadata/v1/project/project-id":
			fmt.Fprint(w, "cctrace-test")
		default:
			http.NotFound(w, r)
		}
	}))
	home, _ := os.MkdirTemp("", "provider-test-home")
	for k, v := range map[string]string{
		"GCE_METADATA_HOST":           strings.TrimPrefix(metadata.URL, "http://"),
		"HOME":                        home,
		"CLOUDSDK_CONFIG":             filepath.Join(home, "gcloud"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "aws-credentials"),
	} {
		os.Setenv(k, v)
	}
	for _, k := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		os.Unsetenv(k)
	}
	code := m.Run()
	metadata.Close()
	os.RemoveAll(home)
	os.Exit(code)
}

// seen is what the fake upstream received.
type seen struct {
	header http.Header
	path   string
	body   []byte
}

// send makes one request through u's transport to an upstream answering with handler, with the
// credentials Claude Code sends in a cloud mode (placeholders) and returns the response and what
// the upstream saw.
func send(t *testing.T, u *Upstream, path string, body string, handler func(w http.ResponseWriter, r *http.Request, body []byte)) (*http.Response, []byte, *seen) {
	t.Helper()
	var got *seen
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = &seen{header: r.Header.Clone(), path: r.URL.EscapedPath(), body: b}
		if handler != nil {
			handler(w, r, b)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	req, _ := http.NewRequest(http.MethodPost, up.URL+path, strings.NewReader(body))
	req.URL.Host = target.Host
	req.Header.Set("Authorization", "Bearer "+clientSecret)
	req.Header.Set("X-Api-Key", clientSecret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Claude-Code-Session-Id", "session-1")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := u.Transport(tr).RoundTrip(req)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, got
}

func newUpstream(t *testing.T, cfg Config) (*Upstream, *harness.Buffer) {
	t.Helper()
	logs := &harness.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	u, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return u, logs
}

// noSecrets fails the test when a secret shows up in the logs or in what the client got.
func noSecrets(t *testing.T, logs *harness.Buffer, clientSaw []byte) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("a secret reached the log:\n%s", logs)
		}
		if bytes.Contains(clientSaw, []byte(s)) {
			t.Errorf("a secret reached the client: %s", clientSaw)
		}
	}
}

// clientCredentialsGone fails the test when the placeholders the client sent reached upstream.
func clientCredentialsGone(t *testing.T, h http.Header) {
	t.Helper()
	if h.Get("X-Api-Key") != "" || strings.Contains(h.Get("Authorization"), clientSecret) {
		t.Errorf("the client's credentials reached the upstream: %v", h)
	}
}

func TestVertexBearerFromApplicationDefaultCredentials(t *testing.T) {
	u, logs := newUpstream(t, Config{Provider: wire.ProviderVertex, Region: "us-east5"})
	if got := u.URL().String(); got != "https://us-east5-aiplatform.googleapis.com" {
		t.Errorf("default upstream %s", got)
	}
	desc, err := u.Check(context.Background())
	if err != nil || desc == "" {
		t.Fatalf("Check: %q, %v", desc, err)
	}
	resp, body, got := send(t, u, "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-5-5:streamRawPredict", `{}`, nil)
	if resp.StatusCode != http.StatusOK || got == nil {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if a := got.header.Get("Authorization"); a != "Bearer "+gceToken {
		t.Errorf("the upstream got Authorization %q, want the metadata server's token", a)
	}
	clientCredentialsGone(t, got.header)
	noSecrets(t, logs, body)
}

func TestVertexWithoutCredentials(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	u, logs := newUpstream(t, Config{Provider: wire.ProviderVertex, Region: "global"})
	if got := u.URL().String(); got != "https://aiplatform.googleapis.com" {
		t.Errorf("global upstream %s", got)
	}
	if _, err := u.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "gcloud auth application-default login") {
		t.Errorf("Check: %v, want the fix named", err)
	}
	for range 3 {
		resp, body, got := send(t, u, "/v1/projects/p/locations/global/publishers/anthropic/models/m:streamRawPredict", `{}`, nil)
		if got != nil {
			t.Fatal("a request without credentials reached the upstream")
		}
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Type != "authentication_error" ||
			!strings.Contains(e.Error.Message, "vertex") || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("client got %d %v: %s", resp.StatusCode, resp.Header, body)
		}
		noSecrets(t, logs, body)
	}
	if n := strings.Count(logs.String(), "cannot authenticate to the upstream"); n != 1 {
		t.Errorf("%d warnings for three failures in a minute, want 1:\n%s", n, logs)
	}
}

func TestBedrockSignsWithTheDefaultChain(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awsSecret)
	t.Setenv("AWS_REGION", "us-west-2")
	u, logs := newUpstream(t, Config{Provider: wire.ProviderBedrock})
	if got := u.URL().String(); got != "https://bedrock-runtime.us-west-2.amazonaws.com" {
		t.Errorf("runtime upstream %s", got)
	}
	if got := u.Route("/inference-profiles").String(); got != "https://bedrock.us-west-2.amazonaws.com" {
		t.Errorf("control plane %s", got)
	}
	if got := u.Route("/model/m/invoke").String(); got != u.URL().String() {
		t.Errorf("runtime route %s", got)
	}
	creds := aws.Credentials{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret}
	const body = `{"anthropic_version":"bedrock-2023-05-31","messages":[{"role":"user","content":"hi"}]}`
	for _, path := range []string{
		"/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream",
		"/model/" + url.PathEscape("arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/abc") + "/invoke",
	} {
		var verr error
		resp, rb, got := send(t, u, path, body, func(w http.ResponseWriter, r *http.Request, b []byte) {
			verr = fakeapi.VerifySigV4(r, b, creds, "us-west-2")
			w.WriteHeader(http.StatusOK)
		})
		if verr != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: signature: %v (status %d %s)", path, verr, resp.StatusCode, rb)
		}
		if string(got.body) != body {
			t.Errorf("%s: the upstream got body %q", path, got.body)
		}
		clientCredentialsGone(t, got.header)
		noSecrets(t, logs, rb)
	}
}

func TestBedrockWrongCredentialsAreRefused(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET-not-the-right-one")
	u, logs := newUpstream(t, Config{Provider: wire.ProviderBedrock, Region: "us-east-1"})
	creds := aws.Credentials{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret}
	resp, rb, _ := send(t, u, "/model/m/invoke", `{}`, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if err := fakeapi.VerifySigV4(r, b, creds, "us-east-1"); err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"message":%q}`, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d %s, want the upstream's 403", resp.StatusCode, rb)
	}
	if !strings.Contains(logs.String(), "the upstream refused cctrace's credentials") || !strings.Contains(logs.String(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("no warning naming the fix:\n%s", logs)
	}
	noSecrets(t, logs, rb)
}

func TestBedrockWithoutCredentials(t *testing.T) {
	u, logs := newUpstream(t, Config{Provider: wire.ProviderBedrock, Region: "eu-west-1"})
	resp, body, got := send(t, u, "/model/m/invoke", `{}`, nil)
	if got != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "no bedrock credentials") {
		t.Errorf("status %d, upstream reached %v: %s", resp.StatusCode, got != nil, body)
	}
	if !strings.Contains(logs.String(), "cannot authenticate to the upstream") {
		t.Errorf("no warning:\n%s", logs)
	}
	noSecrets(t, logs, body)
}

func TestFoundryAPIKey(t *testing.T) {
	u, logs := newUpstream(t, Config{Provider: wire.ProviderFoundry, FoundryResource: "my-resource", FoundryAPIKey: foundryKey})
	if got := u.URL().String(); got != "https://my-resource.services.ai.azure.com" {
		t.Errorf("default upstream %s", got)
	}
	resp, body, got := send(t, u, "/anthropic/v1/messages", `{}`, nil)
	if resp.StatusCode != http.StatusOK || got.header.Get("Api-Key") != foundryKey || got.header.Get("Authorization") != "" {
		t.Errorf("status %d, upstream headers %v", resp.StatusCode, got.header)
	}
	clientCredentialsGone(t, got.header)
	noSecrets(t, logs, body)
	if desc, err := u.Check(context.Background()); err != nil || strings.Contains(desc, foundryKey) {
		t.Errorf("Check: %q, %v", desc, err)
	}
}

// TestFoundryEntraToken gets a Microsoft Entra ID token from a managed identity endpoint (App
// Service's, faked on loopback).
func TestFoundryEntraToken(t *testing.T) {
	identity := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Identity-Header") != "identity-header" || !strings.Contains(r.URL.RawQuery, "cognitiveservices") {
			http.Error(w, "bad token request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"expires_on":"%d","resource":"https://cognitiveservices.azure.com","token_type":"Bearer"}`, entraToken, 4102444800)
	}))
	defer identity.Close()
	t.Setenv("IDENTITY_ENDPOINT", identity.URL)
	t.Setenv("IDENTITY_HEADER", "identity-header")
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "MSI_ENDPOINT", "IMDS_ENDPOINT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	u, logs := newUpstream(t, Config{Provider: wire.ProviderFoundry, FoundryResource: "res"})
	resp, body, got := send(t, u, "/anthropic/v1/messages", `{}`, nil)
	if got == nil || resp.StatusCode != http.StatusOK || got.header.Get("Authorization") != "Bearer "+entraToken {
		t.Fatalf("status %d: %s; upstream saw %v", resp.StatusCode, body, got)
	}
	clientCredentialsGone(t, got.header)
	noSecrets(t, logs, body)
}

func TestDefaultUpstream(t *testing.T) {
	tests := []struct {
		cfg              Config
		runtime, control string
		err              string
	}{
		{Config{}, "https://api.anthropic.com", "", ""},
		{Config{Provider: wire.ProviderVertex, Region: "europe-west1"}, "https://europe-west1-aiplatform.googleapis.com", "", ""},
		{Config{Provider: wire.ProviderVertex, Region: "GLOBAL"}, "https://aiplatform.googleapis.com", "", ""},
		{Config{Provider: wire.ProviderVertex}, "", "", "CLOUD_ML_REGION"},
		{Config{Provider: wire.ProviderVertex, Region: "evil.com/"}, "", "", "invalid region"},
		{Config{Provider: wire.ProviderBedrock, Region: "ap-northeast-1"}, "https://bedrock-runtime.ap-northeast-1.amazonaws.com", "https://bedrock.ap-northeast-1.amazonaws.com", ""},
		{Config{Provider: wire.ProviderBedrock}, "", "", "AWS_REGION"},
		{Config{Provider: wire.ProviderFoundry, FoundryResource: "acme"}, "https://acme.services.ai.azure.com", "", ""},
		{Config{Provider: wire.ProviderFoundry}, "", "", "--foundry-resource"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v %s", tt.cfg.Provider, tt.cfg.Region), func(t *testing.T) {
			rt, cp, err := DefaultUpstream(tt.cfg)
			if rt != tt.runtime || cp != tt.control || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("got %q %q %v, want %q %q %q", rt, cp, err, tt.runtime, tt.control, tt.err)
			}
		})
	}
}

// TestExplicitUpstream: --upstream takes every request, Bedrock's control-plane calls too, and
// the Anthropic API's transport is left as it is.
func TestExplicitUpstream(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awsSecret)
	u, _ := newUpstream(t, Config{Provider: wire.ProviderBedrock, Region: "us-east-1", Upstream: "https://gateway.example/bedrock"})
	if got := u.Route("/inference-profiles").String(); got != "https://gateway.example/bedrock" {
		t.Errorf("control plane %s", got)
	}
	a, _ := newUpstream(t, Config{})
	base := &http.Transport{}
	if a.Transport(base) != http.RoundTripper(base) {
		t.Error("the Anthropic API's transport was wrapped")
	}
}
