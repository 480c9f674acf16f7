package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestInteractiveClaudeCodeThroughCctrace runs the real Claude Code CLI interactively, in a tmux
// pane, through a real cctrace serve process, with the fake API's interactive scenario: one
// prompt that makes a Bash call. Only an interactive session sends the session-title side
// request (no tools, a <session> wrapper), and it goes out a few milliseconds before the turn's
// first request: the test checks in Jaeger that its auxiliary chat span lands inside the turn's
// trace, and that the spans carry exactly the tokens the fake served.
func TestInteractiveClaudeCodeThroughCctrace(t *testing.T) {
	tmux := tmuxBin(t)
	s := startStack(t)
	api := s.api.use(t, "interactive")
	sess := newSession(t)

	term := startInteractive(t, tmux, s, sess, "--allowedTools", "Bash")
	term.waitScreen(t, "the input prompt", func(screen string) bool {
		return strings.Contains(screen, "shift+tab") || strings.Contains(screen, "? for shortcuts")
	})
	term.typeLine(t, "Create a marker file.")
	term.waitScreen(t, "the answer", func(screen string) bool {
		return strings.Contains(screen, "Created the marker file.")
	})
	term.typeLine(t, "/exit")
	term.waitExit(t)

	sess.id = sessionOf(t, api.Served())
	var title *fakeapi.Served
	for _, sv := range api.Served() {
		if sv.Rule == "title" {
			title = &sv
		}
	}
	if title == nil {
		t.Fatalf("Claude Code sent no title request; served: %v", rules(api.Served()))
	}

	// The title goes out 5-80 ms before the main request, but in parallel: either may start
	// first. Its model is the CLI's choice: claude-haiku-5-5 with an sk-ant-api03- key like
	// this test's, the main model with other keys.
	aux := "  chat " + title.Model + " [auxiliary]\n"
	head := "invoke_agent claude-code [end_turn]\n"
	turn := "  chat claude-opus-5-5 [turn]\n"
	tail := "  execute_tool Bash\n  chat claude-opus-5-5 [tool_results]"
	wants := []string{head + aux + turn + tail, head + turn + aux + tail}
	want := strings.TrimSpace(wants[0])
	traces := s.sessionTraces(t, sess.id, 1, strings.Count(want, "\n")+1)
	if len(traces) != 1 {
		t.Fatalf("session %s has %d traces, want 1:\n%s", sess.id, len(traces), tree(traces))
	}
	if got := tree(traces); got != want && got != strings.TrimSpace(wants[1]) {
		t.Errorf("span tree of session %s:\n%s\nwant:\n%s", sess.id, got, want)
	}
	tr := traces[0]
	root, _ := tr.Root()
	var auxSpans []harness.Span
	for _, sp := range tr.Spans {
		if sp.Tags["cctrace.request.kind"] == "auxiliary" {
			auxSpans = append(auxSpans, sp)
		}
	}
	if len(auxSpans) != 1 {
		t.Fatalf("trace %s holds %d auxiliary chat spans, want 1:\n%s", tr.TraceID, len(auxSpans), tree(traces))
	}
	if sp := auxSpans[0]; sp.ParentSpanID != root.SpanID || sp.TraceID != root.TraceID {
		t.Errorf("auxiliary span %s: trace %s parent %s, want the turn's trace %s and root %s",
			sp.SpanID, sp.TraceID, sp.ParentSpanID, root.TraceID, root.SpanID)
	}
	for k, v := range map[string]int{
		"gen_ai.usage.input_tokens":  title.Usage.InputTokens + title.Usage.CacheReadInputTokens + title.Usage.CacheCreationInputTokens,
		"gen_ai.usage.output_tokens": title.Usage.OutputTokens,
	} {
		if got, ok := auxSpans[0].Tags[k].(int64); !ok || got != int64(v) {
			t.Errorf("auxiliary span %s = %v, want the title's %d", k, auxSpans[0].Tags[k], v)
		}
	}
	if got := auxSpans[0].Tags["gen_ai.request.model"]; got != title.Model {
		t.Errorf("auxiliary span gen_ai.request.model = %v, the title request asked for %s", got, title.Model)
	}
	// checkSessionSpans wants the main model on every chat span: give it the turn's spans only.
	rest := harness.Trace{TraceID: tr.TraceID}
	for _, sp := range tr.Spans {
		if sp.SpanID != auxSpans[0].SpanID {
			rest.Spans = append(rest.Spans, sp)
		}
	}
	checkSessionSpans(t, []harness.Trace{rest}, sess.id)
	if sp := auxSpans[0]; sp.ServiceName != service || sp.Tags["gen_ai.conversation.id"] != sess.id ||
		sp.Tags["span.kind"] != "client" || sp.Tags["gen_ai.provider.name"] != "anthropic" {
		t.Errorf("auxiliary span: service %q conversation %v kind %v provider %v", sp.ServiceName,
			sp.Tags["gen_ai.conversation.id"], sp.Tags["span.kind"], sp.Tags["gen_ai.provider.name"])
	}
	checkTokens(t, traces, api.Served())
	s.prom.WaitQuery(t, `sum(cctrace_requests_total{kind="auxiliary"})`, 1)
}

// tmuxBin returns the tmux binary from PATH. Outside CI a missing tmux skips the test; under
// CI=true it fails it.
func tmuxBin(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("tmux")
	if err != nil {
		msg := fmt.Sprintf("tmux not available (apt-get install -y tmux): %v", err)
		if harness.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// terminal is one interactive Claude Code process in a detached tmux session on a private tmux
// server (its own socket in the test's temporary directory), so that nothing touches the
// user's tmux and no socket file is left behind.
type terminal struct {
	tmux, socket, name string
	stderr             string // the CLI's stderr file
}

// startInteractive starts the CLI of stack s interactively for sess, with its settings made so
// that no first-run dialog shows (trustSession). t.Cleanup kills the tmux server and with it
// the CLI.
func startInteractive(t *testing.T, tmux string, s *stack, sess *session, args ...string) *terminal {
	t.Helper()
	trustSession(t, sess)
	stderr := filepath.Join(t.TempDir(), "claude.stderr")
	// DISABLE_AUTOUPDATER=1: without it the interactive CLI runs `npm install --global` of a
	// newer version.
	argv := []string{"exec", "env",
		"HOME=" + sess.home,
		"ANTHROPIC_BASE_URL=" + s.proxyURL,
		"ANTHROPIC_API_KEY=" + apiKey,
		"DISABLE_AUTOUPDATER=1",
		s.claudeBin}
	argv = append(argv, args...)
	for i, a := range argv {
		argv[i] = shellQuote(a)
	}
	return newTerminal(t, tmux, "cd "+shellQuote(sess.dir)+" && "+strings.Join(argv, " ")+" 2>"+shellQuote(stderr), stderr)
}

// trustSession writes the ~/.claude.json an interactive CLI needs so that no first-run dialog
// shows: onboarding done, the API key approved, sess's working directory trusted.
func trustSession(t *testing.T, sess *session) {
	t.Helper()
	settings := map[string]any{
		"hasCompletedOnboarding": true,
		"lastOnboardingVersion":  "2.1.328",
		"theme":                  "dark",
		"customApiKeyResponses":  map[string]any{"approved": []string{apiKey[len(apiKey)-20:]}, "rejected": []string{}},
		"projects": map[string]any{sess.dir: map[string]any{
			"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true,
		}},
	}
	raw, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sess.home, ".claude.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// newTerminal runs the shell command line command in a 200x50 pane of a private tmux server;
// stderr, when not empty, is the file the CLI's stderr goes to, printed if the test fails.
// t.Cleanup kills the server and with it the command.
func newTerminal(t *testing.T, tmux, command, stderr string) *terminal {
	t.Helper()
	term := &terminal{
		tmux:   tmux,
		socket: filepath.Join(t.TempDir(), "tmux"),
		name:   "claude",
		stderr: stderr,
	}
	t.Cleanup(func() {
		if t.Failed() {
			if screen, err := term.screen(); err == nil {
				t.Logf("last screen:\n%s", screen)
			}
			if b, err := os.ReadFile(term.stderr); term.stderr != "" && err == nil && len(b) > 0 {
				t.Logf("claude stderr:\n%s", b)
			}
		}
		// Killing the server hangs up the pane, which ends the CLI and its children.
		_ = term.run("kill-server")
	})
	if err := term.run("new-session", "-d", "-s", term.name, "-x", "200", "-y", "50", command); err != nil {
		t.Fatalf("starting claude in tmux: %v", err)
	}
	return term
}

// run runs one tmux command against the terminal's server.
func (term *terminal) run(args ...string) error {
	_, err := term.output(args...)
	return err
}

func (term *terminal) output(args ...string) (string, error) {
	cmd := exec.Command(term.tmux, append([]string{"-S", term.socket}, args...)...)
	cmd.Env = append(cleanEnv(), "TERM=xterm-256color")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// screen returns the pane's visible text.
func (term *terminal) screen() (string, error) {
	return term.output("capture-pane", "-p", "-t", term.name)
}

// waitScreen polls the screen until done accepts it, and fails the test after
// harness.Patience.
func (term *terminal) waitScreen(t *testing.T, what string, done func(string) bool) {
	t.Helper()
	harness.Eventually(t, what+" on the Claude Code screen", func() error {
		screen, err := term.screen()
		if err == nil && !done(screen) {
			err = errors.New("not on the screen yet")
		}
		return err
	})
}

// typeLine types text literally, waits until the input box shows it, and presses Enter.
func (term *terminal) typeLine(t *testing.T, text string) {
	t.Helper()
	if err := term.run("send-keys", "-t", term.name, "-l", text); err != nil {
		t.Fatal(err)
	}
	term.waitScreen(t, strconv.Quote(text)+" typed", func(screen string) bool {
		return strings.Contains(screen, text)
	})
	if err := term.run("send-keys", "-t", term.name, "Enter"); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits until the CLI has ended and with it the tmux session.
func (term *terminal) waitExit(t *testing.T) {
	t.Helper()
	harness.Eventually(t, "claude to exit after /exit", func() error {
		if term.run("has-session", "-t", term.name) == nil {
			return errors.New("claude still runs")
		}
		return nil
	})
}

// sessionOf returns the one Claude Code session id of the Messages API requests served.
func sessionOf(t *testing.T, served []fakeapi.Served) string {
	t.Helper()
	ids := map[string]bool{}
	for _, sv := range served {
		if sv.Path == "/v1/messages" {
			ids[sv.Header.Get("X-Claude-Code-Session-Id")] = true
		}
	}
	if len(ids) != 1 || ids[""] {
		t.Fatalf("want one session id on every request, got %v", ids)
	}
	for id := range ids {
		return id
	}
	return ""
}

// rules lists the rule of each served request, for messages.
func rules(served []fakeapi.Served) []string {
	out := make([]string, 0, len(served))
	for _, sv := range served {
		out = append(out, sv.Rule)
	}
	return out
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
