package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before its group is killed.
const stopGrace = 30 * time.Second

// logTail is how much of a process's log is printed when a test fails.
const logTail = 32 << 10

// Process is a program started by StartProcess: leader of its own process group, with its
// stdout and stderr in a log file. The zero value is not usable.
type Process struct {
	Name    string
	LogPath string // the file holding its stdout and stderr
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned; waitErr is set before
	waitErr error
	stopped sync.Once
}

// StartProcess starts bin with args and env as its whole environment (nil: ChildEnv()), its
// output to logPath. The caller stops it.
func StartProcess(name, logPath string, env []string, bin string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s log: %w", name, err)
	}
	// The child inherits the file; ours is not needed once it started.
	defer logFile.Close()
	if env == nil {
		env = ChildEnv()
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Start is StartProcess for a test: the log goes to the test's temporary directory, and when
// the test ends the process is stopped and, if the test failed, its log printed.
func Start(t testing.TB, name string, env []string, bin string, args ...string) *Process {
	t.Helper()
	p, err := StartProcess(name, filepath.Join(t.TempDir(), name+".log"), env, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	p.cleanup(t)
	return p
}

// ChildEnv returns the test's environment with extra added, less the OTEL_* variables, which
// would otherwise point the servers' own telemetry at whatever the developer's shell configured.
func ChildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited returns a channel closed once the process has ended; Err then says how.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err returns how the process ended, once Exited is closed.
func (p *Process) Err() error { return p.waitErr }

// Signal sends sig to the process (not its group).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM to the process group, waits up to stopGrace, then sends SIGKILL, and
// waits for the process to be reaped. It reports whether the process ended within the grace
// (or had ended before). It is safe to call more than once.
func (p *Process) Stop() bool {
	graceful := true
	p.stopped.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		signalGroup(p.cmd.Process, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			graceful = false
			signalGroup(p.cmd.Process, syscall.SIGKILL)
			<-p.exited
		}
		// The leader is gone; make sure no child of it outlives the test. Orphans are reaped
		// by init, so wait for that.
		signalGroup(p.cmd.Process, syscall.SIGKILL)
		_ = poll(context.Background(), Patience, nil, func() error {
			if !groupGone(p.cmd.Process) {
				return errors.New("group still there")
			}
			return nil
		})
	})
	return graceful
}

// WaitReady polls url until it answers 200, for up to Patience or until ctx ends. If the process
// exits first, the error says how.
func (p *Process) WaitReady(ctx context.Context, url string) error {
	err := waitHTTP(ctx, url, p.exited)
	if errors.Is(err, errExited) {
		return fmt.Errorf("%w (%s: %v)", err, p.Name, p.waitErr)
	}
	return err
}

// Output returns everything the process wrote so far.
func (p *Process) Output() string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.LogPath, err)
	}
	return string(data)
}

// LogTail returns up to the last logTail bytes of the process's log.
func (p *Process) LogTail() string { return tail(p.Output()) }

// tail returns the last logTail bytes of s.
func tail(s string) string {
	if len(s) > logTail {
		return "…" + s[len(s)-logTail:]
	}
	return s
}

// cleanup stops the process when the test ends and prints its log if the test failed.
func (p *Process) cleanup(t testing.TB) {
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", p.Name, p.LogPath, p.LogTail())
		}
	})
}

// startAttempts is how often a Start function tries with fresh ports when the server exits
// during start-up (typically because another process took a port FreePort picked).
const startAttempts = 3

// retryStart calls start with a fresh directory up to startAttempts times, until it returns
// no error, and fails the test after the last. start stops what it started when it fails.
func retryStart[S any](t testing.TB, name string, start func(dir string) (S, error)) S {
	t.Helper()
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var s S
		if s, err = start(t.TempDir()); err == nil {
			return s
		}
		t.Logf("%s start attempt %d: %v", name, attempt, err)
	}
	t.Fatalf("starting %s: %v", name, err)
	panic("unreachable")
}

// startServer starts bin like StartProcess, logging to dir/name.log, and waits until ready
// answers 200. When it does not, it stops the process and returns an error with its log's tail.
func startServer(ctx context.Context, name, dir string, env []string, ready, bin string, args ...string) (*Process, error) {
	p, err := StartProcess(name, filepath.Join(dir, name+".log"), env, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx, ready); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%w\n%s", err, p.LogTail())
	}
	return p, nil
}
