package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Nginx is a running nginx whose http block includes one site file, such as
// deploy/nginx/cctrace.conf with its addresses replaced. The zero value is not usable; get one
// from StartNginx or RunNginx.
type Nginx struct {
	dir  string
	proc *Process
}

// StartNginx is RunNginx with the binary from CCTRACE_NGINX_BIN (see Require) and one worker, so
// that every request meets the same passive health state (max_fails counts per worker).
// t.Cleanup stops it, and prints its error.log if the test failed.
func StartNginx(t testing.TB, dir, site, readyURL string) *Nginx {
	t.Helper()
	bin := Require(t, EnvNginx, "nginx")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "error.log")); err == nil {
				t.Logf("nginx error.log:\n%s", tail(string(b)))
			}
		}
	})
	n, err := RunNginx(context.Background(), bin, dir, site, readyURL, 1)
	if err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	n.proc.cleanup(t)
	return n
}

// RunNginx starts nginx (bin) in the foreground with workers worker processes (0: one per CPU),
// a main config of its own, every temporary and pid file in dir, and site (an http-context
// config) included in its http block. site must make nginx listen on 127.0.0.1 and should log
// to paths under dir. It returns once readyURL answers 200 (a location site serves, or any URL
// a server behind it answers); the caller stops it.
func RunNginx(ctx context.Context, bin, dir, site, readyURL string, workers int) (*Nginx, error) {
	sitePath := filepath.Join(dir, "site.conf")
	if err := os.WriteFile(sitePath, []byte(site), 0o600); err != nil {
		return nil, fmt.Errorf("writing nginx site config: %w", err)
	}
	user, procs := "", "auto"
	if os.Geteuid() == 0 {
		// Workers would otherwise run as nobody and could not open the temporary directories.
		user = "user root;"
	}
	if workers > 0 {
		procs = fmt.Sprint(workers)
	}
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, fmt.Appendf(nil, nginxMain, user, procs, dir, sitePath), 0o600); err != nil {
		return nil, fmt.Errorf("writing nginx config: %w", err)
	}
	proc, err := startServer(ctx, "nginx", dir, nil, readyURL, bin, "-p", dir, "-c", mainPath, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	return &Nginx{dir: dir, proc: proc}, nil
}

// nginxMain arguments: the user line, the number of workers, the directory for nginx's own
// files, the site file.
const nginxMain = `%s
daemon off;
master_process on;
worker_processes %s;
pid %[3]s/nginx.pid;
events {
    worker_connections 4096;
}
http {
    client_body_temp_path %[3]s/client_body;
    proxy_temp_path %[3]s/proxy;
    fastcgi_temp_path %[3]s/fastcgi;
    uwsgi_temp_path %[3]s/uwsgi;
    scgi_temp_path %[3]s/scgi;
    access_log off;
    include %[4]s;
}
`

// Dir returns the directory that holds nginx's files; site configs log there.
func (n *Nginx) Dir() string { return n.dir }

// Process returns the nginx master process.
func (n *Nginx) Process() *Process { return n.proc }
