package tracing

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// logBuffer is a concurrency-safe log destination: export errors arrive on SDK goroutines.
type logBuffer struct{ harness.Buffer }

func (b *logBuffer) lines() []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestExportErrorHandler(t *testing.T) {
	tests := []struct {
		name string
		// errors arrive at these offsets from the start; flush runs after the last.
		at    []time.Duration
		flush bool
		want  []string // substrings of the expected log lines, in order
	}{
		{name: "no errors", flush: true},
		{
			name: "one error is one warning",
			at:   []time.Duration{0},
			want: []string{"OpenTelemetry export failing"},
		},
		{
			name: "a burst is one warning",
			at:   []time.Duration{0, time.Second, 5 * time.Second, 59 * time.Second},
			want: []string{"OpenTelemetry export failing"},
		},
		{
			name: "later errors are summarised at most once a minute",
			at: []time.Duration{0, 10 * time.Second, 20 * time.Second, 61 * time.Second,
				70 * time.Second, 100 * time.Second, 125 * time.Second},
			want: []string{
				"OpenTelemetry export failing",
				`still failing" errors=3`,
				`still failing" errors=3`,
			},
		},
		{
			name:  "flush reports what was not logged yet",
			at:    []time.Duration{0, time.Second, 2 * time.Second},
			flush: true,
			want:  []string{"OpenTelemetry export failing", `not logged before shutdown" errors=2`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs logBuffer
			now := t0
			h := newExportErrorHandler(logs.logger(), func() time.Time { return now })
			for _, d := range tt.at {
				now = t0.Add(d)
				h.Handle(errors.New("rpc error: code = Unavailable desc = connection refused"))
			}
			if tt.flush {
				h.flush()
			}
			lines := logs.lines()
			if len(lines) != len(tt.want) {
				t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(tt.want), strings.Join(lines, "\n"))
			}
			for i, want := range tt.want {
				if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "level=WARN") {
					t.Errorf("line %d = %q, want a warning containing %q", i, lines[i], want)
				}
			}
			if h.count() != len(tt.at) {
				t.Errorf("count = %d, want %d", h.count(), len(tt.at))
			}
		})
	}
}
