package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Nginx is a running nginx whose http block includes one site file, such as
// deploy/nginx/cctrace.conf with its addresses replaced. The zero value is not usable; get one
// from StartNginx.
type Nginx struct {
	dir  string
	proc *process
}

// nginxStartTimeout bounds how long nginx may take to answer.
const nginxStartTimeout = 30 * time.Second

// StartNginx starts nginx (binary from CCTRACE_NGINX_BIN, see Require) in the foreground with a
// main config of its own, every temporary and pid file in the test's temporary directory, and
// site (an http-context config) included in its http block. site must make nginx listen on
// 127.0.0.1 and should log to paths under Dir. It returns once readyURL answers 200 (use a
// location site serves, or any URL another server behind it answers); t.Cleanup stops it.
func StartNginx(t testing.TB, dir, site, readyURL string) *Nginx {
	t.Helper()
	bin := Require(t, EnvNginx, "nginx")
	sitePath := filepath.Join(dir, "site.conf")
	if err := os.WriteFile(sitePath, []byte(site), 0o600); err != nil {
		t.Fatalf("writing nginx site config: %v", err)
	}
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(fmt.Sprintf(nginxMain, dir, sitePath)), 0o600); err != nil {
		t.Fatalf("writing nginx config: %v", err)
	}
	proc, err := startProcess("nginx", filepath.Join(dir, "nginx.log"), bin, "-p", dir, "-c", mainPath, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := &Nginx{dir: dir, proc: proc}
	proc.cleanup(t)
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "error.log")); err == nil {
				t.Logf("nginx error.log:\n%s", tail(b))
			}
		}
	})
	if err := proc.waitReady(readyURL, nginxStartTimeout); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	return n
}

// nginxMain arguments: the directory for nginx's own files, the site file. One worker: every
// request then meets the same passive health state (max_fails counts per worker).
const nginxMain = `daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
events {
    worker_connections 1024;
}
http {
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    access_log off;
    include %[2]s;
}
`

// Dir returns the directory that holds nginx's files; site configs log there.
func (n *Nginx) Dir() string { return n.dir }

// tail returns the last logTail bytes of b.
func tail(b []byte) string {
	if len(b) > logTail {
		return "…" + string(b[len(b)-logTail:])
	}
	return string(b)
}
