package check

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/rulefmt"
)

func TestRuleFilesParse(t *testing.T) {
	recorded := recordedNames(t)
	for _, path := range glob(t, "prometheus/rules/*.yml") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, errs := rulefmt.ParseFile(path, false); len(errs) > 0 {
				t.Fatalf("Prometheus rejects %s: %v", path, errs)
			}
			rel, _ := filepath.Rel(deployDir, path)
			var f ruleFile
			readYAML(t, rel, &f)
			for _, g := range f.Groups {
				for _, r := range g.Rules {
					checkExpr(t, g.Name+"/"+r.Alert+r.Record, r.Expr, recorded)
					if r.Alert == "" {
						continue
					}
					if r.Labels["severity"] == "" {
						t.Errorf("alert %s has no severity label", r.Alert)
					}
					for _, a := range []string{"summary", "description"} {
						if r.Annotations[a] == "" {
							t.Errorf("alert %s has no %s annotation", r.Alert, a)
						}
					}
				}
			}
		})
	}
}

// TestEveryAlertUnitTested checks that tests/*.yml, which promtool runs, shows every alert both
// firing and not firing.
func TestEveryAlertUnitTested(t *testing.T) {
	firing := make(map[string]bool)
	silent := make(map[string]bool)
	for _, path := range glob(t, "prometheus/tests/*.yml") {
		rel, _ := filepath.Rel(deployDir, path)
		var f struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		readYAML(t, rel, &f)
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	var alerts []string
	for _, path := range glob(t, "prometheus/rules/*.yml") {
		rel, _ := filepath.Rel(deployDir, path)
		var f ruleFile
		readYAML(t, rel, &f)
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts = append(alerts, r.Alert)
				}
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts found")
	}
	for _, a := range alerts {
		t.Run(a, func(t *testing.T) {
			if !firing[a] {
				t.Error("no unit test shows it firing")
			}
			if !silent[a] {
				t.Error("no unit test shows it not firing")
			}
		})
	}
	for a := range firing {
		if !slices.Contains(alerts, a) {
			t.Errorf("unit tests name alert %s, which no rule defines", a)
		}
	}
}

// TestBudgetsInOnePlace checks that the spend alerts take their thresholds from the budget
// recording rules, so that budget.yml is the only place to set them.
func TestBudgetsInOnePlace(t *testing.T) {
	var f ruleFile
	readYAML(t, "prometheus/rules/cctrace.yml", &f)
	want := map[string]string{
		"CctraceHourlySpendHigh":         "cctrace:budget_hourly_usd",
		"CctraceProjectedDailySpendHigh": "cctrace:budget_daily_usd",
	}
	seen := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			budget, ok := want[r.Alert]
			if !ok {
				continue
			}
			seen++
			names, err := metricNames(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(names, budget) {
				t.Errorf("%s does not compare with %s", r.Alert, budget)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d spend alerts", seen, len(want))
	}
	if rec := recordedNames(t); !slices.Contains(rec, "cctrace:budget_hourly_usd") || !slices.Contains(rec, "cctrace:budget_daily_usd") {
		t.Errorf("budget recording rules missing; recorded: %v", rec)
	}
}
