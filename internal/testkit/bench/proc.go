package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

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
