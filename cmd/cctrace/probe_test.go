package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestProbe(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		addr string
		ok   bool
		out  string
	}{
		{"answers", context.Background(), open.Addr().String(), true, ""},
		{"refused", context.Background(), closedAddr(t), false, "cctrace: warning: thing is not reachable (connect: connection refused): do this\n"},
		{"stopping", canceled, closedAddr(t), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if ok := probe(tt.ctx, &out, endpoint{addr: tt.addr, what: "thing", fix: "do this"}); ok != tt.ok || out.String() != tt.out {
				t.Errorf("probe = %v, printed %q; want %v, %q", ok, out.String(), tt.ok, tt.out)
			}
		})
	}
}

func TestCollectorEndpoint(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		addr string
		what string
	}{
		{"none", nil, "", ""},
		{"url", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, "collector:4317", "OpenTelemetry collector http://collector:4317 (OTEL_EXPORTER_OTLP_ENDPOINT)"},
		{"traces wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b"}, "b:4317", "OpenTelemetry collector https://b (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)"},
		{"host and port", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:14317"}, "localhost:14317", "OpenTelemetry collector localhost:14317 (OTEL_EXPORTER_OTLP_ENDPOINT)"},
		{"ipv6 host", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1]"}, "[::1]:4317", "OpenTelemetry collector http://[::1] (OTEL_EXPORTER_OTLP_ENDPOINT)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := collectorEndpoint(func(k string) string { return tt.env[k] })
			if ok != (tt.addr != "") || e.addr != tt.addr || e.what != tt.what {
				t.Errorf("collectorEndpoint = %+v, %v; want addr %q what %q", e, ok, tt.addr, tt.what)
			}
		})
	}
}

func TestUpstreamEndpointThroughProxy(t *testing.T) {
	u, _ := url.Parse("https://api.anthropic.com")
	proxy, _ := url.Parse("http://user:secret@proxy.internal:3128")
	e := upstreamEndpoint(u, http.ProxyURL(proxy))
	if direct := upstreamEndpoint(u, http.ProxyURL(nil)); direct.addr != "api.anthropic.com:443" {
		t.Errorf("without a proxy: %+v", direct)
	}
	if e.addr != "proxy.internal:3128" || !strings.Contains(e.what, "proxy http://user:xxxxx@proxy.internal:3128") || strings.Contains(e.what, "secret") {
		t.Errorf("endpoint = %+v, want the proxy, its password hidden", e)
	}
}

// TestStartupWarnings starts the real binary with an unreachable upstream and collector: each
// gets one line that says what to do, and nothing floods.
func TestStartupWarnings(t *testing.T) {
	upstream, collector := closedAddr(t), closedAddr(t)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--upstream", "http://"+upstream)
	cmd.Env = append(baseEnv(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+collector, "OTEL_BSP_SCHEDULE_DELAY=50")
	var out harness.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "two warnings", func() error {
		if strings.Count(out.String(), "cctrace: warning:") < 2 {
			return fmt.Errorf("cctrace printed:\n%s", out.String())
		}
		return nil
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	got := out.String()
	for _, want := range []string{
		"cctrace: warning: upstream http://" + upstream + " is not reachable (connect: connection refused): check --upstream",
		"cctrace: warning: OpenTelemetry collector http://" + collector + " (OTEL_EXPORTER_OTLP_ENDPOINT) is not reachable (connect: connection refused): start it, or unset OTEL_EXPORTER_OTLP_ENDPOINT",
		"cctrace: turns page http://127.0.0.1:",
	} {
		if strings.Count(got, want) != 1 {
			t.Errorf("want once %q in:\n%s", want, got)
		}
	}
}

// TestFlagMistakesAreOneLine checks that a wrong flag is one line, not the whole flag list.
func TestFlagMistakesAreOneLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad value", []string{"serve", "--max-sessions", "many"}, `cctrace serve: invalid value "many" for flag -max-sessions: parse error (see 'cctrace serve -h')`},
		{"unknown flag", []string{"run", "--bogus"}, "cctrace run: flag provided but not defined: -bogus (see 'cctrace run -h')"},
		{"listen without port", []string{"serve", "--listen", "8787"}, `cctrace serve: invalid --listen "8787": want HOST:PORT such as 127.0.0.1:8787 (port 0 picks a free one)`},
		{"trace ui", []string{"serve", "--trace-ui-url", "localhost:16686"}, `cctrace serve: invalid --trace-ui-url "localhost:16686": want the http(s) base URL of Jaeger`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cctrace(t, nil, tt.args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and one line starting %q", code, stderr, tt.want)
			}
		})
	}
	_, stderr, code := cctrace(t, nil, "serve", "-h")
	if code != 0 || !strings.Contains(stderr, "-trace-ui-url") || !strings.Contains(stderr, "Usage: cctrace serve [flags]") {
		t.Errorf("serve -h: exit %d\n%s", code, stderr)
	}
}
