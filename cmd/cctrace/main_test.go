package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cctrace-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "cctrace")
	// The fingerprint secret cctrace keeps goes to the test's directory, not the user's.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cctrace: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cctrace runs the binary to completion with a clean environment plus env.
func cctrace(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(baseEnv(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("cctrace %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// execCctrace is the binary's command with a clean environment, for a test to run its way.
func execCctrace(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = baseEnv()
	return c
}

// baseEnv is the test's environment without CCTRACE_*, OTEL_* and ANTHROPIC_* variables, and
// with history in memory: a test's cctrace starts with no sessions of another's unless it asks
// for a store (CCTRACE_HISTORY in its own env, which comes later and wins).
func baseEnv() []string {
	env := []string{"CCTRACE_HISTORY=memory"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CCTRACE_") || strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "ANTHROPIC_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func TestUsageErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no command", nil, nil, 2, "Usage:"},
		{"unknown command", nil, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"run without command", nil, []string{"run"}, 2, "no command given"},
		{"run unknown program", nil, []string{"run", "--", "no-such-program-xyz"}, 127, "command not found"},
		{"bad upstream", nil, []string{"serve", "--upstream", "ftp://x"}, 2, "invalid --upstream"},
		{"bad duration", nil, []string{"serve", "--shutdown-grace", "soon"}, 2, "invalid value"},
		{"bad env", []string{"CCTRACE_MAX_SESSIONS=many"}, []string{"serve"}, 2, "invalid CCTRACE_MAX_SESSIONS"},
		{"port in use", nil, []string{"serve", "--listen", busy.Addr().String(), "--metrics-listen", "127.0.0.1:0"}, 1, "address already in use"},
		{"serve extra args", nil, []string{"serve", "claude"}, 2, "did you mean 'cctrace run -- claude'"},
		{"bad provider", nil, []string{"serve", "--provider", "azure"}, 2, "invalid --provider"},
		{"vertex without region", nil, []string{"serve", "--provider", "vertex"}, 1, "vertex: no region: set --region or CLOUD_ML_REGION"},
		{"foundry without resource", []string{"CCTRACE_FOUNDRY_API_KEY=k"}, []string{"serve", "--provider", "foundry"}, 1, "foundry: no resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cctrace(t, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, tt.code, tt.want)
			}
			if first, _, _ := strings.Cut(stderr, "\n"); tt.want != "Usage:" && !strings.Contains(first, tt.want) {
				t.Errorf("the first line does not say it: %q", first)
			}
		})
	}
}

// TestRunSetsTheProvidersEnvironment: cctrace run --provider puts the command in that
// provider's mode, pointed at the proxy, with its own authentication off; the Foundry key cctrace
// uses is neither passed on nor printed.
func TestRunSetsTheProvidersEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	const key = "SECRET-foundry-key-for-run"
	_, stderr, code := cctrace(t, []string{"CCTRACE_FOUNDRY_API_KEY=" + key, "CCTRACE_IDENTITY_SECRET=SECRET-identity-secret-for-run-0123456789"},
		"run", "--provider", "foundry", "--upstream", "http://127.0.0.1:9", "--",
		"sh", "-c", `printf '%s %s %s %s %s' "$CLAUDE_CODE_USE_FOUNDRY" "$ANTHROPIC_FOUNDRY_BASE_URL" "$CLAUDE_CODE_SKIP_FOUNDRY_AUTH" "$ANTHROPIC_BASE_URL" "$CCTRACE_FOUNDRY_API_KEY$CCTRACE_IDENTITY_SECRET" > `+out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^1 http://127\.0\.0\.1:\d+/anthropic 1  $`).Match(got) {
		t.Errorf("the command's environment (cctrace's secrets left out): %q", got)
	}
	if strings.Contains(stderr, key) {
		t.Errorf("the key was printed:\n%s", stderr)
	}
}

func TestRunPassesExitStatusAndBaseURL(t *testing.T) {
	out := filepath.Join(t.TempDir(), "url")
	_, stderr, code := cctrace(t, []string{"ANTHROPIC_BASE_URL=http://elsewhere.invalid"},
		"run", "--", "sh", "-c", `printf %s "$ANTHROPIC_BASE_URL" > `+out+`; exit 3`)
	if code != 3 {
		t.Fatalf("exit %d, want the command's 3\n%s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).Match(got) {
		t.Fatalf("ANTHROPIC_BASE_URL = %q, want cctrace's loopback proxy", got)
	}
}

// TestRunClientTelemetry checks the command's environment with --client-telemetry: Claude
// Code's tracing on, exporting where cctrace does; and the refusal when cctrace exports nowhere.
func TestRunClientTelemetry(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	_, stderr, code := cctrace(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_SERVICE_NAME=cctrace-test"},
		"run", "--client-telemetry", "--", "sh", "-c", "env > "+out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := "\n" + string(raw)
	for _, want := range []string{"CLAUDE_CODE_ENABLE_TELEMETRY=1", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1", "CLAUDE_CODE_PROPAGATE_TRACEPARENT=1",
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
		"CCTRACE_URL=http://127.0.0.1:", "ANTHROPIC_BASE_URL=http://127.0.0.1:"} {
		if !strings.Contains(env, "\n"+want) {
			t.Errorf("the command's environment lacks %s", want)
		}
	}
	if strings.Contains(env, "\nOTEL_SERVICE_NAME=") {
		t.Error("the command got cctrace's OTEL_SERVICE_NAME")
	}

	_, stderr, code = cctrace(t, nil, "run", "--client-telemetry", "--", "true")
	if code != 2 || !strings.Contains(stderr, "no OTLP endpoint") {
		t.Errorf("without an endpoint: exit %d\n%s", code, stderr)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(bin, "run", "--", "sh", "-c", `trap 'exit 7' TERM; touch `+ready+`; while :; do sleep 0.05; done`)
	cmd.Env = baseEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, func() bool { _, err := os.Stat(ready); return err == nil })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(harness.Patience):
		t.Fatalf("cctrace run did not end after SIGTERM\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("exit %d, want 7 (the command's own exit after it got SIGTERM)\n%s", code, stderr.String())
	}
}

// TestServeShutdownLetsStreamsFinish sends SIGTERM while a slow stream is in flight: the stream
// must reach its end intact, the turn must be reported, and cctrace must exit 0.
func TestServeShutdownLetsStreamsFinish(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, messageStartEvent)
		fl.Flush()
		<-release
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer upstream.Close()
	defer once.Do(func() { close(release) })

	proxyAddr, metricsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", proxyAddr, "--metrics-listen", metricsAddr, "--upstream", upstream.URL)
	cmd.Env = baseEnv()
	var out harness.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	resp, br := openStream(t, proxyAddr, "shutdown-session")
	defer resp.Body.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(out.String(), "shutting down") })
	// New connections are refused while the stream goes on.
	if c, err := net.DialTimeout("tcp", proxyAddr, time.Second); err == nil {
		c.Close()
		t.Error("proxy still accepts connections after SIGTERM")
	}
	once.Do(func() { close(release) })
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("stream cut at shutdown: %v", err)
	}
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("stream did not reach message_stop: %q", rest)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cctrace exited with %v\n%s", err, out.String())
		}
	case <-time.After(harness.Patience):
		t.Fatalf("cctrace did not exit\n%s", out.String())
	}
	if !strings.Contains(out.String(), "turn 1") || !strings.Contains(out.String(), "end_turn") {
		t.Errorf("no line for the finished turn:\n%s", out.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	harness.Eventually(t, "the condition", func() error {
		if !ok() {
			return errors.New("not met")
		}
		return nil
	})
}

// messageStartEvent is the first event of the streams these tests' upstreams send.
const messageStartEvent = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"

// openStream sends a streaming Messages request of session through the proxy at proxyAddr and
// reads its first line, which must open message_start; the caller reads the rest and closes
// the body.
func openStream(t *testing.T, proxyAddr, session string) (*http.Response, *bufio.Reader) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-6","stream":true,"max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+proxyAddr+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Claude-Code-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "event: message_start") {
		resp.Body.Close()
		t.Fatalf("first line %q, %v", line, err)
	}
	return resp, br
}
