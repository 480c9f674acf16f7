package harness

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Postgres is a PostgreSQL server on 127.0.0.1 with a cluster of its own in a temporary
// directory, trusting local connections. The zero value is not usable; get one from
// StartPostgres.
type Postgres struct {
	port  int
	proc  *Process
	admin *sql.DB
}

// databaseSeq names the databases a test process makes apart.
var databaseSeq atomic.Int64

// StartPostgres starts PostgreSQL (the server binary from CCTRACE_POSTGRES_BIN, see Require;
// initdb beside it) and returns once it takes connections; t.Cleanup stops it and removes its
// cluster. PostgreSQL refuses to run as root: as root, initdb and the server run as the user
// postgres that Debian's package creates (through runuser), in a directory that user owns.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin := Require(t, EnvPostgres, "PostgreSQL")
	initdb := filepath.Join(filepath.Dir(bin), "initdb")
	var as []string // the command that runs a program as the cluster's owner; none if not root
	var owner *user.User
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root, and there is no user postgres to run it as (apt-get install postgresql makes one): %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("running PostgreSQL as postgres: %v", err)
		}
		owner, as = u, []string{runuser, "-u", "postgres", "--"}
	}
	// Not the test's temporary directory: its parents are root's alone, out of the owner's reach.
	dir, err := os.MkdirTemp("", "cctrace-postgres-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(as0(as, initdb), args(as, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")...)
	cmd.Env = ChildEnv("LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	return retryStart(t, "postgres", func(string) (*Postgres, error) {
		return startPostgresOnce(t, as, bin, dir, data)
	})
}

// as0 and args make the command line of bin run as the cluster's owner.
func as0(as []string, bin string) string {
	if len(as) == 0 {
		return bin
	}
	return as[0]
}

func args(as []string, bin string, rest ...string) []string {
	if len(as) == 0 {
		return rest
	}
	return append(append(append([]string{}, as[1:]...), bin), rest...)
}

func startPostgresOnce(t testing.TB, as []string, bin, dir, data string) (*Postgres, error) {
	port, err := PickFreePort()
	if err != nil {
		return nil, err
	}
	// No fsync: the cluster lives as long as the test.
	p, err := StartProcess("postgres", filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port)), ChildEnv("LC_ALL=C"), as0(as, bin),
		args(as, bin, "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")...)
	if err != nil {
		return nil, err
	}
	pg := &Postgres{port: port, proc: p}
	admin, err := sql.Open("pgx", pg.dsn("postgres"))
	if err != nil {
		p.Stop()
		return nil, err
	}
	err = poll(context.Background(), Patience, p.exited, func() error { return admin.Ping() })
	if err != nil {
		admin.Close()
		p.Stop()
		return nil, fmt.Errorf("%w\n%s", err, p.LogTail())
	}
	pg.admin = admin
	t.Cleanup(func() {
		admin.Close()
		p.Stop()
		if t.Failed() {
			t.Logf("postgres log (%s):\n%s", p.LogPath, p.LogTail())
		}
	})
	return pg, nil
}

func (p *Postgres) dsn(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, database)
}

// Database creates an empty database and returns its connection URL.
func (p *Postgres) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), databaseSeq.Add(1))
	if _, err := p.admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return p.dsn(name)
}

// Stop stops the server before the test ends, as a database that goes away under its clients:
// fast shutdown, which ends their sessions, rather than waiting for them.
func (p *Postgres) Stop() {
	_ = p.admin.Close()
	_ = p.proc.Signal(syscall.SIGINT)
	p.proc.Stop()
}
