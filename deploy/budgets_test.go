package deploy

import (
	"bytes"
	"os"
	"testing"

	"github.com/cctrace/cctrace/internal/budget"
	"github.com/cctrace/cctrace/internal/identity"
)

// TestBudgetRulesRendered checks that prometheus/rules/people-budgets.yml is what
// "cctrace budgets rules" renders from budgets.yaml today: the file Prometheus loads must not
// drift from the budgets cctrace enforces.
func TestBudgetRulesRendered(t *testing.T) {
	data, err := os.ReadFile("cctrace/budgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := budget.Parse("cctrace/budgets.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := budget.Rules(b, "deploy/cctrace/budgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("prometheus/rules/people-budgets.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("prometheus/rules/people-budgets.yml is stale: go run ./cmd/cctrace budgets rules --budgets deploy/cctrace/budgets.yaml --out deploy/prometheus/rules/people-budgets.yml")
	}
}

// TestDirectoryParses checks the stack's sample directory, which compose mounts into cctrace.
func TestDirectoryParses(t *testing.T) {
	data, err := os.ReadFile("cctrace/directory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := identity.ParseDirectory("cctrace/directory.yaml", data); err != nil {
		t.Error(err)
	}
}
