package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestClaudeRestartMidTool stops cctrace serve (SIGTERM) while Claude Code's Bash call runs and
// starts another on the same ports and state directory, which gets the call's result: the turn
// has one root, exported by the second process with the turn's real start; the Bash call is a
// success; the first process counts the request it saw end, the second the rest, the turn and
// the call; and together they bill what Claude Code says it spent. With --replica too, given
// the state directory (a replica's pod restarted on its volume).
func TestClaudeRestartMidTool(t *testing.T) {
	claudeBin := harness.Claude(t)
	jaeger := harness.StartJaeger(t)
	for _, tc := range []struct {
		name string
		args []string
	}{{"serve", nil}, {"replica", []string{"--replica"}}} {
		t.Run(tc.name, func(t *testing.T) {
			script, err := fakeapi.Scenario("slow_tool")
			if err != nil {
				t.Fatal(err)
			}
			api := fakeapi.New(script)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
			go fake.Serve(ln)
			defer fake.Close()

			proxyPort, metricsPort := harness.FreePort(t), harness.FreePort(t)
			s := &stack{jaeger: jaeger, claudeBin: claudeBin,
				proxyURL:   "http://127.0.0.1:" + strconv.Itoa(proxyPort),
				metricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort)}
			args := append([]string{
				"--listen", "127.0.0.1:" + strconv.Itoa(proxyPort),
				"--metrics-listen", "127.0.0.1:" + strconv.Itoa(metricsPort),
				"--upstream", "http://" + ln.Addr().String(),
				"--turn-idle-timeout", "2m",
				"--state-dir", t.TempDir()}, tc.args...)
			start := func() *harness.Process {
				return serveCctrace(t, args, "OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint(),
					"OTEL_SERVICE_NAME="+service, "OTEL_BSP_SCHEDULE_DELAY=100")
			}

			first := start()
			sess := newSession(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			began := time.Now()
			run := s.startClaude(t, ctx, sess, "Run the slow command.", "--allowedTools", "Bash")
			// The answer that asks for Bash has ended and been counted: Claude Code runs the
			// command (it takes seconds) and sends its result when it is done.
			harness.Eventually(t, "the first cctrace to count the request that asked for Bash", func() error {
				if n := sample(t, s.metricsURL, "cctrace_requests_total", map[string]string{"stop_reason": "tool_use"}); n != 1 {
					return fmt.Errorf("%v requests that ended tool_use", n)
				}
				return nil
			})
			firstBill, firstRequests := cctraceBill(t, s.metricsURL), messagesRequests(t, s.metricsURL)
			if n := sample(t, s.metricsURL, "cctrace_tool_calls_total", nil); n != 0 {
				t.Errorf("the first cctrace counted %v tool calls before the call ended", n)
			}
			restarted := time.Now()
			if !first.Stop() {
				t.Errorf("the first cctrace did not stop within its grace:\n%s", first.LogTail())
			}
			second := start()
			traces := checkSlowToolTurn(t, s, run, sess, api, began, restarted, "restart")
			checkSessionSpans(t, traces, sess.id)
			harness.Eventually(t, "the second cctrace to count the turn and the call", func() error {
				turns := sample(t, s.metricsURL, "cctrace_turns_total", map[string]string{"outcome": "end_turn"})
				calls := sample(t, s.metricsURL, "cctrace_tool_calls_total", map[string]string{"tool": "Bash", "outcome": "success"})
				if turns != 1 || calls != 1 {
					return fmt.Errorf("turns %v, Bash calls %v; want 1 each", turns, calls)
				}
				served := 0
				for _, sv := range api.Served() {
					if sv.Path == "/v1/messages" {
						served++
					}
				}
				if n := firstRequests + messagesRequests(t, s.metricsURL); n != float64(served) {
					return fmt.Errorf("the two counted %v Messages requests, the API served %d", n, served)
				}
				return nil
			})
			if !strings.Contains(second.Output(), "resumed turns in flight") {
				t.Errorf("the second cctrace does not say it resumed the turn:\n%s", second.LogTail())
			}
			// Claude Code's prices are the pricing page's for claude-opus-5-5: nothing is scaled.
			checkBillOf(t, func() bill { return firstBill.plus(cctraceBill(t, s.metricsURL)) },
				expected(t, sess.bill, api.Served(), 1))
		})
	}
}

// messagesRequests is how many Messages API requests cctrace counted: every kind but "other"
// and "no_session" (nginx's readiness check, say).
func messagesRequests(t *testing.T, metricsURL string) float64 {
	t.Helper()
	return sample(t, metricsURL, "cctrace_requests_total", nil) -
		sample(t, metricsURL, "cctrace_requests_total", map[string]string{"kind": "other"}) -
		sample(t, metricsURL, "cctrace_requests_total", map[string]string{"kind": "no_session"})
}

// TestClaudeReplicaRollMidTool is a roll of the team gateway while Claude Code's Bash call runs:
// two replicas behind nginx with the shipped config, their history on one PostgreSQL. The
// replica that served the request asking for Bash stops (SIGTERM); nginx sends the call's result
// to the other, which takes the turn over from the store: one root with the turn's real start,
// the call a success, the turn and the call counted once, and the two replicas' bill the CLI's.
func TestClaudeReplicaRollMidTool(t *testing.T) {
	claudeBin := harness.Claude(t)
	harness.Require(t, harness.EnvNginx, "nginx")
	jaeger := harness.StartJaeger(t)
	store := harness.StartPostgres(t).Database(t)

	script, err := fakeapi.Scenario("slow_tool")
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script)
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.HandleFunc("GET /ready", func(http.ResponseWriter, *http.Request) {}) // nginx's readiness, through a replica
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	defer fake.Close()

	proxyPorts := []int{harness.FreePort(t), harness.FreePort(t)}
	var replicas []*harness.Process
	var metricsURLs []string
	for i, port := range proxyPorts {
		metricsPort := harness.FreePort(t)
		metricsURLs = append(metricsURLs, "http://127.0.0.1:"+strconv.Itoa(metricsPort))
		replicas = append(replicas, serveCctrace(t, []string{
			"--listen", "127.0.0.1:" + strconv.Itoa(port),
			"--metrics-listen", "127.0.0.1:" + strconv.Itoa(metricsPort),
			"--upstream", "http://" + ln.Addr().String(),
			"--turn-idle-timeout", "2m",
			"--replica", "--history", store},
			"OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint(),
			"OTEL_SERVICE_NAME="+service,
			"OTEL_RESOURCE_ATTRIBUTES=service.instance.id="+replicaInstance(i),
			"OTEL_BSP_SCHEDULE_DELAY=100"))
	}
	nginxPort := harness.FreePort(t)
	nginxDir := t.TempDir()
	nginxURL := "http://127.0.0.1:" + strconv.Itoa(nginxPort)
	harness.StartNginx(t, nginxDir, nginxSite(t, proxyPorts, nginxPort, filepath.Join(nginxDir, "access.log")), nginxURL+"/ready")

	s := &stack{jaeger: jaeger, claudeBin: claudeBin, proxyURL: nginxURL}
	sess := newSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	run := s.startClaude(t, ctx, sess, "Run the slow command.", "--allowedTools", "Bash")
	served := -1 // the replica that served the request asking for Bash
	harness.Eventually(t, "a replica to count the request that asked for Bash", func() error {
		for i, u := range metricsURLs {
			if sample(t, u, "cctrace_requests_total", map[string]string{"stop_reason": "tool_use"}) == 1 {
				served = i
				return nil
			}
		}
		return errors.New("no replica counted it yet")
	})
	other := 1 - served
	rolledBill := cctraceBill(t, metricsURLs[served])
	rolledRequests := messagesRequests(t, metricsURLs[served])
	rolled := time.Now()
	if !replicas[served].Stop() {
		t.Errorf("the rolled replica did not stop within its grace:\n%s", replicas[served].LogTail())
	}
	checkSlowToolTurn(t, s, run, sess, api, began, rolled, "roll")
	harness.Eventually(t, "the other replica to count the turn and the call", func() error {
		turns := sample(t, metricsURLs[other], "cctrace_turns_total", map[string]string{"outcome": "end_turn"})
		calls := sample(t, metricsURLs[other], "cctrace_tool_calls_total", map[string]string{"tool": "Bash", "outcome": "success"})
		if turns != 1 || calls != 1 {
			return fmt.Errorf("turns %v, Bash calls %v; want 1 each", turns, calls)
		}
		messages := 0
		for _, sv := range api.Served() {
			if sv.Path == "/v1/messages" {
				messages++
			}
		}
		if n := rolledRequests + messagesRequests(t, metricsURLs[other]); n != float64(messages) {
			return fmt.Errorf("the two counted %v Messages requests, the API served %d", n, messages)
		}
		return nil
	})
	if n := sample(t, metricsURLs[other], "cctrace_turns_handed_off_total", nil); n != 0 {
		t.Errorf("the other replica counted %v turns handed off", n)
	}
	// Claude Code's prices are the pricing page's for claude-opus-5-5: nothing is scaled.
	checkBillOf(t, func() bill { return rolledBill.plus(cctraceBill(t, metricsURLs[other])) },
		expected(t, sess.bill, api.Served(), 1))
}

// checkSlowToolTurn waits for Claude Code's answer to the slow command and checks its turn, cut
// at cut by a restart or a roll (what): one trace holding the whole turn, its tokens as the fake
// served them, no span in error, and a root that starts at the turn's first request, before the
// cut. It returns the session's traces.
func checkSlowToolTurn(t *testing.T, s *stack, run *claudeRun, sess *session, api *fakeapi.Server, began, cut time.Time, what string) []harness.Trace {
	t.Helper()
	res := run.wait(t, sess)
	if res.IsError || !strings.Contains(res.Result, "slow-tool-done") {
		t.Errorf("Claude Code's answer: %+v", res)
	}
	traces := s.sessionTraces(t, sess.id, 1, 4)
	want := `invoke_agent claude-code [end_turn]
  chat claude-opus-5-5 [turn]
  execute_tool Bash
  chat claude-opus-5-5 [tool_results]`
	if got := tree(traces); got != want {
		t.Errorf("span tree across the %s:\n%s\nwant:\n%s", what, got, want)
	}
	checkTokens(t, traces, api.Served())
	for _, sp := range traces[0].Spans {
		if sp.Tags["otel.status_code"] == "ERROR" {
			t.Errorf("%s: error %v", sp.OperationName, sp.Tags["error.type"])
		}
		if sp.OperationName == "invoke_agent claude-code" && (sp.StartTime.Before(began) || !sp.StartTime.Before(cut)) {
			t.Errorf("the turn starts at %v, want its first request's, before the %s at %v", sp.StartTime, what, cut)
		}
	}
	return traces
}
