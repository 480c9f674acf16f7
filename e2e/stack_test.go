// Package e2e runs the real Claude Code CLI through a real cctrace binary against the scripted
// fake Anthropic API, and checks what lands in a real Jaeger and a real Prometheus.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// apiKey is the dummy key Claude Code sends; it must appear in no output of cctrace.
const apiKey = "sk-ant-api03-e2eMARKER-3f9c1d7b2a"

// service is the OTel service name cctrace reports in these tests.
const service = "cctrace-e2e"

var cctraceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cctrace-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cctraceBin = filepath.Join(dir, "cctrace")
	// Built with -race: the end-to-end run doubles as a race check of the real binary.
	build := exec.Command("go", "build", "-race", "-o", cctraceBin, "../cmd/cctrace")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cctrace:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// switchableAPI is the fake upstream; each scenario installs its own script.
type switchableAPI struct {
	mu     sync.Mutex
	server *fakeapi.Server
	served []fakeapi.Served // of previous scenarios
}

func (s *switchableAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	srv := s.server
	s.mu.Unlock()
	srv.ServeHTTP(w, r)
}

func (s *switchableAPI) use(t *testing.T, scenario string, opts ...fakeapi.Option) *fakeapi.Server {
	t.Helper()
	script, err := fakeapi.Scenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return s.install(fakeapi.New(script, opts...))
}

// install makes srv the fake upstream from now on.
func (s *switchableAPI) install(srv *fakeapi.Server) *fakeapi.Server {
	s.mu.Lock()
	if s.server != nil {
		s.served = append(s.served, s.server.Served()...)
	}
	s.server = srv
	s.mu.Unlock()
	return srv
}

func (s *switchableAPI) allServed() []fakeapi.Served {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]fakeapi.Served(nil), s.served...)
	if s.server != nil {
		out = append(out, s.server.Served()...)
	}
	return out
}

// stack is everything one end-to-end run shares: Jaeger, Prometheus, the fake API and a
// cctrace serve process between Claude Code and the fake.
type stack struct {
	jaeger     *harness.Jaeger
	prom       *harness.Prometheus
	api        *switchableAPI
	proxyURL   string
	metricsURL string
	cctrace    *harness.Process
	claudeBin  string
}

func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackArgs(t)
}

// startStackArgs is startStack with further flags of cctrace serve.
func startStackArgs(t *testing.T, args ...string) *stack {
	t.Helper()
	s := &stack{claudeBin: harness.Claude(t), api: &switchableAPI{}}
	s.jaeger = harness.StartJaeger(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })

	proxyPort, metricsPort := harness.FreePort(t), harness.FreePort(t)
	s.proxyURL = fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	s.metricsURL = fmt.Sprintf("http://127.0.0.1:%d", metricsPort)
	s.cctrace = serveCctrace(t, append([]string{
		"--listen", fmt.Sprintf("127.0.0.1:%d", proxyPort),
		"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--upstream", "http://" + ln.Addr().String(),
		"--turn-idle-timeout", "2m"}, args...),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+s.jaeger.OTLPEndpoint(),
		"OTEL_SERVICE_NAME="+service,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)
	s.prom = harness.StartPrometheus(t, s.metricsURL+"/metrics")
	return s
}

// session is one Claude Code session: a HOME and a working directory of its own.
type session struct {
	home, dir string
	id        string   // the session id Claude Code reports
	env       []string // further environment of Claude Code, over the defaults (a key of its own)
	// bill is Claude Code's own bill of the session, as its last prompt reported it.
	bill cliBill
	// refusable: a prompt may end in an error Claude Code reports (exit 1), which claude returns
	// rather than failing the test.
	refusable bool
}

func newSession(t *testing.T) *session {
	t.Helper()
	return &session{home: t.TempDir(), dir: t.TempDir()}
}

// claudeResult is the part of `claude -p --output-format json` the tests read.
type claudeResult struct {
	cliBill
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	Result    string `json:"result"`
	NumTurns  int    `json:"num_turns"`
	// APIErrorStatus is the HTTP status of the API error that ended the prompt, if one did.
	APIErrorStatus int `json:"api_error_status"`
}

// claude runs one `claude -p` prompt of sess through cctrace (resuming the session after the
// first prompt) and returns what it reported.
func (s *stack) claude(t *testing.T, sess *session, prompt string, args ...string) claudeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := s.startClaude(t, ctx, sess, prompt, args...)
	return run.wait(t, sess)
}

// claudeRun is one `claude -p` prompt that runs.
type claudeRun struct {
	cmd            *exec.Cmd
	argv           []string
	stdout, stderr bytes.Buffer
}

// startClaude starts one `claude -p` prompt of sess through cctrace (resuming the session after
// the first prompt); its wait returns what it reported. ctx bounds it.
func (s *stack) startClaude(t *testing.T, ctx context.Context, sess *session, prompt string, args ...string) *claudeRun {
	t.Helper()
	argv := []string{"-p", prompt, "--output-format", "json"}
	if sess.id != "" {
		argv = append(argv, "--resume", sess.id)
	}
	argv = append(argv, args...)
	run := &claudeRun{argv: argv}
	cmd := exec.CommandContext(ctx, s.claudeBin, argv...)
	cmd.Dir = sess.dir
	cmd.Env = append(cleanEnv(),
		"HOME="+sess.home,
		"ANTHROPIC_BASE_URL="+s.proxyURL,
		"ANTHROPIC_API_KEY="+apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
	// Later entries win: a session's own key replaces the shared one.
	cmd.Env = append(cmd.Env, sess.env...)
	cmd.Stdout, cmd.Stderr = &run.stdout, &run.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatalf("claude %q: %v", argv, err)
	}
	run.cmd = cmd
	return run
}

// wait waits for the prompt to end and returns what Claude Code reported, which becomes sess's.
func (run *claudeRun) wait(t *testing.T, sess *session) claudeResult {
	t.Helper()
	err := run.cmd.Wait()
	if sess.refusable && err != nil {
		// The caller looks at what Claude Code reported.
		var res claudeResult
		_ = json.Unmarshal(bytes.TrimSpace(lastLine(run.stdout.Bytes())), &res)
		return res
	}
	if err != nil {
		t.Fatalf("claude %q: %v\nstdout: %s\nstderr: %s", run.argv, err, run.stdout.String(), run.stderr.String())
	}
	var res claudeResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(run.stdout.Bytes())), &res); err != nil {
		t.Fatalf("claude output is not JSON: %v\n%s", err, run.stdout.String())
	}
	if res.SessionID == "" {
		t.Fatalf("claude reported no session id:\n%s", run.stdout.String())
	}
	if sess.id != "" && res.SessionID != sess.id {
		t.Fatalf("--resume changed the session id from %s to %s", sess.id, res.SessionID)
	}
	sess.id = res.SessionID
	sess.bill = res.cliBill
	return res
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// cleanEnv is the test's environment without anything that would steer Claude Code or the OTel
// SDK elsewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "OTEL_") || strings.HasPrefix(name, "CLAUDE") || strings.HasPrefix(name, "CCTRACE_") || name == "HOME" || name == "XDG_STATE_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// serveCctrace starts `cctrace serve` with args and env (over cleanEnv), waits until its
// --metrics-listen address answers /healthz, and stops it when the test ends.
func serveCctrace(t *testing.T, args []string, env ...string) *harness.Process {
	t.Helper()
	p := harness.Start(t, "cctrace", append(cleanEnv(), env...), cctraceBin, append([]string{"serve"}, args...)...)
	metrics := ""
	for i, a := range args {
		if a == "--metrics-listen" {
			metrics = args[i+1]
		}
	}
	if err := p.WaitReady(context.Background(), "http://"+metrics+"/healthz"); err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
