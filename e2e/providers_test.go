package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// Credentials the provider tests hand cctrace. Each must show up in no output: not Claude
// Code's, not cctrace's, not a span.
const (
	vertexToken     = "ya29.e2eMARKER-vertex-token"
	awsAccessKeyID  = "AKIAE2EMARKER0000000"
	awsSecretKey    = "e2eMARKER/aws-secret-access-key+0000000000"
	foundryAPIKey   = "e2eMARKER-foundry-api-key"
	wrongCredential = "e2eMARKER-wrong"
)

// providerCase is one cloud provider as cctrace and Claude Code are set up for it.
type providerCase struct {
	provider wire.Provider
	model    string // the model Claude Code asks for in that mode
	// semconv is the gen_ai.provider.name the spans must carry.
	semconv string
	// auth is what the fake demands; cctraceEnv gives cctrace the right credential, wrongEnv a
	// wrong one; both get the metadata server's address (Vertex AI's ADC).
	auth                 fakeapi.Auth
	cctraceEnv, wrongEnv func(metadata string) []string
	// claudeEnv puts Claude Code in the provider's mode, with cctrace at proxy.
	claudeEnv func(proxy string) []string
	// premium is what the provider bills beyond Claude Code's own price of the model, which is
	// the Anthropic API's wherever the request goes: 1.1 on a regional endpoint (the pricing
	// page's, which cctrace's price table follows), else 1.
	premium float64
}

func providerCases() []providerCase {
	awsCreds := aws.Credentials{AccessKeyID: awsAccessKeyID, SecretAccessKey: awsSecretKey}
	// Keep the AWS SDK away from this machine's files and from instance metadata.
	awsBase := func(home string) []string {
		return []string{"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}
	}
	return []providerCase{
		{
			provider: wire.ProviderVertex, model: "claude-opus-5-5", semconv: "gcp.vertex_ai",
			// us-east5 is a regional endpoint: Vertex AI bills claude-opus-5-5 there at 110%.
			premium: 1.1,
			auth:    fakeapi.Auth{BearerToken: vertexToken},
			cctraceEnv: func(metadata string) []string {
				return []string{"GCE_METADATA_HOST=" + metadata, "CLOUD_ML_REGION=us-east5"}
			},
			wrongEnv: func(metadata string) []string {
				return []string{"GCE_METADATA_HOST=" + metadata, "CLOUD_ML_REGION=us-east5"}
			},
			claudeEnv: func(proxy string) []string {
				return []string{"CLAUDE_CODE_USE_VERTEX=1", "ANTHROPIC_VERTEX_BASE_URL=" + proxy + "/v1", "CLAUDE_CODE_SKIP_VERTEX_AUTH=1",
					"ANTHROPIC_VERTEX_PROJECT_ID=cctrace-e2e", "CLOUD_ML_REGION=us-east5"}
			},
		},
		{
			provider: wire.ProviderBedrock, model: "us.anthropic.claude-opus-5-5", semconv: "aws.bedrock",
			// us. is a geographic inference profile: Bedrock bills claude-opus-5-5 there at 110%.
			premium: 1.1,
			auth:    fakeapi.Auth{AWS: &awsCreds, AWSRegion: "us-east-1"},
			cctraceEnv: func(string) []string {
				return append(awsBase("/nonexistent"), "AWS_ACCESS_KEY_ID="+awsAccessKeyID, "AWS_SECRET_ACCESS_KEY="+awsSecretKey)
			},
			wrongEnv: func(string) []string {
				return append(awsBase("/nonexistent"), "AWS_ACCESS_KEY_ID="+awsAccessKeyID, "AWS_SECRET_ACCESS_KEY="+wrongCredential)
			},
			claudeEnv: func(proxy string) []string {
				return []string{"CLAUDE_CODE_USE_BEDROCK=1", "ANTHROPIC_BEDROCK_BASE_URL=" + proxy, "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1", "AWS_REGION=us-east-1"}
			},
		},
		{
			provider: wire.ProviderFoundry, model: "claude-sonnet-4-5", semconv: "azure.ai.inference",
			premium:    1, // Foundry has no regional premium
			auth:       fakeapi.Auth{APIKey: foundryAPIKey},
			cctraceEnv: func(string) []string { return []string{"CCTRACE_FOUNDRY_API_KEY=" + foundryAPIKey} },
			wrongEnv:   func(string) []string { return []string{"CCTRACE_FOUNDRY_API_KEY=" + wrongCredential} },
			claudeEnv: func(proxy string) []string {
				return []string{"CLAUDE_CODE_USE_FOUNDRY=1", "ANTHROPIC_FOUNDRY_BASE_URL=" + proxy + "/anthropic", "CLAUDE_CODE_SKIP_FOUNDRY_AUTH=1"}
			},
		},
	}
}

// TestProvidersThroughCctrace runs the real Claude Code CLI in its Vertex AI, Bedrock and
// Foundry modes through `cctrace serve --provider …` against a fake of each cloud (checking the
// bearer token, the SigV4 signature or the api-key, and answering Bedrock in event-stream
// frames), and wants the trace tree and token totals of the Anthropic API's tool_roundtrip.
// With a wrong credential Claude Code must show a clear error and cctrace log one; with none
// at all cctrace answers itself. No credential may appear in any output.
func TestProvidersThroughCctrace(t *testing.T) {
	claudeBin := harness.Claude(t)
	s := &stack{jaeger: harness.StartJaeger(t), claudeBin: claudeBin}
	// Application Default Credentials on "Google Cloud": the metadata server, on loopback.
	goodMetadata := serveLoopback(t, metadataServer(vertexToken))
	wrongMetadata := serveLoopback(t, metadataServer(wrongCredential))

	for _, pc := range providerCases() {
		t.Run(pc.provider.String(), func(t *testing.T) {
			script, err := fakeapi.Scenario("tool_roundtrip")
			if err != nil {
				t.Fatal(err)
			}
			api := fakeapi.New(script, fakeapi.WithProvider(pc.provider, pc.auth))
			upstream := serveLoopback(t, api)

			t.Run("traced", func(t *testing.T) {
				cc := startCctrace(t, pc.provider, "http://"+upstream, s.jaeger.OTLPEndpoint(), pc.cctraceEnv(goodMetadata))
				out, err := runClaudeIn(t, claudeBin, pc.claudeEnv(cc.proxyURL), "Run echo hello-from-fakeapi", "--allowedTools", "Bash")
				if err != nil {
					t.Fatalf("claude: %v\n%s", err, out)
				}
				var res claudeResult
				if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &res); err != nil || res.SessionID == "" || res.IsError {
					t.Fatalf("claude output: %v\n%s", err, out)
				}
				traces := s.sessionTraces(t, res.SessionID, 1, 4)
				want := strings.ReplaceAll(`invoke_agent claude-code [end_turn]
  chat MODEL [turn]
  execute_tool Bash
  chat MODEL [tool_results]`, "MODEL", pc.model)
				if got := tree(traces); got != want {
					t.Errorf("span tree:\n%s\nwant (tool_roundtrip's):\n%s", got, want)
				}
				checkTokens(t, traces, api.Served())
				for _, tr := range traces {
					for _, sp := range tr.Spans {
						if strings.HasPrefix(sp.OperationName, "execute_tool") {
							continue
						}
						if sp.ServiceName != service || sp.Tags["gen_ai.conversation.id"] != res.SessionID || sp.Tags["gen_ai.provider.name"] != pc.semconv {
							t.Errorf("span %s: service %q, conversation %v, gen_ai.provider.name %v, want %s",
								sp.OperationName, sp.ServiceName, sp.Tags["gen_ai.conversation.id"], sp.Tags["gen_ai.provider.name"], pc.semconv)
						}
						if strings.HasPrefix(sp.OperationName, "chat ") && (sp.Tags["span.kind"] != "client" || sp.Tags["gen_ai.request.model"] != pc.model) {
							t.Errorf("span %s: kind %v, model %v", sp.OperationName, sp.Tags["span.kind"], sp.Tags["gen_ai.request.model"])
						}
					}
				}
				checkProviderMetrics(t, cc.metricsURL, pc.model, api.Served())
				checkBill(t, cc.metricsURL, bill{}, expected(t, res.cliBill, api.Served(), pc.premium))
				dump, _ := json.Marshal(traces)
				noCredentials(t, "Claude Code's output", out)
				noCredentials(t, "the spans", dump)
				cc.Stop()
				noCredentials(t, "cctrace's output", []byte(cc.Output()))
			})

			t.Run("wrong credential", func(t *testing.T) {
				cc := startCctrace(t, pc.provider, "http://"+upstream, s.jaeger.OTLPEndpoint(), pc.wrongEnv(wrongMetadata))
				// Claude Code retries a refused Bedrock request for minutes by default.
				out, err := runClaudeIn(t, claudeBin, append(pc.claudeEnv(cc.proxyURL), "CLAUDE_CODE_MAX_RETRIES=0"), "Say hello")
				if err == nil {
					t.Fatalf("claude succeeded with a wrong credential:\n%s", out)
				}
				if !bytes.Contains(out, []byte("API Error: 40")) || !bytes.Contains(out, []byte("fakeapi: wrong")) && !bytes.Contains(out, []byte("signature mismatch")) {
					t.Errorf("Claude Code's error does not say what the upstream refused:\n%s", out)
				}
				waitForLine(t, cc.Process, "the upstream refused cctrace's credentials")
				noCredentials(t, "Claude Code's output", out)
				cc.Stop()
				noCredentials(t, "cctrace's output", []byte(cc.Output()))
			})
		})
	}

	// Without any AWS credential cctrace cannot sign: it says so at start, and answers Claude
	// Code itself with an error it shows at once.
	t.Run("bedrock without credentials", func(t *testing.T) {
		pc := providerCases()[1]
		script, _ := fakeapi.Scenario("tool_roundtrip")
		api := fakeapi.New(script, fakeapi.WithProvider(pc.provider, pc.auth))
		upstream := serveLoopback(t, api)
		cc := startCctrace(t, pc.provider, "http://"+upstream, s.jaeger.OTLPEndpoint(),
			[]string{"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"})
		waitForLine(t, cc.Process, "cctrace: warning: no upstream credentials: bedrock:")
		out, err := runClaudeIn(t, claudeBin, pc.claudeEnv(cc.proxyURL), "Say hello")
		if err == nil || !bytes.Contains(out, []byte("no bedrock credentials")) || !bytes.Contains(out, []byte("AWS_ACCESS_KEY_ID")) {
			t.Errorf("claude (err %v) did not show cctrace's error naming the fix:\n%s", err, out)
		}
		for _, sv := range api.Served() {
			if strings.HasPrefix(sv.Path, "/model/") {
				t.Errorf("an unsigned request reached the upstream: %s", sv.Path)
			}
		}
		waitForLine(t, cc.Process, "cannot authenticate to the upstream")
		cc.Stop()
	})
}

// metadataServer fakes the Google Cloud metadata server's token endpoint, as Application Default
// Credentials reach it through GCE_METADATA_HOST.
func metadataServer(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"expires_in":3600,"token_type":"Bearer"}`, token)
		case "/computeMetadata/v1/project/project-id":
			fmt.Fprint(w, "cctrace-e2e")
		default:
			http.NotFound(w, r)
		}
	})
}

// serve serves h on a loopback port until the test ends and returns its host:port.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// providerCctrace is one `cctrace serve` process.
type providerCctrace struct {
	*harness.Process
	proxyURL   string
	metricsURL string
}

// startCctrace starts `cctrace serve --provider p` forwarding to upstream, exporting to otlp, in
// a HOME of its own with env added, and stops it when the test ends.
func startCctrace(t *testing.T, p wire.Provider, upstream, otlp string, env []string) *providerCctrace {
	t.Helper()
	proxyPort, metricsPort := harness.FreePort(t), harness.FreePort(t)
	return &providerCctrace{
		Process: serveCctrace(t, []string{"--provider", p.String(),
			"--listen", fmt.Sprintf("127.0.0.1:%d", proxyPort),
			"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", metricsPort),
			"--upstream", upstream},
			append([]string{"HOME=" + t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp,
				"OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=100"}, env...)...),
		proxyURL:   fmt.Sprintf("http://127.0.0.1:%d", proxyPort),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d", metricsPort),
	}
}

// runClaudeIn runs one `claude -p` prompt in a fresh HOME and working directory with env and
// returns its stdout and stderr together.
func runClaudeIn(t *testing.T, bin string, env []string, prompt string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-p", prompt, "--output-format", "json"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(cleanEnv(), "HOME="+t.TempDir(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"), env...)
	var out harness.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	return []byte(out.String()), err
}

// waitForLine waits until out holds text.
func waitForLine(t *testing.T, out *harness.Process, text string) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("cctrace to say %q", text), func() error {
		if !strings.Contains(out.Output(), text) {
			return fmt.Errorf("it said:\n%s", out.Output())
		}
		return nil
	})
}

// noCredentials fails the test when any credential the tests handed out is in b.
func noCredentials(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, secret := range []string{vertexToken, awsSecretKey, foundryAPIKey, wrongCredential} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("a credential appears in %s", what)
		}
	}
}

// checkProviderMetrics reads cctrace's /metrics and wants the tokens the fake served, by type,
// under the model Claude Code asked for, its requests counted, and their cost priced.
func checkProviderMetrics(t *testing.T, metricsURL, model string, served []fakeapi.Served) {
	t.Helper()
	var want fakeapi.Usage
	requests := 0
	for _, sv := range served {
		if wire.ClassifyRoute(sv.Method, sv.Path).Endpoint == wire.EndpointMessages {
			want = want.Add(sv.Usage)
			requests++
		}
	}
	harness.Eventually(t, fmt.Sprintf("the metrics of %s to count what the fake served (%d requests)", model, requests), func() error {
		b, err := harness.GetBody(metricsURL + "/metrics")
		if err != nil {
			return err
		}
		body := string(b)
		got := map[string]float64{}
		for typ, n := range map[string]int{"input": want.InputTokens, "output": want.OutputTokens, "cache_read": want.CacheReadInputTokens, "cache_creation": want.CacheCreationInputTokens} {
			if v := metricSum(body, "cctrace_tokens_total", fmt.Sprintf("model=%q", model), fmt.Sprintf("type=%q", typ)); v != float64(n) {
				got["tokens "+typ] = v
			}
		}
		if v := metricSum(body, "cctrace_cost_usd_total", fmt.Sprintf("model=%q", model)); v <= 0 {
			got["cost"] = v
		}
		n := metricSum(body, "cctrace_requests_total", `code="200"`, fmt.Sprintf("model=%q", model))
		if n != float64(requests) {
			got["requests"] = n
		}
		if len(got) > 0 {
			return fmt.Errorf("they differ: %v", got)
		}
		return nil
	})
}

// metricSum sums the samples of family in a /metrics body whose labels include want (other
// labels, such as the person and team, are summed over); -1 when there is none.
func metricSum(body, family string, want ...string) float64 {
	sum, found := 0.0, false
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(family)+`\{([^}]*)\} ([0-9.e+-]+)$`).FindAllStringSubmatch(body, -1) {
		labels := "," + m[1] + ","
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, ","+w+",")
		}
		if ok {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}
