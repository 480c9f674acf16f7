package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/metrics"
)

// TestClaudeCodeThroughCctrace drives the real Claude Code CLI through one cctrace process, one
// scenario after another, and checks each session's traces in Jaeger; then it checks the metric
// totals in Prometheus against everything the fake API served, and that the API key leaked
// nowhere.
func TestClaudeCodeThroughCctrace(t *testing.T) {
	s := startStack(t)

	scenarios := []struct {
		name string
		run  func(t *testing.T, sess *session)
		// want is the span tree of the session's traces (see tree).
		want string
		// page: the scenario's WebFetch call fetches a page over HTTPS, which Claude Code must
		// trust.
		page bool
	}{
		{
			name: "tool_roundtrip",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Run echo hello-from-fakeapi", "--allowedTools", "Bash")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Bash
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			name: "parallel_tools",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Run the three calls", "--allowedTools", "Bash,Read")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Bash
  execute_tool Bash
  execute_tool Read [ERROR tool_error]
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			name: "subagent",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Ask a subagent", "--allowedTools", "Bash,Agent")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Agent
    invoke_agent general-purpose
      chat claude-opus-5-5 [subagent]
      execute_tool Bash
      chat claude-opus-5-5 [subagent]
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			name: "parallel_subagents",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Ask two subagents", "--allowedTools", "Bash,Read,Agent")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Agent
    invoke_agent general-purpose
      chat claude-opus-5-5 [subagent]
      execute_tool Bash
      chat claude-opus-5-5 [subagent]
  execute_tool Agent
    invoke_agent general-purpose
      chat claude-opus-5-5 [subagent]
      execute_tool Read [ERROR tool_error]
      chat claude-opus-5-5 [subagent]
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			// Claude Code runs the subagent in the background: the parent's turn ends first,
			// and a task notification opens the next one.
			name: "subagent_background",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Ask a subagent in the background", "--allowedTools", "Bash,Agent")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Agent
    invoke_agent general-purpose
      chat claude-opus-5-5 [subagent]
      execute_tool Bash
      chat claude-opus-5-5 [subagent]
  chat claude-opus-5-5 [tool_results]
invoke_agent claude-code [end_turn task_notification]
  chat claude-opus-5-5 [turn task_notification]`,
		},
		{
			// The stream breaks after a whole text block and the start of a tool call: Claude
			// Code keeps the text and asks the model to resume, in the same turn.
			name: "stream_cut",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Print hello", "--allowedTools", "Bash")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn] [ERROR overloaded_error]
  chat claude-opus-5-5 [resumption cut_off]
  execute_tool Bash
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			name: "retry_529",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Say something")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn] [ERROR overloaded_error]
  chat claude-opus-5-5 [turn attempt=1] [ERROR overloaded_error]
  chat claude-opus-5-5 [turn attempt=2]`,
		},
		{
			name: "midstream_error",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Say something")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn] [ERROR overloaded_error]
  chat claude-opus-5-5 [turn attempt=1]`,
		},
		{
			// Claude Code's own search request runs under the WebSearch call, and the API's
			// search is billed beside the tokens.
			name: "web_search",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Search the web for cctrace.", "--allowedTools", "WebSearch")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool WebSearch
    chat claude-opus-5-5 [tool]
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			// Claude Code fetches the page itself, then asks about it in a request of its own,
			// which runs under the WebFetch call.
			name: "web_fetch",
			page: true,
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Fetch the page and tell me its marker.", "--allowedTools", "WebFetch",
					"--settings", `{"skipWebFetchPreflight": true}`)
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool WebFetch
    chat claude-haiku-5-5 [tool]
  chat claude-opus-5-5 [tool_results]`,
		},
		{
			name: "compaction",
			run: func(t *testing.T, sess *session) {
				s.claude(t, sess, "Remember the word pineapple")
				s.claude(t, sess, "What was the word?")
				s.claude(t, sess, "/compact")
				s.claude(t, sess, "And now?")
			},
			want: `
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
invoke_agent claude-code [compaction]
  chat claude-opus-5-5 [compaction]
invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn compacted]`,
		},
	}

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sess := newSession(t)
			var opts []fakeapi.Option
			if sc.page {
				page := fakeapi.NewPageServer()
				defer page.Close()
				cert := filepath.Join(t.TempDir(), "page.pem")
				if err := os.WriteFile(cert, fakeapi.PageCertPEM(page), 0o600); err != nil {
					t.Fatal(err)
				}
				opts = append(opts, fakeapi.WithPageURL(page.URL+"/cctrace-page"))
				sess.env = append(sess.env, "NODE_EXTRA_CA_CERTS="+cert)
			}
			api := s.api.use(t, sc.name, opts...)
			before := cctraceBill(t, s.metricsURL)
			sc.run(t, sess)
			want := strings.TrimSpace(sc.want)
			nSpans := strings.Count(want, "\n") + 1
			for _, sv := range api.Served() {
				if sv.Cut {
					nSpans++ // an attempt the CLI abandoned still has its span
				}
			}
			nTraces := strings.Count(want, "\ninvoke_agent claude-code") + 1
			traces := s.sessionTraces(t, sess.id, nTraces, nSpans)
			if got := tree(traces); got != want {
				t.Errorf("span trees of session %s:\n%s\nwant:\n%s", sess.id, got, want)
			}
			checkSessionSpans(t, traces, sess.id)
			checkTokens(t, traces, api.Served())
			checkSubagentTotals(t, traces, api.Served())
			// Claude Code's own bill: its prices are the pricing page's for claude-opus-5-5 and
			// claude-haiku-5-5 (WebFetch's request) on the Anthropic API, so nothing is scaled.
			checkBill(t, s.metricsURL, before, expected(t, sess.bill, api.Served(), 1))
		})
	}

	t.Run("prometheus totals", func(t *testing.T) {
		var total fakeapi.Usage
		requests := 0
		for _, sv := range s.api.allServed() {
			if sv.Path != "/v1/messages" {
				continue
			}
			requests++
			total = total.Add(sv.Usage)
		}
		for typ, want := range map[string]int{
			"input":          total.InputTokens,
			"output":         total.OutputTokens,
			"cache_read":     total.CacheReadInputTokens,
			"cache_creation": total.CacheCreationInputTokens,
		} {
			s.prom.WaitQuery(t, fmt.Sprintf(`sum(cctrace_tokens_total{type=%q})`, typ), float64(want))
		}
		s.prom.WaitQuery(t, `sum(cctrace_requests_total{kind!="other"})`, float64(requests))
		s.prom.WaitQuery(t, `sum(cctrace_compactions_total{trigger="manual"})`, 1)
		// One subagent each in subagent and subagent_background, two in parallel_subagents.
		s.prom.WaitQuery(t, `sum(cctrace_subagents_total)`, 4)
		// A turn a person started, or a task notification did, counts once: the cut stream's
		// resumption is part of its turn, and so are the search and the page's requests (15 = 1
		// a scenario, 2 in subagent_background, 4 in compaction).
		s.prom.WaitQuery(t, `sum(cctrace_turns_total)`, 15)
		s.prom.WaitQuery(t, `sum(cctrace_requests_total{kind="tool"})`, 2)
		s.prom.WaitQuery(t, `sum(cctrace_server_tool_requests_total{tool="web_search"})`, 1)
		s.prom.WaitQuery(t, `sum(cctrace_requests_total{kind="resumption"})`, 1)
		s.prom.WaitQuery(t, `sum(cctrace_requests_total{code="529"})`, 2)
		// One session is no load: every body decoded, and the series there to say so (4 of them,
		// from cctrace's start).
		s.prom.WaitQuery(t, `count(cctrace_bodies_not_decoded_total)`, 4)
		s.prom.WaitQuery(t, `sum(cctrace_bodies_not_decoded_total)`, 0)
		if cost := s.prom.Query(t, `sum(cctrace_cost_usd_total)`); cost <= 0 {
			t.Errorf("cost = %v, want > 0", cost)
		}
		// Exemplars link the token counters to traces that exist in Jaeger.
		exemplars := s.prom.Exemplars(t, `cctrace_tokens_total`)
		if len(exemplars) == 0 {
			t.Fatal("no exemplars on cctrace_tokens_total")
		}
		known := map[string]bool{}
		for _, tr := range s.jaeger.Traces(t, service) {
			known[tr.TraceID] = true
		}
		for _, ex := range exemplars {
			if id := ex.Labels["trace_id"]; !known[id] {
				t.Errorf("exemplar trace_id %q is not a trace in Jaeger", id)
			}
		}
	})

	t.Run("no secrets anywhere", func(t *testing.T) {
		raw := get(t, s.jaeger.QueryURL()+"/api/traces?service="+service+"&limit=1000")
		outputs := map[string]string{
			"jaeger":     raw,
			"/metrics":   get(t, s.metricsURL+"/metrics"),
			"/api/turns": get(t, s.metricsURL+"/api/turns"),
			"output":     s.cctrace.Output(),
		}
		for name, text := range outputs {
			if len(text) == 0 {
				t.Errorf("%s is empty", name)
			}
			for _, secret := range []string{apiKey, "e2eMARKER"} {
				if strings.Contains(text, secret) {
					t.Errorf("%s contains the API key", name)
				}
			}
		}
	})
}

// sessionTraces waits until Jaeger holds the session's n traces with spans spans in all, and
// returns them in order of their roots' start.
func (s *stack) sessionTraces(t *testing.T, sessionID string, n, spans int) []harness.Trace {
	t.Helper()
	var mine []harness.Trace
	harness.Eventually(t, fmt.Sprintf("session %s's %d traces with %d spans in Jaeger", sessionID, n, spans), func() error {
		mine = nil
		total := 0
		for _, tr := range s.jaeger.Traces(t, service) {
			root, ok := tr.Root()
			if !ok || root.Tags["gen_ai.conversation.id"] != sessionID || !strings.HasPrefix(root.OperationName, "invoke_agent") {
				continue
			}
			mine = append(mine, tr)
			total += len(tr.Spans)
		}
		if len(mine) < n || total < spans {
			return fmt.Errorf("have %d traces with %d spans:\n%s", len(mine), total, tree(mine))
		}
		return nil
	})
	sort.Slice(mine, func(i, j int) bool {
		a, _ := mine[i].Root()
		b, _ := mine[j].Root()
		return a.StartTime.Before(b.StartTime)
	})
	return mine
}

// tree renders traces as indented span names with the facts the scenarios assert: the turn's
// outcome on roots; request kind, retry attempt and compaction on chat spans; error status.
//
// Attempts that Claude Code itself abandoned (error.type "canceled") are left out, and the
// attempt numbers after them shifted back: the CLI sometimes cancels a subagent's first request
// a millisecond after sending it and sends it again, more often behind any proxy (a bare
// httputil.ReverseProxy shows it too), so whether it happens is up to the CLI's timing.
func tree(traces []harness.Trace) string {
	var b strings.Builder
	for _, tr := range traces {
		root, ok := tr.Root()
		if !ok {
			fmt.Fprintf(&b, "(trace %s without root)\n", tr.TraceID)
			continue
		}
		var walk func(sp harness.Span, depth, canceledBefore int)
		walk = func(sp harness.Span, depth, canceledBefore int) {
			fmt.Fprintf(&b, "%s%s%s\n", strings.Repeat("  ", depth), sp.OperationName, facts(sp, canceledBefore))
			kids := tr.Children(sp.SpanID)
			sort.SliceStable(kids, func(i, j int) bool {
				if !kids[i].StartTime.Equal(kids[j].StartTime) {
					return kids[i].StartTime.Before(kids[j].StartTime)
				}
				return kids[i].OperationName < kids[j].OperationName
			})
			// Parallel tool spans start within the same response: order them by name, and calls
			// of one tool (two Agent calls) by what ran under them.
			sort.SliceStable(kids, func(i, j int) bool {
				ti, tj := strings.HasPrefix(kids[i].OperationName, "execute_tool"), strings.HasPrefix(kids[j].OperationName, "execute_tool")
				if ti && tj && kids[j].StartTime.Sub(kids[i].StartTime) < 50*time.Millisecond && kids[i].StartTime.Sub(kids[j].StartTime) < 50*time.Millisecond {
					if kids[i].OperationName != kids[j].OperationName {
						return kids[i].OperationName < kids[j].OperationName
					}
					return subtreeNames(tr, kids[i]) < subtreeNames(tr, kids[j])
				}
				return false
			})
			canceled := map[any]int{}
			for _, k := range kids {
				if canceledAttempt(k) {
					canceled[k.Tags["cctrace.request.kind"]]++
					continue
				}
				walk(k, depth+1, canceled[k.Tags["cctrace.request.kind"]])
			}
		}
		walk(root, 0, 0)
	}
	return strings.TrimSpace(b.String())
}

// subtreeNames lists the names of the spans under sp, sorted: what tells apart two calls of one
// tool.
func subtreeNames(tr harness.Trace, sp harness.Span) string {
	var names []string
	var walk func(harness.Span)
	walk = func(s harness.Span) {
		for _, k := range tr.Children(s.SpanID) {
			names = append(names, k.OperationName)
			walk(k)
		}
	}
	walk(sp)
	sort.Strings(names)
	return strings.Join(names, ",")
}

func canceledAttempt(sp harness.Span) bool {
	return strings.HasPrefix(sp.OperationName, "chat ") && sp.Tags["error.type"] == "canceled"
}

func facts(sp harness.Span, canceledBefore int) string {
	var f []string
	switch {
	case sp.Tags["cctrace.turn.outcome"] != nil:
		f = append(f, fmt.Sprint(sp.Tags["cctrace.turn.outcome"]))
		if tr := sp.Tags["cctrace.turn.trigger"]; tr != nil && tr != "prompt" && tr != "compaction" {
			f = append(f, fmt.Sprint(tr))
		}
	case sp.Tags["cctrace.request.kind"] != nil:
		f = append(f, fmt.Sprint(sp.Tags["cctrace.request.kind"]))
		if a, ok := sp.Tags["cctrace.retry.attempt"].(int64); ok && a-int64(canceledBefore) > 0 {
			f = append(f, fmt.Sprintf("attempt=%d", a-int64(canceledBefore)))
		}
		if sp.Tags["gen_ai.conversation.compacted"] == true {
			f = append(f, "compacted")
		}
		if syn := sp.Tags["cctrace.request.synthetic"]; syn != nil && syn != "compaction" {
			f = append(f, fmt.Sprint(syn))
		}
	}
	out := ""
	if len(f) > 0 {
		out = " [" + strings.Join(f, " ") + "]"
	}
	if sp.Tags["otel.status_code"] == "ERROR" {
		out += fmt.Sprintf(" [ERROR %v]", sp.Tags["error.type"])
	}
	return out
}

// checkSessionSpans checks what every span of a session must carry.
func checkSessionSpans(t *testing.T, traces []harness.Trace, sessionID string) {
	t.Helper()
	for _, tr := range traces {
		for _, sp := range tr.Spans {
			if sp.ServiceName != service {
				t.Errorf("%s: service %q", sp.OperationName, sp.ServiceName)
			}
			if sp.Tags["gen_ai.conversation.id"] != sessionID && sp.Tags["gen_ai.operation.name"] != "execute_tool" {
				t.Errorf("%s: gen_ai.conversation.id = %v, want %s", sp.OperationName, sp.Tags["gen_ai.conversation.id"], sessionID)
			}
			if strings.HasPrefix(sp.OperationName, "chat ") {
				// The main agent's model, or the small one of a tool's request (WebFetch's).
				if sp.Tags["span.kind"] != "client" || sp.Tags["gen_ai.provider.name"] != "anthropic" || sp.Tags["gen_ai.request.model"] != strings.TrimPrefix(sp.OperationName, "chat ") {
					t.Errorf("%s: kind %v provider %v model %v", sp.OperationName, sp.Tags["span.kind"], sp.Tags["gen_ai.provider.name"], sp.Tags["gen_ai.request.model"])
				}
			}
		}
	}
}

// checkTokens checks that the chat spans carry exactly the usage the fake served, and that each
// turn root sums its requests: those answered before it ended (a background subagent's later
// requests count in its own span only).
func checkTokens(t *testing.T, traces []harness.Trace, served []fakeapi.Served) {
	t.Helper()
	var want fakeapi.Usage
	for _, sv := range served {
		// Messages calls, also under a cloud provider's paths.
		if wire.ClassifyRoute(sv.Method, sv.Path).Endpoint == wire.EndpointMessages {
			want = want.Add(sv.Usage)
		}
	}
	keys := []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"}
	sum := map[string]int64{}
	inTurns := map[string]int64{}
	rootSum := map[string]int64{}
	for _, tr := range traces {
		root, _ := tr.Root()
		// Jaeger keeps microseconds: a span that ends with its root may seem to end just after.
		rootEnd := root.StartTime.Add(root.Duration + time.Millisecond)
		for _, sp := range tr.Spans {
			for _, k := range keys {
				v, ok := sp.Tags[k].(int64)
				switch {
				case !ok:
				case sp.ParentSpanID == "":
					rootSum[k] += v
				case strings.HasPrefix(sp.OperationName, "chat "):
					sum[k] += v
					if !sp.StartTime.Add(sp.Duration).After(rootEnd) {
						inTurns[k] += v
					}
				}
			}
		}
	}
	expect := map[string]int64{
		"gen_ai.usage.input_tokens":                int64(want.InputTokens + want.CacheReadInputTokens + want.CacheCreationInputTokens),
		"gen_ai.usage.output_tokens":               int64(want.OutputTokens),
		"gen_ai.usage.cache_read.input_tokens":     int64(want.CacheReadInputTokens),
		"gen_ai.usage.cache_creation.input_tokens": int64(want.CacheCreationInputTokens),
	}
	for k, v := range expect {
		if sum[k] != v {
			t.Errorf("chat spans: sum of %s = %d, fake served %d", k, sum[k], v)
		}
	}
	for _, k := range keys {
		if rootSum[k] != inTurns[k] {
			t.Errorf("turn roots: sum of %s = %d, their chat spans' %d", k, rootSum[k], inTurns[k])
		}
	}
}

// checkSubagentTotals checks that each subagent span carries exactly what the fake served to that
// subagent (by its agent id header): requests, tool calls, failed tool results, tokens by type.
func checkSubagentTotals(t *testing.T, traces []harness.Trace, served []fakeapi.Served) {
	t.Helper()
	type totals struct {
		requests, toolCalls, toolErrors int
		usage                           fakeapi.Usage
	}
	want := map[string]*totals{}
	for _, sv := range served {
		id := sv.Header.Get("X-Claude-Code-Agent-Id")
		if id == "" || sv.Path != "/v1/messages" {
			continue
		}
		w := want[id]
		if w == nil {
			w = &totals{}
			want[id] = w
		}
		w.requests++
		w.toolCalls += len(sv.ToolCalls)
		w.toolErrors += sv.ErrorResults
		w.usage = w.usage.Add(sv.Usage)
	}
	seen := 0
	for _, tr := range traces {
		for _, sp := range tr.Spans {
			id, ok := sp.Tags["gen_ai.agent.id"].(string)
			if !ok || !strings.HasPrefix(sp.OperationName, "invoke_agent ") {
				continue
			}
			seen++
			w := want[id]
			if w == nil {
				t.Errorf("subagent span for agent %s, which the fake never saw", id)
				continue
			}
			got := map[string]any{
				"cctrace.subagent.requests":                sp.Tags["cctrace.subagent.requests"],
				"cctrace.subagent.tool_calls":              sp.Tags["cctrace.subagent.tool_calls"],
				"cctrace.subagent.tool_errors":             sp.Tags["cctrace.subagent.tool_errors"],
				"gen_ai.usage.input_tokens":                sp.Tags["gen_ai.usage.input_tokens"],
				"gen_ai.usage.output_tokens":               sp.Tags["gen_ai.usage.output_tokens"],
				"gen_ai.usage.cache_read.input_tokens":     sp.Tags["gen_ai.usage.cache_read.input_tokens"],
				"gen_ai.usage.cache_creation.input_tokens": sp.Tags["gen_ai.usage.cache_creation.input_tokens"],
			}
			expect := map[string]any{
				"cctrace.subagent.requests":                int64(w.requests),
				"cctrace.subagent.tool_calls":              int64(w.toolCalls),
				"cctrace.subagent.tool_errors":             int64(w.toolErrors),
				"gen_ai.usage.input_tokens":                int64(w.usage.InputTokens + w.usage.CacheReadInputTokens + w.usage.CacheCreationInputTokens),
				"gen_ai.usage.output_tokens":               int64(w.usage.OutputTokens),
				"gen_ai.usage.cache_read.input_tokens":     int64(w.usage.CacheReadInputTokens),
				"gen_ai.usage.cache_creation.input_tokens": int64(w.usage.CacheCreationInputTokens),
			}
			for k, v := range expect {
				if got[k] != v {
					t.Errorf("subagent %s: %s = %v, the fake served %v", id, k, got[k], v)
				}
			}
			if c, ok := sp.Tags["cctrace.cost_usd"].(float64); !ok || c <= 0 {
				t.Errorf("subagent %s: cctrace.cost_usd = %v, want a cost", id, sp.Tags["cctrace.cost_usd"])
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d subagent spans, %d subagents served", seen, len(want))
	}
}

// TestCctraceRunWithClaudeCode runs the README's first command for real: `cctrace run -- claude`
// with the Claude Code CLI, no backend, against the fake API.
func TestCctraceRunWithClaudeCode(t *testing.T) {
	claudeBin := harness.Claude(t)
	script, err := fakeapi.Scenario("tool_roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script)
	fake := httptest.NewServer(api)
	defer fake.Close()

	sess := newSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cctraceBin, "run", "--upstream", fake.URL, "--",
		claudeBin, "-p", "Run echo hello-from-fakeapi", "--allowedTools", "Bash", "--output-format", "json")
	cmd.Dir = sess.dir
	cmd.Env = append(cleanEnv(),
		"HOME="+sess.home,
		"ANTHROPIC_API_KEY="+apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cctrace run -- claude: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var res claudeResult
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &res); err != nil || res.SessionID == "" || res.IsError {
		t.Fatalf("claude's own output through cctrace run: %v\n%s", err, stdout.String())
	}
	out := stderr.String()
	short := res.SessionID[:8]
	for _, want := range []string{"cctrace " + short + " turn 1", "Bash×1", "end_turn", "cctrace session " + short} {
		if !strings.Contains(out, want) {
			t.Errorf("cctrace run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, apiKey) || strings.Contains(stdout.String(), apiKey) {
		t.Error("the API key appears in the output")
	}

	// Claude Code's own bill is the session's in the history cctrace run kept (in the state
	// directory under HOME). Its price of claude-opus-5-5 is the pricing page's: nothing is scaled.
	hist := exec.CommandContext(ctx, cctraceBin, "sessions", "--json")
	hist.Env = append(cleanEnv(), "HOME="+sess.home)
	listed, err := hist.Output()
	if err != nil {
		t.Fatalf("cctrace sessions --json: %v\n%s", err, listed)
	}
	var kept struct {
		Sessions []struct {
			ID     string     `json:"session_id"`
			Tokens wire.Usage `json:"tokens"`
			Cost   float64    `json:"cost_usd"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(listed, &kept); err != nil || len(kept.Sessions) != 1 || kept.Sessions[0].ID != res.SessionID {
		t.Fatalf("cctrace sessions --json, want session %s alone: %v\n%s", res.SessionID, err, listed)
	}
	if len(res.ModelUsage) != 1 {
		t.Fatalf("Claude Code billed %d models, want tool_roundtrip's one: %+v", len(res.ModelUsage), res.ModelUsage)
	}
	for model := range res.ModelUsage {
		u := kept.Sessions[0].Tokens
		got := bill{cost: kept.Sessions[0].Cost, tokens: map[string]map[string]float64{metrics.Family(model): {}}}
		for typ, n := range map[string]int{"input": u.InputTokens, "output": u.OutputTokens, "cache_read": u.CacheReadInputTokens, "cache_creation": u.CacheCreationInputTokens} {
			if n != 0 {
				got.tokens[metrics.Family(model)][typ] = float64(n)
			}
		}
		checkBillOf(t, func() bill { return got }, expected(t, res.cliBill, api.Served(), 1))
	}
}
