package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
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

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// served is a cctrace serve process started by startServe.
type served struct {
	proxyAddr, metricsAddr string
	out                    *harness.Buffer
	cmd                    *exec.Cmd
	stopped                bool
}

// startServe runs cctrace serve with args (listen addresses are added) and waits until it is
// ready. The process is stopped with SIGTERM when the test ends, if the test has not.
func startServe(t *testing.T, env []string, args ...string) *served {
	t.Helper()
	s := &served{proxyAddr: freeAddr(t), metricsAddr: freeAddr(t), out: &harness.Buffer{}}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", s.proxyAddr, "--metrics-listen", s.metricsAddr}, args...)...)
	// A state directory of its own: what one cctrace keeps there (its turns in flight at a stop)
	// is not another test's.
	s.cmd.Env = append(append(baseEnv(), "XDG_STATE_HOME="+t.TempDir()), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.stopped {
			s.stop(t)
		}
	})
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + s.metricsAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil || s.cmd.ProcessState != nil
	})
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.stopped = true
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cctrace exited with %v\n%s", err, s.out.String())
		}
	case <-time.After(harness.Patience):
		_ = s.cmd.Process.Kill()
		<-done
		t.Errorf("cctrace did not exit after SIGTERM\n%s", s.out.String())
	}
}

// otlpCollector is an in-process OTLP gRPC trace receiver that keeps every request it gets.
type otlpCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu   sync.Mutex
	raw  [][]byte
	reqs []*coltracepb.ExportTraceServiceRequest
	span int
}

func (c *otlpCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, b)
	c.reqs = append(c.reqs, req)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.span += len(ss.Spans)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) received() ([]byte, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.raw, nil), c.span
}

// startOTLPCollector serves a collector on loopback until the test ends and returns its endpoint.
func startOTLPCollector(t *testing.T) (*otlpCollector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &otlpCollector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return c, "http://" + lis.Addr().String()
}

// leakMarker is inside every credential and secret the secrets test sends.
const leakMarker = "LEAKMARKER"

// TestSecretsNeverLeave drives turns through a real cctrace with content capture on, sending
// credentials in every header Claude Code may use and secrets of every common kind in prompts,
// tool input and tool output, then scans every output cctrace has for them: its stdout and
// stderr, the --log file, the exported spans, /metrics, /api/turns and every turns page.
func TestSecretsNeverLeave(t *testing.T) {
	col, endpoint := startOTLPCollector(t)
	secretText := strings.Join([]string{
		"sk-ant-api03-" + leakMarker + "abcdefghijklmnop",
		"sk-proj-" + leakMarker + "abcdefghijklmnopqrstu",
		"AKIA" + leakMarker + "123456",
		"aws_secret_access_key = " + leakMarker + strings.Repeat("A", 30),
		"ghp_" + leakMarker + strings.Repeat("x", 30),
		"AIza" + leakMarker + strings.Repeat("y", 25),
		`{"private_key": "` + leakMarker + `"}`,
		"-----BEGIN RSA PRIVATE KEY-----\\n" + leakMarker + "\\n-----END RSA PRIVATE KEY-----",
		"Authorization: Bearer " + leakMarker + "0123456789abcdef",
		"password=" + leakMarker,
	}, " and ")

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Request-Id", "req_1")
		stop, content := "end_turn", `{"type":"text","text":""}`
		if !bytes.Contains(body, []byte("tool_result")) {
			stop, content = "tool_use", `{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}`
		}
		input := ""
		if stop == "tool_use" {
			in, _ := json.Marshal(map[string]string{"command": "echo " + secretText})
			q, _ := json.Marshal(string(in))
			input = `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(q) + "}}\n\n"
		}
		fmt.Fprintf(w, messageStartEvent+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":%s}\n\n%s"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":%q},\"usage\":{\"output_tokens\":9}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", content, input, stop)
	}))
	defer upstream.Close()

	logFile := filepath.Join(t.TempDir(), "cctrace.log")
	s := startServe(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
		"OTEL_BSP_SCHEDULE_DELAY=50",
	}, "--upstream", strings.Replace(upstream.URL, "http://", "http://gateway:"+leakMarker+"@", 1), "--capture-content", "--log", logFile, "--log-level", "debug")

	prompt, _ := json.Marshal("please use " + secretText)
	toolOut, _ := json.Marshal("output: " + secretText)
	requests := []string{
		`{"model":"claude-sonnet-4-6","stream":true,"max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":` + string(prompt) + `}]}`,
		`{"model":"claude-sonnet-4-6","stream":true,"max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":` + string(prompt) + `},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(toolOut) + `}]}]}`,
	}
	for i, headers := range []map[string]string{
		{"X-Api-Key": "sk-ant-api03-" + leakMarker + "-key"},
		{"Authorization": "Bearer sk-ant-oat01-" + leakMarker + "-oauth"},
		{"Cookie": "session=" + leakMarker + "-cookie", "Proxy-Authorization": "Basic " + leakMarker},
	} {
		for _, body := range requests {
			req, _ := http.NewRequest(http.MethodPost, "http://"+s.proxyAddr+"/v1/messages?beta=true", strings.NewReader(body))
			req.Header.Set("X-Claude-Code-Session-Id", fmt.Sprintf("secrets-session-%d", i))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || !bytes.Contains(b, []byte("message_stop")) {
				t.Fatalf("response %d: %v %q", resp.StatusCode, err, b)
			}
			resp.Body.Close()
		}
	}

	outputs := map[string][]byte{}
	get := func(path string) []byte {
		resp, err := http.Get("http://" + s.metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		outputs[path] = b
		return b
	}
	waitFor(t, func() bool { return strings.Count(string(get("/api/turns")), `"trace_id"`) >= 3 })
	get("/metrics")
	pages := []string{"/"}
	for i := 0; i < len(pages) && i < 50; i++ {
		for _, m := range regexp.MustCompile(`href="(/(?:sessions|turns)/[^"]+)"`).FindAllSubmatch(get(pages[i]), -1) {
			if p := string(m[1]); !contains(pages, p) {
				pages = append(pages, p)
			}
		}
	}
	if len(pages) < 4 {
		t.Errorf("crawled only %v of the turns page", pages)
	}
	s.stop(t)
	outputs["stdout and stderr"] = []byte(s.out.String())
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	outputs["--log file"] = logs
	spans, n := col.received()
	outputs["exported spans"] = spans
	if n < 9 {
		t.Errorf("collector got %d spans, want the 3 turns' spans", n)
	}
	if !bytes.Contains(spans, []byte("[REDACTED]")) {
		t.Error("no scrubbed preview in the spans: is content capture on?")
	}
	for name, b := range outputs {
		if i := bytes.Index(b, []byte(leakMarker)); i >= 0 {
			t.Errorf("a secret reached %s: …%s…", name, b[max(0, i-80):min(len(b), i+40)])
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and returns their paths and a
// pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "cctrace test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestListenerTLS serves the proxy over HTTPS with --tls-cert and --tls-key: a client that trusts
// the certificate reaches the upstream over HTTP/1.1 and HTTP/2, and plain HTTP is refused.
func TestListenerTLS(t *testing.T) {
	next := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/stream" {
			// The second event waits until the client has the first: streaming, not buffering.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	s := startServe(t, nil, "--upstream", upstream.URL, "--tls-cert", certFile, "--tls-key", keyFile)
	// serve prints its base URL after both listeners run, so /healthz, which startServe waits
	// for, can answer a moment before the line is out.
	want := "ANTHROPIC_BASE_URL=https://" + s.proxyAddr
	harness.Eventually(t, "cctrace to print its https base URL", func() error {
		if !strings.Contains(s.out.String(), want) {
			return fmt.Errorf("it printed:\n%s", s.out.String())
		}
		return nil
	})
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Post("https://"+s.proxyAddr+"/v1/messages", "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != `{"ok":true}` {
				t.Errorf("status %d body %q", resp.StatusCode, b)
			}
			if got := resp.ProtoMajor == 2; got != h2 {
				t.Errorf("protocol %s", resp.Proto)
			}

			resp, err = (&http.Client{Transport: tr}).Post("https://"+s.proxyAddr+"/v1/stream", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, len("event: ping\n"))
			if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "event: ping\n" {
				t.Fatalf("first event %q, %v", first, err)
			}
			next <- struct{}{}
			if rest, err := io.ReadAll(resp.Body); err != nil || !strings.Contains(string(rest), "message_stop") {
				t.Errorf("rest of the stream %q, %v", rest, err)
			}
		})
	}
	resp, err := http.Post("http://"+s.proxyAddr+"/v1/messages", "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener: status %d", resp.StatusCode)
		}
	}
}

// TestRequestLimits checks the header and body size limits of the proxy listener.
func TestRequestLimits(t *testing.T) {
	var calls sync.Map
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.Header.Get("X-Test"), true)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	s := startServe(t, nil, "--upstream", upstream.URL, "--max-request-body", "1000")
	tests := []struct {
		name   string
		header string
		body   int
		want   int
	}{
		{"small", "small", 1000, http.StatusOK},
		{"huge header", strings.Repeat("h", 2<<20), 10, http.StatusRequestHeaderFieldsTooLarge},
		{"body over --max-request-body", "big body", 1001, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+s.proxyAddr+"/v1/messages", strings.NewReader(strings.Repeat("b", tt.body)))
			req.Header.Set("X-Test", tt.header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, b, tt.want)
			}
			if _, reached := calls.Load(tt.header); reached != (tt.want == http.StatusOK) {
				t.Errorf("reached the upstream: %v", reached)
			}
		})
	}
}

// TestSecureFlagErrors checks the TLS and size flags' mistakes are one clear line.
func TestSecureFlagErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cert without key", []string{"serve", "--tls-cert", certFile}, 2, "give both --tls-cert and --tls-key"},
		{"key without cert", []string{"serve", "--tls-key", keyFile}, 2, "give both --tls-cert and --tls-key"},
		{"unreadable cert", []string{"serve", "--tls-cert", filepath.Join(dir, "nope.pem"), "--tls-key", keyFile, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, 1, "loading --tls-cert and --tls-key"},
		{"key for another cert", []string{"serve", "--tls-cert", keyFile, "--tls-key", keyFile, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, 1, "loading --tls-cert and --tls-key"},
		{"negative body limit", []string{"serve", "--max-request-body", "-1"}, 2, "invalid --max-request-body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cctrace(t, nil, tt.args...)
			if first, _, _ := strings.Cut(stderr, "\n"); code != tt.code || !strings.Contains(first, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q on the first line", code, stderr, tt.code, tt.want)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8787", true},
		{"127.9.9.9:1", true},
		{"[::1]:8787", true},
		{"0.0.0.0:8787", false},
		{"[::]:8787", false},
		{"192.0.2.10:8787", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got := isLoopback(a); got != tt.want {
				t.Errorf("isLoopback(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}
