package e2e

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/summary"
)

// TestRunLeavesClaudeCodesScreenAlone runs the README's headline command as a new user would:
// `cctrace run -- claude`, interactive, in a tmux pane, against the fake API's interactive
// scenario (a Bash call, then an answer). cctrace is given an OTLP endpoint where nothing
// listens, so that it has a warning to give while Claude Code runs. The screen, captured over
// and over while Claude Code runs, must never show a line of cctrace's but its status line;
// the status line must show the turn's figures as the fake served them; the turn line and the
// warning must be in the log file named before Claude Code started; the session summary must
// come after it exits.
func TestRunLeavesClaudeCodesScreenAlone(t *testing.T) {
	tmux := tmuxBin(t)
	claudeBin := harness.Claude(t)
	script, err := fakeapi.Scenario("interactive")
	if err != nil {
		t.Fatal(err)
	}
	api := fakeapi.New(script)
	fake := httptest.NewServer(api)
	defer fake.Close()

	sess := newSession(t)
	trustSession(t, sess)
	state := t.TempDir()
	argv := []string{"env",
		"HOME=" + sess.home,
		"ANTHROPIC_API_KEY=" + apiKey,
		"DISABLE_AUTOUPDATER=1",
		"XDG_STATE_HOME=" + state,
		// The race-enabled binary sleeps a second before it exits; the status line command
		// that Claude Code runs every 2 seconds is that binary too.
		"GORACE=atexit_sleep_ms=0",
		fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", harness.FreePort(t)),
		cctraceBin, "run", "--upstream", fake.URL, "--", claudeBin, "--allowedTools", "Bash"}
	for i, a := range argv {
		argv[i] = shellQuote(a)
	}
	// The shell stays after cctrace exits, so that the screen keeps what it printed last.
	term := newTerminal(t, tmux, "cd "+shellQuote(sess.dir)+" && "+strings.Join(argv, " ")+"; echo RUN-EXITED=$?; sleep 600", "")

	// Each wait below is for a screen the watch captured, so the watch saw Claude Code from
	// its prompt to the status line after the answer.
	watch := watchScreen(t, term)
	watch.wait(t, "the input prompt", func(screen string) bool {
		return strings.Contains(screen, "shift+tab") || strings.Contains(screen, "? for shortcuts")
	})
	term.typeLine(t, "Create a marker file.")
	watch.wait(t, "the answer", func(screen string) bool {
		return strings.Contains(screen, "Created the marker file.")
	})

	// The status line: the turn's requests (the title, the prompt, the tool results), its tool
	// call and its tokens, exactly as served.
	var requests, in, out int
	for _, sv := range api.Served() {
		if sv.Path == "/v1/messages" {
			requests++
			in += sv.Usage.InputTokens + sv.Usage.CacheReadInputTokens + sv.Usage.CacheCreationInputTokens
			out += sv.Usage.OutputTokens
		}
	}
	if requests != 3 {
		t.Fatalf("the fake served %d Messages requests, want 3 (title, prompt, tool results): %v", requests, rules(api.Served()))
	}
	figures := fmt.Sprintf("· %d req · 1 tool · input %s · output %s · hit ", requests, summary.Count(in), summary.Count(out))
	watch.wait(t, "the status line with "+figures, func(screen string) bool {
		return strings.Contains(screen, "cctrace turn 1 · ") && strings.Contains(screen, figures)
	})
	screens := watch.stop() // what it saw is checked at the end of the test
	banner := regexp.MustCompile(`cctrace: turns page http://127\.0\.0\.1:\d+/ · turn lines in (\S+)`).FindStringSubmatch(screens[len(screens)-1])
	if banner == nil {
		t.Fatalf("no turns page and log path on the screen:\n%s", screens[len(screens)-1])
	}

	term.typeLine(t, "/exit")
	term.waitScreen(t, "cctrace's exit", func(screen string) bool { return strings.Contains(screen, "RUN-EXITED=") })
	sess.id = sessionOf(t, api.Served())
	short := sess.id[:8]
	screen, err := term.screen()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN-EXITED=0", "cctrace session " + short + ": 1 turn · 3 req · 1 tool call", "cctrace: turn lines and logs in " + banner[1]} {
		if !strings.Contains(screen, want) {
			t.Errorf("after Claude Code exited, the screen lacks %q:\n%s", want, screen)
		}
	}

	logPath := banner[1]
	if dir := filepath.Join(state, "cctrace"); filepath.Dir(logPath) != dir {
		t.Errorf("log file %s is not in %s", logPath, dir)
	}
	info, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v, want 0600", info.Mode().Perm())
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	for _, want := range []string{"cctrace " + short + " turn 1 · ", "Bash×1", "end_turn", "is not reachable", "cctrace session " + short} {
		if !strings.Contains(log, want) {
			t.Errorf("the log file lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, apiKey) || strings.Contains(screen, apiKey) {
		t.Error("the API key appears in the log or on the screen")
	}
}

// screenWatch captures a terminal's screen every 100 ms and notes every line of cctrace's
// output other than its status line and the banner it prints before the command starts; the
// test fails for each at its end.
type screenWatch struct {
	mu         sync.Mutex
	screens    []string
	violations []violation
	done, quit chan struct{}
}

type violation struct{ line, screen string }

// allowedCctraceLines are the lines mentioning cctrace that may show while Claude Code runs:
// the banner printed before it started, the status line, and the fake API's marker file.
var allowedCctraceLines = regexp.MustCompile(`cctrace: turns page |cctrace turn \d+ · |cctrace: (no turn yet|not running|no session)|cctrace-fakeapi-marker`)

// cctraceOutput matches what cctrace writes when it writes to its stderr: turn lines, the
// session summary, its own lines, logs.
var cctraceOutput = regexp.MustCompile(`cctrace|level=(DEBUG|INFO|WARN|ERROR)|not reachable`)

func watchScreen(t *testing.T, term *terminal) *screenWatch {
	t.Helper()
	w := &screenWatch{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if screen, err := term.screen(); err == nil {
				w.note(screen)
			}
			select {
			case <-w.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		w.stop()
		for _, v := range w.violations {
			t.Errorf("cctrace wrote into Claude Code's screen: %q in\n%s", v.line, v.screen)
		}
	})
	return w
}

func (w *screenWatch) note(screen string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.screens = append(w.screens, screen)
	for _, line := range strings.Split(screen, "\n") {
		if cctraceOutput.MatchString(line) && !allowedCctraceLines.MatchString(line) {
			w.violations = append(w.violations, violation{line: line, screen: screen})
		}
	}
}

// wait waits until the watch has captured a screen that done accepts, and fails the test after
// harness.Patience.
func (w *screenWatch) wait(t *testing.T, what string, done func(string) bool) {
	t.Helper()
	seen := 0
	harness.Eventually(t, what+" on the Claude Code screen", func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for ; seen < len(w.screens); seen++ {
			if done(w.screens[seen]) {
				return nil
			}
		}
		return fmt.Errorf("not in the %d screens captured", len(w.screens))
	})
}

// stop ends the watch and returns the screens captured, oldest first. It may be called more
// than once.
func (w *screenWatch) stop() []string {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.screens
}
