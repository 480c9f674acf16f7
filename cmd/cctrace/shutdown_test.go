package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spanErrors returns, for every span the collector received by name, its error.type, or for a
// turn its outcome.
func (c *otlpCollector) spanErrors() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, req := range c.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					errType := ""
					for _, kv := range sp.Attributes {
						if kv.Key == "error.type" || kv.Key == "cctrace.turn.outcome" {
							errType = kv.Value.GetStringValue()
						}
					}
					out[sp.Name] = append(out[sp.Name], errType)
				}
			}
		}
	}
	return out
}

// TestShutdownPastGrace sends SIGTERM while a stream that never ends is in flight: cctrace waits
// --shutdown-grace, then cuts it, ends its open spans as "shutdown", exports them, and exits 0.
func TestShutdownPastGrace(t *testing.T) {
	col, endpoint := startOTLPCollector(t)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, messageStartEvent)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer upstream.Close()
	defer close(release)

	s := startServe(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=50"},
		"--upstream", upstream.URL, "--shutdown-grace", "1s")
	resp, br := openStream(t, s.proxyAddr, "shutdown-past-grace")
	defer resp.Body.Close()

	begin := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(br); err == nil {
		t.Error("the stream past the grace period ended cleanly; want it cut")
	}
	s.stop(t)
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("cctrace took %v to exit with a 1s grace period", d)
	}
	spans := col.spanErrors()
	if got := spans["chat claude-sonnet-4-6"]; len(got) != 1 || got[0] != "shutdown" && got[0] != "canceled" {
		t.Errorf("chat span error types %q, want one ended by the shutdown", got)
	}
	if got := spans["invoke_agent claude-code"]; len(got) != 1 || got[0] != "shutdown" && got[0] != "interrupted" {
		t.Errorf("turn outcomes %q, want one ended by the shutdown", got)
	}
	if !strings.Contains(s.out.String(), "shutdown") {
		t.Errorf("no word of the cut stream in the output:\n%s", s.out.String())
	}
}
