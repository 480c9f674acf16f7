// Package harness starts the real external components that cctrace's end-to-end tests talk to
// (Jaeger v2, Prometheus, the Claude Code CLI, an OpenTelemetry Collector, nginx) and reads back
// what they recorded.
//
// Binaries are found through environment variables that scripts/test.sh exports after
// installing them: CCTRACE_JAEGER_BIN, CCTRACE_PROMETHEUS_BIN, CCTRACE_PROMTOOL_BIN,
// CCTRACE_ALERTMANAGER_BIN, CCTRACE_AMTOOL_BIN, CCTRACE_CLAUDE_BIN, CCTRACE_OTELCOL_BIN and
// CCTRACE_NGINX_BIN. A test that needs one
// calls Require: outside CI a missing binary skips the test, under CI=true it fails it.
//
// Every server binds to 127.0.0.1 on ports chosen by FreePort, writes its output to a log file in
// the test's temporary directory (printed when the test fails), and is stopped, together with
// its whole process group, by t.Cleanup.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Environment variables that name the binaries of the external components.
const (
	EnvJaeger       = "CCTRACE_JAEGER_BIN"       // Jaeger v2 all-in-one (cmd/jaeger)
	EnvPrometheus   = "CCTRACE_PROMETHEUS_BIN"   // prometheus server
	EnvPromtool     = "CCTRACE_PROMTOOL_BIN"     // promtool
	EnvAlertmanager = "CCTRACE_ALERTMANAGER_BIN" // alertmanager (Debian: prometheus-alertmanager)
	EnvAmtool       = "CCTRACE_AMTOOL_BIN"       // amtool
	EnvClaude       = "CCTRACE_CLAUDE_BIN"       // Claude Code CLI native binary
	EnvOtelcol      = "CCTRACE_OTELCOL_BIN"      // OpenTelemetry Collector built by ocb from tools/otelcol
	EnvNginx        = "CCTRACE_NGINX_BIN"        // nginx (Debian: nginx-light)
	EnvPostgres     = "CCTRACE_POSTGRES_BIN"     // the PostgreSQL server, initdb beside it (Debian: postgresql)
)

// InCI reports whether the CI environment variable is set to a true value ("true", "1", …).
// Under CI a missing component is a test failure, not a skip.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// Require returns the path of the binary named by the environment variable envVar; what
// describes the component for the message. When envVar is unset it skips the test, or fails it
// under CI=true. When envVar is set but does not name an executable file the test always fails:
// the setup is broken, not absent.
func Require(t testing.TB, envVar, what string) string {
	t.Helper()
	path := os.Getenv(envVar)
	if path == "" {
		msg := fmt.Sprintf("%s not available: set %s (bash scripts/test.sh installs it and exports it)", what, envVar)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", what, envVar, path, err)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s: %s=%q is not an executable file", what, envVar, path)
	}
	return path
}

// Claude returns the path of the Claude Code CLI binary from CCTRACE_CLAUDE_BIN, with the
// skip/fail rule of Require.
func Claude(t testing.TB) string {
	t.Helper()
	return Require(t, EnvClaude, "Claude Code CLI")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process may
// take it before the caller binds it; the Start functions retry with new ports when a server
// exits during start-up.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := PickFreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// PickFreePort is FreePort for code outside a test.
func PickFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

// Patience is how long a test waits for a condition before it fails. It is generous because a
// loaded 2-core CI machine runs everything many times slower than a quiet one; a condition that
// holds ends the wait as soon as it is seen, so a passing test never waits it out.
const Patience = 3 * time.Minute

// pollEvery is how often a wait checks its condition.
const pollEvery = 100 * time.Millisecond

// Eventually checks cond until it returns nil, and fails the test with what and cond's last
// error once Patience has passed.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	if err := poll(context.Background(), Patience, nil, cond); err != nil {
		t.Fatalf("waited %v for %s: %v", Patience, what, err)
	}
}

// poll checks cond until it returns nil, timeout passes (returning cond's last error), ctx ends,
// or exited (when not nil) is closed because a server process ended (returning errExited).
func poll(ctx context.Context, timeout time.Duration, exited <-chan struct{}, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (last: %v)", errExited, err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// WaitHTTP polls url with GET until it answers 200 OK, and fails the test if that has not
// happened within Patience.
func WaitHTTP(t testing.TB, url string) {
	t.Helper()
	if err := waitHTTP(context.Background(), url, nil); err != nil {
		t.Fatal(err)
	}
}

// waitHTTP polls url until it answers 200, Patience passes, ctx ends, or exited (when not nil)
// is closed because the server process ended.
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	err := poll(ctx, Patience, exited, func() error {
		status, err := getStatus(client, url)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d", status)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", url, err)
	}
	return nil
}

var errExited = errors.New("server process exited")

func getStatus(client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("requesting %s: %w", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("reading %s: %w", url, err)
	}
	return resp.StatusCode, nil
}

// GetBody fetches url and returns the body of a 200 answer.
func GetBody(url string) ([]byte, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("requesting %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %.512s", url, resp.StatusCode, body)
	}
	return body, nil
}

// Buffer is a bytes.Buffer safe for concurrent writers, such as a process's stdout and stderr or
// a logger used by several goroutines. The zero value is an empty buffer.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
