package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a server the harness started: a proxy variant or Jaeger, in its own process group,
// with its output in a log file. The zero value is not usable; call StartProcess.
type Process struct {
	Name string
	Log  string // path of the file holding its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts bin with args and extra environment, logging to logPath.
func StartProcess(name, logPath string, env []string, bin string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then kills the group.
func (p *Process) Stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// LogTail returns the last n bytes of the process's log, for error messages.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Tree returns pid and its descendants (nginx's workers, for instance), read from /proc.
func Tree(pid int) []int {
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pids[i], pids[i]))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				pids = append(pids, c)
			}
		}
	}
	return pids
}

// Memory is resident memory in bytes, summed over a process tree.
type Memory struct {
	RSS int64 // VmRSS: resident now
	HWM int64 // VmHWM: the peak resident size (summed per process, so an upper bound for a tree)
}

// ReadMemory reads VmRSS and VmHWM of every pid from /proc/PID/status and sums them.
func ReadMemory(pids []int) (Memory, error) {
	var m Memory
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return m, fmt.Errorf("reading memory of %d: %w", pid, err)
		}
		m.RSS += statusKB(b, "VmRSS:") << 10
		m.HWM += statusKB(b, "VmHWM:") << 10
	}
	return m, nil
}

func statusKB(status []byte, key string) int64 {
	i := bytes.Index(status, []byte(key))
	if i < 0 {
		return 0
	}
	line := status[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// ReadCPU returns the user plus system CPU time every pid has used so far, from /proc/PID/stat
// (10 ms resolution).
func ReadCPU(pids []int) (time.Duration, error) {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("reading cpu of %d: %w", pid, err)
		}
		// The command name (field 2) may hold spaces; the fields after its ")" are fixed.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			return 0, errors.New("reading cpu: malformed /proc stat")
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] is field 3 (state): utime is field 14, stime field 15.
		if len(f) < 13 {
			return 0, errors.New("reading cpu: short /proc stat")
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
