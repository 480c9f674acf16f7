package budget

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

func loadTestBudgets(t *testing.T) *Budgets {
	t.Helper()
	data, err := os.ReadFile("testdata/budgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("testdata/budgets.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRulesWithPromtool renders the rules of testdata/budgets.yaml and runs promtool's checks and
// unit tests (testdata/budgets_test.yml) on them: each alert fires when, and only when, a budget
// of the window is reached.
func TestRulesWithPromtool(t *testing.T) {
	promtool := harness.Require(t, harness.EnvPromtool, "promtool")
	rules, err := Rules(loadTestBudgets(t), "testdata/budgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile("testdata/budgets_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yml": rules, "budgets_test.yml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "budgets_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s\nrules:\n%s", strings.Join(args, " "), err, out, rules)
		}
	}
}

// TestRulesWithoutBudgets checks that an empty budgets file still renders a valid rule file.
func TestRulesWithoutBudgets(t *testing.T) {
	out, err := Rules(&Budgets{}, "empty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "cctrace:budgets_defined") || strings.Contains(string(out), "person_budget_usd\n        expr") {
		t.Errorf("rules of no budgets:\n%s", out)
	}
}
