package main

import (
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"golang.org/x/term"
	"google.golang.org/grpc/grpclog"
)

// The terminal: while `cctrace run` runs an interactive command such as Claude Code, the command
// owns the terminal, and a line cctrace wrote into its screen would land in its prompt box and
// be half erased by the next redraw. Then cctrace writes nothing there until the command exits.

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// ownsTerminal reports whether the command cctrace run starts takes over the terminal: cctrace's
// stdin and stderr (where its lines would go) are terminals, and the command is not Claude Code
// in print mode (-p), which answers and exits as any command does and keeps cctrace's lines.
func ownsTerminal(stdinTerminal, stderrTerminal, claudePrint bool) bool {
	return stdinTerminal && stderrTerminal && !claudePrint
}

// runLogPath is the file the turn lines and logs of one `cctrace run` go to while its command
// owns the terminal: ${XDG_STATE_HOME:-~/.local/state}/cctrace/run-<time>-<pid>.log. It creates
// the directory, readable by the user alone (turn lines name sessions and prompts' costs).
func runLogPath(getenv func(string) string, now time.Time, pid int) (string, error) {
	dir := stateDir(getenv)
	if dir == "" {
		return "", errors.New("finding the log directory: neither XDG_STATE_HOME nor a home directory is set (give --log FILE)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the log directory: %w (give --log FILE)", err)
	}
	return filepath.Join(dir, "run-"+now.Format("20060102-150405")+"-"+strconv.Itoa(pid)+".log"), nil
}

// keepOffTerminal sends what libraries print by themselves to out, the log file, while the
// command owns the terminal: the standard logger, OpenTelemetry's own logger (through log) and
// gRPC's errors (its default logger writes them to stderr). cctrace's own lines and logs go to
// out already.
func keepOffTerminal(out io.Writer, log *slog.Logger) {
	stdlog.SetOutput(out)
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, out))
}
