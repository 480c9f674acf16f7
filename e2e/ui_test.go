package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// envChromium names the Chromium binary the turns page test drives (scripts/ui-test-deps.sh
// installs Debian's chromium and exports it).
const envChromium = "CCTRACE_CHROMIUM_BIN"

// envArtifacts names a directory for the screenshots; default testdata/artifacts/ui.
const envArtifacts = "CCTRACE_ARTIFACTS"

// fakeTraceUI is the --trace-ui-url of the test: only the links are checked, nothing serves it.
const fakeTraceUI = "http://127.0.0.1:16686"

// TestTurnsPageInChromium runs real Claude Code sessions through a cctrace serve process with no
// backend at all, and looks at the built-in turns page in a real headless Chromium: a slow turn
// is shown live and then completes without a reload, and a turn with a subagent is reached from
// the sessions page by clicking and shows its span tree as a waterfall. Screenshots are kept.
func TestTurnsPageInChromium(t *testing.T) {
	chromium := chromiumBin(t)
	claudeBin := harness.Claude(t)
	artifacts := artifactsDir(t)

	api := &switchableAPI{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })
	cc := startServe(t, "http://"+ln.Addr().String(), "--trace-ui-url", fakeTraceUI)
	st := &stack{claudeBin: claudeBin, proxyURL: cc.proxyURL, api: api}

	browser := newBrowser(t, chromium)

	t.Run("live turn", func(t *testing.T) {
		api.use(t, "slow_pings")
		sess := newSession(t)
		done := make(chan error, 1)
		go func() { done <- runClaude(st, sess, "Give me a plain answer.") }()
		trace := waitRunningTurn(t, cc.metricsURL, done)
		do(t, browser, "open the running turn", chromedp.Navigate(cc.metricsURL+"/turns/"+trace))
		do(t, browser, "see it live", chromedp.Poll[chromedp.Void](`document.body.dataset.live === "1" && document.querySelector(".wf-row.k-chat.running") !== null`,
			chromedp.WithPollingTimeout(10*time.Second)))
		first := run(t, browser, "read the update time", chromedp.Text(chromedp.CSS("header .updated")))
		// The page's script refreshes it every 2 s while the turn runs.
		do(t, browser, "see it refreshed", chromedp.Poll[chromedp.Void](`document.querySelector("header .updated").textContent !== `+strconv.Quote(first),
			chromedp.WithPollingTimeout(10*time.Second)))
		screenshot(t, browser, filepath.Join(artifacts, "turn-live.png"))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// No reload here either: the script sees the turn end.
		do(t, browser, "see it finish", chromedp.Poll[chromedp.Void](`document.body.dataset.live === "0" && document.querySelector(".running") === null && /end_turn/.test(document.querySelector("h1").textContent)`,
			chromedp.WithPollingTimeout(20*time.Second)))
	})

	t.Run("subagent turn from the sessions page", func(t *testing.T) {
		api.use(t, "subagent")
		sess := newSession(t)
		st.claude(t, sess, "Delegate an echo to a subagent.", "--allowedTools", "Bash,Read,Agent")

		do(t, browser, "open the sessions page", chromedp.Navigate(cc.metricsURL+"/"))
		link := chromedp.CSS(`#sessions a[href="/sessions/` + sess.id + `"]`)
		do(t, browser, "find the session", chromedp.WaitVisible(link))
		screenshot(t, browser, filepath.Join(artifacts, "sessions.png"))
		do(t, browser, "open the session", chromedp.Click(link), chromedp.WaitVisible(chromedp.CSS("#turns")))
		screenshot(t, browser, filepath.Join(artifacts, "session.png"))

		turnLink := chromedp.CSS(`#turns a[href^="/turns/"]`)
		href := run(t, browser, "read the turn link", chromedp.AttributeValue(turnLink, "href"))
		trace := strings.TrimPrefix(href.Value, "/turns/")
		ext := run(t, browser, "read the trace link", chromedp.AttributeValue(chromedp.CSS(`#turns a.ext`), "href"))
		if want := fakeTraceUI + "/trace/" + trace; ext.Value != want {
			t.Errorf("trace link %q, want %q", ext.Value, want)
		}
		do(t, browser, "open the turn", chromedp.Click(turnLink), chromedp.WaitVisible(chromedp.CSS("#waterfall .wf-row")))

		rows := run(t, browser, "read the waterfall", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#waterfall .wf-row")).map(r =>
			r.dataset.kind + " " + r.title + " @" + Math.round(parseFloat(getComputedStyle(r.querySelector(".wf-name")).paddingLeft)))`))
		// The tree of a subagent turn, as testdata/claude-code/subagent/want.tree has it; the
		// indent is 1.2em (about 17px at 14px) per level plus the cell's padding.
		want := []string{
			"turn invoke_agent claude-code @8",
			"chat chat claude-opus-5-5 @25",
			"tool execute_tool Agent @25",
			"subagent invoke_agent general-purpose @42",
			"chat chat claude-opus-5-5 @59",
			"tool execute_tool Bash @59",
			"chat chat claude-opus-5-5 @59",
			"chat chat claude-opus-5-5 @25",
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Errorf("waterfall rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
		// Every bar is drawn inside its track, and the turn's bar spans the whole track.
		bad := run(t, browser, "measure the bars", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#waterfall .wf-row")).flatMap(r => {
			const bar = r.querySelector(".bar").getBoundingClientRect(), track = r.querySelector(".wf-track").getBoundingClientRect();
			const out = [];
			if (bar.width < 1 || bar.left < track.left - 1 || bar.right > track.right + 1) out.push(r.title + " bar outside its track");
			if (r.dataset.kind === "turn" && bar.width < track.width * 0.95) out.push("turn bar covers " + Math.round(100 * bar.width / track.width) + "% of the track");
			return out;
		})`))
		if len(bad) > 0 {
			t.Errorf("waterfall geometry: %q", bad)
		}
		text := run(t, browser, "read the totals", chromedp.Text(chromedp.CSS("dl.totals")))
		for _, want := range []string{"Agent×1 Bash×1", "$0.", "cache hit"} {
			if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
				t.Errorf("turn totals lack %q:\n%s", want, text)
			}
		}
		screenshot(t, browser, filepath.Join(artifacts, "turn-subagent.png"))
	})

	for _, page := range []string{"/", "/api/turns"} {
		if strings.Contains(get(t, cc.metricsURL+page), apiKey) {
			t.Errorf("%s shows the API key", page)
		}
	}

	// The terminal side of the same run: one line per turn while serving, the session
	// dissection at exit.
	out := cc.stop(t)
	for _, want := range []string{"turn 1 · ", "Agent×1 Bash×1 · 1 subagent · input ", " · hit ", " · end_turn", " rounds of tool results · answers: "} {
		if !strings.Contains(out, want) {
			t.Errorf("cctrace output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, apiKey) {
		t.Error("cctrace printed the API key")
	}
}

// chromiumBin is Chromium from CCTRACE_CHROMIUM_BIN, else Debian's /usr/bin/chromium, else the
// test skips (fails under CI).
func chromiumBin(t *testing.T) string {
	t.Helper()
	if os.Getenv(envChromium) == "" {
		if _, err := os.Stat("/usr/bin/chromium"); err == nil {
			return "/usr/bin/chromium"
		}
	}
	return harness.Require(t, envChromium, "Chromium (apt-get install chromium)")
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		dir = filepath.Join("..", "testdata", "artifacts", "ui")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of the turns page go to %s", dir)
	return dir
}

// newBrowser starts headless Chromium with a fresh profile and no network features of its own;
// t.Cleanup stops it.
func newBrowser(t *testing.T, bin string) context.Context {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.CombinedOutput(logFile),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil && len(b) > 0 {
				t.Logf("chromium output:\n%s", b)
			}
		}
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx
}

// do runs browser steps within a minute, failing the test with what it was doing.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png := run(t, ctx, "taking a screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// cctraceProc is a `cctrace serve` process started by startServe.
type cctraceProc struct {
	*harness.Process
	proxyURL, metricsURL string
}

// startServe starts cctrace serve on free loopback ports, with no OTLP endpoint, in front of
// upstream; t.Cleanup stops it if the test has not.
func startServe(t *testing.T, upstream string, args ...string) *cctraceProc {
	t.Helper()
	proxyPort, metricsPort := harness.FreePort(t), harness.FreePort(t)
	return &cctraceProc{
		Process: serveCctrace(t, append([]string{
			"--listen", fmt.Sprintf("127.0.0.1:%d", proxyPort),
			"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", metricsPort),
			"--upstream", upstream}, args...)),
		proxyURL:   fmt.Sprintf("http://127.0.0.1:%d", proxyPort),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d", metricsPort),
	}
}

// stop sends SIGTERM, waits for cctrace to exit and returns what it printed.
func (p *cctraceProc) stop(t *testing.T) string {
	if !p.Stop() {
		t.Error("cctrace did not stop at SIGTERM")
	}
	return p.Output()
}

// runClaude runs one `claude -p` prompt through st's proxy, for use off the test goroutine.
func runClaude(st *stack, sess *session, prompt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, st.claudeBin, "-p", prompt, "--output-format", "json")
	cmd.Dir = sess.dir
	cmd.Env = append(cleanEnv(),
		"HOME="+sess.home,
		"ANTHROPIC_BASE_URL="+st.proxyURL,
		"ANTHROPIC_API_KEY="+apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("claude -p %q: %w\n%s", prompt, err, out)
	}
	return nil
}

// waitRunningTurn polls /api/turns until a turn is running and returns its trace id. It fails
// the test when Claude Code finishes (done) or harness.Patience passes first.
func waitRunningTurn(t *testing.T, metricsURL string, done <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(harness.Patience)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("Claude Code finished before a running turn was seen (err %v)", err)
		default:
		}
		var body struct {
			Turns []struct {
				TraceID string     `json:"trace_id"`
				Root    string     `json:"root"`
				End     *time.Time `json:"end"`
			} `json:"turns"`
		}
		if err := getJSON(metricsURL+"/api/turns", &body); err != nil {
			t.Fatal(err)
		}
		for _, tr := range body.Turns {
			if tr.End == nil && tr.Root == "turn" {
				return tr.TraceID
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no running turn within %v", harness.Patience)
	return ""
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("getting %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("getting " + url + ": " + resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", url, err)
	}
	return nil
}
