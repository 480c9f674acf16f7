package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// modulePath is the module `go install …@latest` fetches.
const modulePath = "github.com/cctrace/cctrace"

// The README's commands, as its sh blocks have them. TestREADME fails on a command it does not
// know, so that a README that changes its commands changes this test too.
const (
	cmdRunFromClone = "go run ./cmd/cctrace run -- claude"
	cmdTests        = "bash scripts/test.sh"
	cmdDemo         = "go run ./cmd/cctrace demo"
	cmdInstall      = "go install github.com/cctrace/cctrace/cmd/cctrace@latest"
	cmdBuild        = "go build -o ~/.local/bin/cctrace ./cmd/cctrace"
	cmdVersion      = "cctrace version"
	cmdRun          = "cctrace run -- claude"
	cmdServe        = "cctrace serve"
	cmdExport       = "export ANTHROPIC_BASE_URL=http://127.0.0.1:8787"
	cmdClaude       = "claude"
	cmdStack        = "docker compose -f deploy/docker-compose.yml up -d"
)

// TestREADME runs the README's commands in the order it gives them, as a newcomer would in a
// fresh clone (git clone of this repository's committed HEAD), and checks what each prints:
//
//   - `go run ./cmd/cctrace run -- claude` and `cctrace run -- claude` run the real Claude Code
//     CLI, interactive in a tmux pane, through cctrace to the fake API (CCTRACE_UPSTREAM, the
//     one thing set that a user would not): a prompt, its answer, /exit, the session summary;
//   - `go run ./cmd/cctrace demo` replays its sessions; the turns page and /metrics answer; Ctrl-C
//     ends it;
//   - `go install …@latest` installs from a module proxy made of the clone (GOPROXY=file://…,
//     the module zip cut from the clone's HEAD as the Go module proxy would), and the binary
//     names the pseudo-version and commit it came from;
//   - `go build -o ~/.local/bin/cctrace …` and `cctrace version` (HOME is a temporary one);
//   - `cctrace serve`, `export ANTHROPIC_BASE_URL=…` and `claude`: a shared proxy on the default
//     ports and an interactive Claude Code pointed at it;
//   - the test command and the team stack are checked without being run in full: the test
//     command's help names its stages and .ci/run calls exactly it (CI runs it whole); the
//     compose file publishes the proxy where the README's export points (the deploy stage runs
//     its configs).
func TestREADME(t *testing.T) {
	tmux := tmuxBin(t)
	claudeBin := harness.Claude(t)
	r := &readmeRun{t: t, tmux: tmux, home: t.TempDir(), gobin: t.TempDir(), api: &switchableAPI{}}
	r.clone = cloneRepository(t)
	commands := readmeCommands(t, filepath.Join(r.clone, "README.md"))
	if len(commands) < 2 || commands[0] != cmdRunFromClone || commands[1] != cmdTests {
		t.Fatalf("the README does not start with %q and %q: %q", cmdRunFromClone, cmdTests, commands)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: r.api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })
	r.api.use(t, "side_request")
	r.env = r.environment(t, claudeBin, "http://"+ln.Addr().String())

	steps := map[string]func(*testing.T){
		cmdRunFromClone: func(t *testing.T) { r.interactive(t, cmdRunFromClone, true) },
		cmdTests:        r.testCommand,
		cmdDemo:         r.demo,
		cmdInstall:      r.install,
		cmdBuild:        r.build,
		cmdVersion:      r.version,
		cmdRun:          func(t *testing.T) { r.interactive(t, cmdRun, true) },
		cmdServe:        r.serve,
		cmdExport:       r.export,
		cmdClaude:       func(t *testing.T) { r.interactive(t, cmdClaude, false) },
		cmdStack:        r.stack,
	}
	ran := map[string]bool{}
	for _, c := range commands {
		step := steps[c]
		if strings.HasPrefix(c, cmdTests+" ") {
			step = r.testCommand
		}
		if step == nil {
			t.Fatalf("the README's command %q has no step in TestREADME", c)
		}
		ran[c] = true
		if !t.Run(c, step) {
			t.FailNow() // later commands build on earlier ones
		}
	}
	for c := range steps {
		if !ran[c] {
			t.Errorf("the README no longer has %q: drop its step", c)
		}
	}
}

// readmeRun is the state the README's commands share, as one shell session would.
type readmeRun struct {
	t           *testing.T
	tmux        string
	clone, home string
	gobin       string
	env         []string
	api         *switchableAPI
	served      *harness.Process // `cctrace serve`, until `claude` is done with it
	pseudo      string           // the pseudo-version `go install …@latest` installed
}

// cloneRepository clones the repository this test runs in, at its committed HEAD.
func cloneRepository(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("finding the repository: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "cctrace")
	if out, err := exec.Command("git", "clone", "--quiet", strings.TrimSpace(string(top)), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return clone
}

// readmeCommands returns the command lines of the README's sh blocks, in order, without their
// comments.
func readmeCommands(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inSh := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			inSh = !inSh && strings.TrimPrefix(line, "```") == "sh"
			continue
		case !inSh:
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// environment is the shell's: a HOME of its own (so that ~/.local/bin is the test's), claude on
// PATH, the Go caches and proxy settings of the test's own go (so that nothing is downloaded
// twice), the clone's module served by a proxy of its own, and cctrace's upstream the fake API.
func (r *readmeRun) environment(t *testing.T, claudeBin, upstream string) []string {
	t.Helper()
	claudeDir := t.TempDir()
	if err := os.Symlink(claudeBin, filepath.Join(claudeDir, "claude")); err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	raw, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GOTOOLCHAIN").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	if err := json.Unmarshal(raw, &goEnv); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	proxy := r.moduleProxy(t)
	env := append(cleanEnv(),
		"HOME="+r.home,
		"PATH="+strings.Join([]string{filepath.Join(r.home, ".local", "bin"), r.gobin, claudeDir, filepath.Dir(goBin), os.Getenv("PATH")}, string(os.PathListSeparator)),
		"GOBIN="+r.gobin,
		"GOCACHE="+goEnv["GOCACHE"], "GOMODCACHE="+goEnv["GOMODCACHE"], "GOPATH="+goEnv["GOPATH"],
		"GOFLAGS="+goEnv["GOFLAGS"], "GOTOOLCHAIN="+goEnv["GOTOOLCHAIN"],
		"GOPROXY=file://"+proxy+","+goEnv["GOPROXY"],
		"GONOSUMDB="+strings.Trim(modulePath+","+goEnv["GONOSUMDB"], ","),
		"ANTHROPIC_API_KEY="+apiKey,
		"DISABLE_AUTOUPDATER=1",
		"CCTRACE_UPSTREAM="+upstream,
		"TERM=xterm-256color",
	)
	r.trust(t)
	return env
}

// trust writes the ~/.claude.json that spares the interactive CLI its first-run dialogs, with
// the clone as a trusted project.
func (r *readmeRun) trust(t *testing.T) {
	t.Helper()
	trustSession(t, &session{home: r.home, dir: r.clone})
}

// moduleProxy lays out a GOPROXY directory holding the clone's HEAD as the module's latest
// pseudo-version, zipped as the Go module proxy zips a repository.
func (r *readmeRun) moduleProxy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", r.clone, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rev string
	var unix int64
	if _, err := fmt.Sscan(string(out), &rev, &unix); err != nil {
		t.Fatal(err)
	}
	when := time.Unix(unix, 0).UTC()
	r.pseudo = module.PseudoVersion("v0", "", when, rev[:12])
	proxy := t.TempDir()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, r.pseudo+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	if err := modzip.CreateFromVCS(zf, module.Version{Path: modulePath, Version: r.pseudo}, r.clone, rev, ""); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(r.clone, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": r.pseudo, "Time": when})
	for name, data := range map[string][]byte{
		"list":             nil, // no release yet: the go command asks for @latest
		r.pseudo + ".info": info,
		r.pseudo + ".mod":  gomod,
		"../@latest":       info,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proxy
}

// shell runs a command line with bash in the clone, with the shell's environment, and returns
// what it printed.
func (r *readmeRun) shell(t *testing.T, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), harness.Patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Env = r.clone, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// background starts a command line with bash in the clone, as the leader of its process group;
// the test's end stops the group.
func (r *readmeRun) background(t *testing.T, name, command string) *harness.Process {
	t.Helper()
	return harness.Start(r.t, name, r.env, "bash", "-c", "cd "+shellQuote(r.clone)+" && exec "+command)
}

// interactive runs command, which runs Claude Code, in a tmux pane: it types a prompt, waits for
// the fake's answer, types /exit, and checks the screen after. viaRun says that cctrace runs
// around Claude Code (cctrace run), which prints the session summary after it.
func (r *readmeRun) interactive(t *testing.T, command string, viaRun bool) {
	served := len(r.api.allServed())
	var env strings.Builder
	for _, kv := range r.env {
		env.WriteString(shellQuote(kv) + " ")
	}
	term := newTerminal(t, r.tmux, "cd "+shellQuote(r.clone)+" && env -i "+env.String()+"bash -c "+shellQuote(command)+"; echo README-EXITED=$?; sleep 600", "")
	// `go run` compiles first: the prompt comes within Patience.
	term.waitScreen(t, "Claude Code's input prompt", func(screen string) bool {
		return strings.Contains(screen, "shift+tab") || strings.Contains(screen, "? for shortcuts")
	})
	term.typeLine(t, "Give me a plain answer.")
	term.waitScreen(t, "the answer", func(screen string) bool { return strings.Contains(screen, "Here is a plain answer.") })
	term.typeLine(t, "/exit")
	term.waitScreen(t, "the command's exit", func(screen string) bool { return strings.Contains(screen, "README-EXITED=") })
	// The whole pane, scrollback included: cctrace's banner came before Claude Code took the screen.
	screen, err := term.output("capture-pane", "-p", "-S", "-", "-t", term.name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(screen, "README-EXITED=0") {
		t.Errorf("%s did not exit 0:\n%s", command, screen)
	}
	if len(r.api.allServed()) == served {
		t.Errorf("%s: no request reached the fake API", command)
	}
	if viaRun {
		for _, want := range []string{"cctrace: turns page http://127.0.0.1:", "cctrace session ", ": 1 turn · ", "cctrace: turn lines and logs in "} {
			if !strings.Contains(screen, want) {
				t.Errorf("after %s the screen lacks %q:\n%s", command, want, screen)
			}
		}
	}
	if command == cmdClaude {
		r.stopServe(t)
	}
}

// testCommand checks the test command without running it (CI runs it whole): its help names its
// stages, and .ci/run calls exactly it.
func (r *readmeRun) testCommand(t *testing.T) {
	help := r.shell(t, cmdTests+" -h")
	for _, want := range []string{"Stages: tools, static", "unit", "fuzz", "e2e", "deploy", "bench"} {
		if !strings.Contains(help, want) {
			t.Errorf("%s -h does not name %q:\n%s", cmdTests, want, help)
		}
	}
	ci, err := os.ReadFile(filepath.Join(r.clone, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^exec ` + regexp.QuoteMeta(cmdTests) + `$`).Match(ci) {
		t.Errorf(".ci/run does not run %q:\n%s", cmdTests, ci)
	}
}

// demo runs the demo, looks at its turns page and metrics, and ends it with Ctrl-C.
func (r *readmeRun) demo(t *testing.T) {
	p := r.background(t, "cctrace-demo", cmdDemo)
	harness.Eventually(t, "the demo to replay its sessions", func() error {
		select {
		case <-p.Exited():
			return fmt.Errorf("it exited: %v", p.Err())
		default:
		}
		if !strings.Contains(p.Output(), "Press Ctrl-C to stop") {
			return errors.New("not yet")
		}
		return nil
	})
	out := p.Output()
	m := regexp.MustCompile(`turns page  (http://127\.0\.0\.1:\d+)/\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo names no turns page:\n%s", out)
	}
	if n := len(regexp.MustCompile(`(?m)^cctrace [0-9a-f]{8} turn \d `).FindAllString(out, -1)); n != 5 {
		t.Errorf("%d turn lines, want 5:\n%s", n, out)
	}
	// A session is linked from its row and from the page's tables of the most expensive: count
	// the sessions, not the links.
	if page := get(t, m[1]+"/"); len(uniqueMatches(`href="/sessions/[^"]+"`, page)) != 4 {
		t.Errorf("the turns page does not list the 4 sessions:\n%s", page)
	}
	if metrics := get(t, m[1]+"/metrics"); !strings.Contains(metrics, "cctrace_turns_total{") || !strings.Contains(metrics, "cctrace_build_info{") {
		t.Errorf("/metrics lacks the turns or the build:\n%s", metrics)
	}
	if !strings.Contains(out, "traces      not exported: set OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("the demo does not say how to export traces:\n%s", out)
	}
	// Ctrl-C reaches the whole foreground group: go run and the demo.
	if err := syscall.Kill(-p.PID(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// go run exits 1 when interrupted, whatever its program did (TestDemo checks the demo's own
	// exit status); the summaries say the demo stopped as it should.
	<-p.Exited()
	if n := strings.Count(p.Output(), "cctrace session "); n < 4 {
		t.Errorf("%d session summary lines after Ctrl-C, want at least 4", n)
	}
}

// install runs go install …@latest against the clone's module proxy.
func (r *readmeRun) install(t *testing.T) {
	r.shell(t, cmdInstall)
	out, err := exec.Command(filepath.Join(r.gobin, "cctrace"), "version").Output()
	if err != nil {
		t.Fatalf("the installed cctrace: %v", err)
	}
	rev := r.pseudo[len(r.pseudo)-12:]
	if want := "cctrace " + r.pseudo + " (commit " + rev + ", go"; !strings.HasPrefix(string(out), want) {
		t.Errorf("installed cctrace version = %q, want it to start %q", out, want)
	}
}

// build runs the README's go build, into the test's HOME.
func (r *readmeRun) build(t *testing.T) {
	r.shell(t, cmdBuild)
	if _, err := os.Stat(filepath.Join(r.home, ".local", "bin", "cctrace")); err != nil {
		t.Fatalf("go build made no ~/.local/bin/cctrace: %v", err)
	}
}

// version runs cctrace version: the go build one, first on PATH.
func (r *readmeRun) version(t *testing.T) {
	out := r.shell(t, cmdVersion)
	if !regexp.MustCompile(`^cctrace \S+ \(commit \S+, go\d\S*\)\n$`).MatchString(out) {
		t.Errorf("cctrace version printed %q", out)
	}
}

// serve starts cctrace serve on its default ports, for the claude that follows.
func (r *readmeRun) serve(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8787", "127.0.0.1:9787"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("cctrace serve's default address %s is taken (stop what listens there): %v", addr, err)
		}
		ln.Close()
	}
	r.served = r.background(t, "cctrace-serve", cmdServe)
	if err := r.served.WaitReady(context.Background(), "http://127.0.0.1:9787/healthz"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "serve to name the turns page", func() error {
		if !strings.Contains(r.served.Output(), "cctrace: turns page http://127.0.0.1:9787/") {
			return errors.New("not yet")
		}
		return nil
	})
	if out := r.served.Output(); !strings.Contains(out, "cctrace: export "+strings.TrimPrefix(cmdExport, "export ")) {
		t.Errorf("serve does not print the README's export line:\n%s", out)
	}
}

// export sets a variable for the commands after it, as the shell would.
func (r *readmeRun) export(t *testing.T) {
	kv := strings.TrimPrefix(cmdExport, "export ")
	r.env = append(r.env, kv)
}

// stopServe ends the shared cctrace after Claude Code used it: the session is on its turns page,
// and the summary comes at its exit.
func (r *readmeRun) stopServe(t *testing.T) {
	if r.served == nil {
		t.Fatal("claude ran without cctrace serve before it")
	}
	if turns := get(t, "http://127.0.0.1:9787/api/turns"); !regexp.MustCompile(`"outcome":\s*"end_turn"`).MatchString(turns) {
		t.Errorf("serve's /api/turns has no finished turn:\n%s", turns)
	}
	r.served.Stop()
	if out := r.served.Output(); !strings.Contains(out, "cctrace session ") {
		t.Errorf("serve printed no session summary at exit:\n%s", out)
	}
	r.served = nil
}

// stack checks the team stack's command without Docker: the compose file is there and publishes
// the proxy and the turns page where the README's export points.
func (r *readmeRun) stack(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join(r.clone, "deploy", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"127.0.0.1:8787:8787"`, `"127.0.0.1:9787:9787"`} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("deploy/docker-compose.yml does not publish %s", want)
		}
	}
}

// uniqueMatches returns the distinct matches of the regular expression expr in s.
func uniqueMatches(expr, s string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(expr).FindAllString(s, -1) {
		out[m] = true
	}
	return out
}
