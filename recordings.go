// Package cctrace carries, inside every cctrace binary, the recorded Claude Code sessions that
// `cctrace demo` replays: a few of testdata/claude-code's recordings of the real CLI, embedded
// from here because a Go file can embed only files below its own directory. The code is in the
// packages below (instrument, metrics, summary, tracing, internal/…) and cmd/cctrace.
package cctrace

import "embed"

// DemoSessions names the recorded sessions `cctrace demo` replays, in the order it plays them:
// tool calls (one of them failing), a subagent, a request retried after two 529s, and an
// automatic compaction. Each is a directory under testdata/claude-code in DemoRecordings.
var DemoSessions = []string{"parallel_tools", "subagent", "retry_529", "auto_compaction"}

// DemoRecordings holds the exchanges (NNN.json) of DemoSessions.
//
//go:embed testdata/claude-code/parallel_tools/[0-9][0-9][0-9].json
//go:embed testdata/claude-code/subagent/[0-9][0-9][0-9].json
//go:embed testdata/claude-code/retry_529/[0-9][0-9][0-9].json
//go:embed testdata/claude-code/auto_compaction/[0-9][0-9][0-9].json
var DemoRecordings embed.FS
