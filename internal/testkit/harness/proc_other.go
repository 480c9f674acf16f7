//go:build !linux

package harness

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: process groups and parent-death signals are set up on Linux only,
// the platform the end-to-end suite runs on.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals p alone; see sysProcAttr. Errors mean the process is already gone.
func signalGroup(p *os.Process, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		_ = p.Kill()
		return
	}
	_ = p.Signal(sig)
}

// groupGone reports true: without process groups there is nothing left to wait for once the
// process itself was reaped.
func groupGone(*os.Process) bool { return true }
