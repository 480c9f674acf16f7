package instrument

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheMissRecorded replays the real CLI going on with a session (--continue) with another
// --model, and with another tool list: the second run's first request misses the cache, and the
// miss is named by what changed.
func TestCacheMissRecorded(t *testing.T) {
	tests := []struct {
		dir   string
		cause CacheMissCause
		where string // how Where begins
	}{
		{"cache_model_change", CacheMissModel, "claude-opus-5-5 → claude-sonnet-4-5"},
		// The first run had only Bash and Read (--tools), and a placeholder for deferred tools.
		{"cache_tools_change", CacheMissTools, "added Agent, CronCreate, "},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			rec, _ := replayed(t, filepath.Join("../testdata/claude-code", tt.dir))
			var misses []*CacheMiss
			for _, s := range spansByRequest(rec) {
				if m := s.Chat.CacheMiss; m != nil {
					misses = append(misses, m)
				}
			}
			if len(misses) != 1 {
				t.Fatalf("misses %+v, want one", misses)
			}
			m := misses[0]
			if m.Cause != tt.cause || !strings.HasPrefix(m.Where, tt.where) || m.Missed < MinCacheMiss {
				t.Errorf("miss %+v, want %s %q", m, tt.cause, tt.where)
			}
		})
	}
}
