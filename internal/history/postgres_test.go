package history

import (
	"os"
	"testing"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// postgres starts a PostgreSQL server for t (harness.StartPostgres), or returns nil when there is
// none to start outside CI: the tests then cover SQLite alone. Under CI=true a missing server
// fails the test.
func postgres(t testing.TB) *harness.Postgres {
	t.Helper()
	if os.Getenv(harness.EnvPostgres) == "" && !harness.InCI() {
		t.Logf("PostgreSQL not available (set %s; bash scripts/test.sh installs it): testing SQLite alone", harness.EnvPostgres)
		return nil
	}
	return harness.StartPostgres(t)
}
