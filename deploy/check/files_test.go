package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// deployDir is the deploy/ directory, the parent of this module.
const deployDir = ".."

// readYAML decodes the YAML file at path (relative to deploy/) into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, path))
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}

// glob lists the files matching pattern under deploy/, failing when there are none.
func glob(t *testing.T, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir, pattern))
	if err != nil {
		t.Fatalf("globbing %s: %v", pattern, err)
	}
	if len(paths) == 0 {
		t.Fatalf("no files match deploy/%s", pattern)
	}
	return paths
}

// grafanaVars are the Grafana variables the dashboards use in PromQL, with a value of the kind
// Grafana substitutes, so that the expressions parse as Prometheus will receive them.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "1m",
	"$__range", "6h",
	"$model", ".*",
)

// knownPlainMetrics are the series the stack's queries may use that are not cctrace's own
// families nor recording rules: Prometheus's scrape health.
var knownPlainMetrics = []string{"up"}

// metricNames returns the metric names that the selectors in expr ask for.
func metricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var names []string
	for _, vs := range parser.ExtractSelectors(e) {
		name := ""
		for _, m := range vs {
			if m.Name == "__name__" && m.Type.String() == "=" {
				name = m.Value
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%q: a selector without a metric name", expr)
		}
		names = append(names, name)
	}
	return names, nil
}

// recordedNames are the names of the recording rules in prometheus/rules/*.yml.
func recordedNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, path := range glob(t, "prometheus/rules/*.yml") {
		rel, _ := filepath.Rel(deployDir, path)
		var f ruleFile
		readYAML(t, rel, &f)
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					names = append(names, r.Record)
				}
			}
		}
	}
	return names
}

// checkName reports whether name is a series the stack can have: a cctrace family (its exact
// list is checked against the metrics package by deploy/deploy_test.go in the main module), a
// histogram series of one, a recording rule, or a known plain metric.
func checkName(name string, recorded []string) error {
	switch {
	case slices.Contains(recorded, name), slices.Contains(knownPlainMetrics, name):
		return nil
	case cctraceFamily.MatchString(name):
		return nil
	case strings.HasPrefix(name, "cctrace:"):
		return fmt.Errorf("%s: no recording rule records it", name)
	}
	return fmt.Errorf("%s: not a cctrace metric, recording rule or known metric", name)
}

// cctraceFamily matches the names of cctrace's metric families and their histogram series.
var cctraceFamily = regexp.MustCompile(`^cctrace_[a-z0-9_]+$`)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}
