package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a server gets to exit after SIGTERM before its group is killed.
const stopGrace = 10 * time.Second

// logTail is how much of a server's log is printed when a test fails.
const logTail = 32 << 10

// process is one server subprocess, leader of its own process group, with its output in a file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned; waitErr is set before
	waitErr error
	stopped sync.Once
}

// startProcess starts bin with args, output to logPath. The caller registers stop.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	return startProcessEnv(name, logPath, nil, bin, args...)
}

// startProcessEnv is startProcess with env added to the child's environment.
func startProcessEnv(name, logPath string, env []string, bin string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s log: %w", name, err)
	}
	// The child inherits the file; ours is not needed once it started.
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(childEnv(), env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is the test's environment without OTEL_* variables, which would otherwise point the
// servers' own telemetry at whatever the developer's shell configured.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends SIGTERM to the process group, waits up to stopGrace, then sends SIGKILL, and
// waits for the process to be reaped. It is safe to call more than once.
func (p *process) stop() {
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
			signalGroup(p.cmd.Process, syscall.SIGKILL)
			<-p.exited
		}
		// The leader is gone; make sure no child of it outlives the test. Orphans are reaped
		// by init, so give that a moment.
		signalGroup(p.cmd.Process, syscall.SIGKILL)
		for deadline := time.Now().Add(stopGrace); !groupGone(p.cmd.Process) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// waitReady polls url until it answers 200. If the server exits first, the error says how.
func (p *process) waitReady(url string, timeout time.Duration) error {
	err := waitHTTP(url, timeout, p.exited)
	if errors.Is(err, errExited) {
		return fmt.Errorf("%w (%s: %v)", err, p.name, p.waitErr)
	}
	return err
}

// logText returns up to the last logTail bytes of the server's log.
func (p *process) logText() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	if len(data) > logTail {
		data = append([]byte("…"), data[len(data)-logTail:]...)
	}
	return string(data)
}

// cleanup stops the process when the test ends and prints its log if the test failed.
func (p *process) cleanup(t testing.TB) {
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", p.name, p.logPath, p.logText())
		}
	})
}
