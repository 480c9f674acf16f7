package harness

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so stop can signal everything it
// spawned, and has the kernel kill it if the test binary dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group led by p. Errors mean the group is already gone.
func signalGroup(p *os.Process, sig syscall.Signal) {
	_ = syscall.Kill(-p.Pid, sig)
}

// groupGone reports whether no process of the group led by p is left, zombies included.
func groupGone(p *os.Process) bool {
	return errors.Is(syscall.Kill(-p.Pid, 0), syscall.ESRCH)
}
