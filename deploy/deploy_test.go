package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
)

// metricToken matches a cctrace metric name in any of the stack's files.
var metricToken = regexp.MustCompile(`\bcctrace_[a-z0-9_]+\b`)

// histogramSuffixes are the series suffixes of a histogram family.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// metricNames are the families cctrace registers: its metrics', its limits' and its history's.
var metricNames = slices.Concat(metrics.MetricNames, limits.MetricNames, history.MetricNames)

// family returns the metricNames family that the series name belongs to, if any.
func family(name string) (string, bool) {
	if slices.Contains(metricNames, name) {
		return name, true
	}
	for _, s := range histogramSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok && slices.Contains(metricNames, base) {
			return base, true
		}
	}
	return "", false
}

// TestMetricNamesExposed checks every cctrace metric name in the dashboards and rules against
// the families cctrace registers. The PromQL itself is parsed by the deploy/check
// module, which keeps Prometheus's own libraries out of this module.
func TestMetricNamesExposed(t *testing.T) {
	var files []string
	for _, pattern := range []string{"grafana/dashboards/*.json", "prometheus/rules/*.yml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no dashboards or rules found")
	}
	used := make(map[string]bool)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			names := metricToken.FindAllString(withoutComments(f, string(b)), -1)
			if len(names) == 0 && strings.HasSuffix(f, ".json") {
				t.Error("names no cctrace metric")
			}
			for _, n := range names {
				fam, ok := family(n)
				if !ok {
					t.Errorf("%s is not a metric cctrace exposes", n)
					continue
				}
				used[fam] = true
			}
		})
	}
	// The dashboards promise a view of everything cctrace measures; an unused family is a metric
	// nobody can see.
	for _, n := range metricNames {
		if !used[n] {
			t.Errorf("%s appears in no dashboard or rule", n)
		}
	}
}

// withoutComments drops the comment lines of a YAML file, which may name files like
// cctrace_test.yml; JSON has no comments.
func withoutComments(path, text string) string {
	if !strings.HasSuffix(path, ".yml") {
		return text
	}
	lines := strings.Split(text, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

func TestFamily(t *testing.T) {
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"cctrace_tokens_total", "cctrace_tokens_total", true},
		{"cctrace_turn_duration_seconds_bucket", "cctrace_turn_duration_seconds", true},
		{"cctrace_turn_duration_seconds_count", "cctrace_turn_duration_seconds", true},
		{"cctrace_token_total", "", false},
		{"cctrace_cost_usd", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := family(tt.name)
			if got != tt.want || ok != tt.ok {
				t.Errorf("family(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
}
