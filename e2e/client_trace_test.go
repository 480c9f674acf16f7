package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// clientService is the service name of Claude Code's own spans.
const clientService = "claude-code"

// TestClientTelemetryJoinsTraces runs `cctrace run --client-telemetry -- claude -p` with the
// real CLI and a real Jaeger: each turn must be one trace holding Claude Code's spans and
// cctrace's, every cctrace chat span (and the turn's root) under the claude_code.llm_request
// span that sent its request, both attempts of a retried call under the same one, tools and
// subagents under cctrace's own spans. Without the flag the same run traces as before: a trace
// of cctrace's alone.
func TestClientTelemetryJoinsTraces(t *testing.T) {
	claudeBin := harness.Claude(t)
	jaeger := harness.StartJaeger(t)

	t.Run("subagent", func(t *testing.T) {
		sess, api := runThroughCctrace(t, jaeger, claudeBin, "subagent", true, "Ask a subagent", "--allowedTools", "Bash,Agent")
		tr := joinedTrace(t, jaeger, sess, api.Served())
		checkJoined(t, tr, sess)
		parents := map[string]string{}
		for _, sp := range tr.Spans {
			if sp.ServiceName == service && (strings.HasPrefix(sp.OperationName, "execute_tool ") || sp.OperationName == "invoke_agent general-purpose") {
				parents[sp.OperationName] = spanByID(tr, sp.ParentSpanID).OperationName
			}
		}
		want := map[string]string{
			"execute_tool Agent":           "invoke_agent claude-code",
			"invoke_agent general-purpose": "execute_tool Agent",
			"execute_tool Bash":            "invoke_agent general-purpose",
		}
		for name, parent := range want {
			if parents[name] != parent {
				t.Errorf("%s runs under %q, want %q (all: %v)", name, parents[name], parent, parents)
			}
		}
		if n := len(tr.SpansNamed("claude_code.tool.execution")); n < 2 {
			t.Errorf("%d claude_code.tool.execution spans, want Claude Code's view of both tools", n)
		}
	})

	t.Run("retry_529", func(t *testing.T) {
		sess, api := runThroughCctrace(t, jaeger, claudeBin, "retry_529", true, "Say something")
		tr := joinedTrace(t, jaeger, sess, api.Served())
		checkJoined(t, tr, sess)
		attempts := map[string]int{}
		for _, sp := range tr.Spans {
			if sp.ServiceName == service && strings.HasPrefix(sp.OperationName, "chat ") {
				attempts[sp.ParentSpanID]++
			}
		}
		if len(attempts) != 1 {
			t.Errorf("the 3 attempts of one call run under %d llm_request spans, want 1: %v", len(attempts), attempts)
		}
	})

	t.Run("off", func(t *testing.T) {
		sess, api := runThroughCctrace(t, jaeger, claudeBin, "subagent", false, "Ask a subagent", "--allowedTools", "Bash,Agent")
		want := strings.TrimSpace(`
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Agent
    invoke_agent general-purpose
      chat claude-opus-5-5 [subagent]
      execute_tool Bash
      chat claude-opus-5-5 [subagent]
  chat claude-opus-5-5 [tool_results]`)
		traces := waitSessionTraces(t, jaeger, sess, func(trs []harness.Trace) bool {
			return len(trs) == 1 && len(trs[0].Spans) >= strings.Count(want, "\n")+1
		})
		if got := tree(traces); got != want {
			t.Errorf("span tree without client telemetry:\n%s\nwant:\n%s", got, want)
		}
		for _, sp := range traces[0].Spans {
			if sp.ServiceName != service {
				t.Errorf("%s of service %s in cctrace's trace", sp.OperationName, sp.ServiceName)
			}
			for _, r := range sp.References {
				if r.RefType != "CHILD_OF" {
					t.Errorf("%s has a %s reference, without a traceparent to take it from", sp.OperationName, r.RefType)
				}
			}
		}
		checkTokens(t, traces, api.Served())
	})
}

// runThroughCctrace runs `claude -p prompt args...` through `cctrace run` (with --client-telemetry when
// client is set) against a fake API playing scenario, both exporting to jaeger, and returns the
// session id Claude Code reported and the fake.
func runThroughCctrace(t *testing.T, jaeger *harness.Jaeger, claudeBin, scenario string, client bool, prompt string, args ...string) (string, *fakeapi.Server) {
	t.Helper()
	script, err := fakeapi.Scenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script)
	fake := httptest.NewServer(api)
	t.Cleanup(fake.Close)
	sess := newSession(t)
	argv := []string{"run", "--upstream", fake.URL}
	if client {
		argv = append(argv, "--client-telemetry")
	}
	argv = append(argv, "--", claudeBin, "-p", prompt, "--output-format", "json")
	argv = append(argv, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cctraceBin, argv...)
	cmd.Dir = sess.dir
	cmd.Env = append(cleanEnv(),
		"HOME="+sess.home,
		"ANTHROPIC_API_KEY="+apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint(),
		"OTEL_SERVICE_NAME="+service,
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_EXPORT_INTERVAL=200", // Claude Code's batch delay, in ms
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		t.Fatalf("cctrace %q: %v\nstdout: %s\nstderr: %s", argv, err, stdout.String(), stderr.String())
	}
	var res claudeResult
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &res); err != nil || res.SessionID == "" || res.IsError {
		t.Fatalf("claude's output: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cctrace run output:\n%s", stderr.String())
		}
	})
	return res.SessionID, api
}

// waitSessionTraces polls Jaeger until the traces holding cctrace spans of session satisfy
// done, and returns them in order of their roots' start.
func waitSessionTraces(t *testing.T, jaeger *harness.Jaeger, session string, done func([]harness.Trace) bool) []harness.Trace {
	t.Helper()
	var mine []harness.Trace
	harness.Eventually(t, "the traces of session "+session+" in Jaeger", func() error {
		mine = nil
		for _, tr := range jaeger.Traces(t, service) {
			for _, sp := range tr.Spans {
				if sp.ServiceName == service && sp.Tags["gen_ai.conversation.id"] == session {
					mine = append(mine, tr)
					break
				}
			}
		}
		if !done(mine) {
			return fmt.Errorf("Jaeger holds %d traces with its spans:\n%s", len(mine), tree(mine))
		}
		return nil
	})
	return mine
}

// joinedTrace waits until Jaeger holds the one trace of session with both services' spans: a
// chat span of cctrace's for every request served, and Claude Code's interaction.
func joinedTrace(t *testing.T, jaeger *harness.Jaeger, session string, served []fakeapi.Served) harness.Trace {
	t.Helper()
	requests := 0
	for _, sv := range served {
		if sv.Path == "/v1/messages" {
			requests++
		}
	}
	traces := waitSessionTraces(t, jaeger, session, func(trs []harness.Trace) bool {
		if len(trs) != 1 {
			return len(trs) > 1 // reported below
		}
		chats := 0
		for _, sp := range trs[0].Spans {
			if sp.ServiceName == service && strings.HasPrefix(sp.OperationName, "chat ") {
				chats++
			}
		}
		return chats >= requests && len(trs[0].SpansNamed("claude_code.interaction")) == 1 &&
			len(trs[0].SpansNamed("invoke_agent claude-code")) == 1
	})
	if len(traces) != 1 {
		t.Fatalf("session %s is in %d traces, want 1", session, len(traces))
	}
	return traces[0]
}

// checkJoined checks what every joined trace must hold: Claude Code's interaction at its root,
// cctrace's turn root with its totals and every chat span under an llm_request span of Claude
// Code's, and no span links (every traceparent was in this trace).
func checkJoined(t *testing.T, tr harness.Trace, session string) {
	t.Helper()
	if root, ok := tr.Root(); !ok || root.OperationName != "claude_code.interaction" || root.ServiceName != clientService {
		t.Errorf("trace %s: root %s of %s, want Claude Code's claude_code.interaction", tr.TraceID, root.OperationName, root.ServiceName)
	}
	var chatTokens, turnTokens int64
	for _, sp := range tr.Spans {
		if sp.ServiceName != service {
			continue
		}
		for _, r := range sp.References {
			if r.RefType != "CHILD_OF" {
				t.Errorf("%s %s: a %s reference to %s/%s, want none in a joined trace", sp.OperationName, sp.SpanID, r.RefType, r.TraceID, r.SpanID)
			}
		}
		chat := strings.HasPrefix(sp.OperationName, "chat ")
		if !chat && sp.OperationName != "invoke_agent claude-code" {
			continue
		}
		parent := spanByID(tr, sp.ParentSpanID)
		if parent.OperationName != "claude_code.llm_request" || parent.ServiceName != clientService {
			t.Errorf("%s %s runs under %q of %q, want Claude Code's claude_code.llm_request", sp.OperationName, sp.SpanID, parent.OperationName, parent.ServiceName)
		}
		tokens, _ := sp.Tags["gen_ai.usage.output_tokens"].(int64)
		if chat {
			chatTokens += tokens
		} else {
			turnTokens = tokens
			if sp.Tags["gen_ai.conversation.id"] != session || sp.Tags["cctrace.turn.outcome"] != "end_turn" {
				t.Errorf("turn root: conversation %v outcome %v", sp.Tags["gen_ai.conversation.id"], sp.Tags["cctrace.turn.outcome"])
			}
		}
	}
	if chatTokens == 0 || turnTokens != chatTokens {
		t.Errorf("turn root's output tokens %d, its chat spans' %d", turnTokens, chatTokens)
	}
}

// spanByID returns the span of tr with id, or a zero span.
func spanByID(tr harness.Trace, id string) harness.Span {
	for _, sp := range tr.Spans {
		if sp.SpanID == id {
			return sp
		}
	}
	return harness.Span{}
}
