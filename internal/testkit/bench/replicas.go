package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
	"github.com/cctrace/cctrace/internal/testkit/nginxconf"
)

// Gateway is nginx with deploy/nginx/cctrace.conf in front of replicas of one proxy: the team
// gateway as deploy/ ships it. The zero value is not usable; call StartGateway.
type Gateway struct {
	// Nginx is the front; its URL is where clients send.
	Nginx *Variant
	// Replicas are the proxies behind it, all of one kind (cctrace, or the bare proxy).
	Replicas []*Variant
}

// ReplicaPIDs returns the process trees of the replicas, nginx left out.
func (g *Gateway) ReplicaPIDs() []int {
	var pids []int
	for _, r := range g.Replicas {
		pids = append(pids, r.PIDs()...)
	}
	return pids
}

// Stop stops nginx, then the replicas.
func (g *Gateway) Stop() {
	g.Nginx.Stop()
	for _, r := range g.Replicas {
		r.Stop()
	}
}

// gatewayMain is the main config around the shipped site. Arguments: the user line, the prefix
// directory, the site file. nginx as the bench's StartNginx runs it: as many workers as CPUs.
const gatewayMain = `%s
daemon off;
master_process on;
worker_processes auto;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 4096; }
http {
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[3]s;
}
`

// StartGateway starts nginx (bin) named name with site (the contents of nginxconf.Path) in
// front of replicas. nginx's access log is off: it would measure the disk, not the proxies. It
// stops the replicas when nginx does not come up.
func StartGateway(ctx context.Context, name, dir, bin, site string, replicas []*Variant) (*Gateway, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, r := range replicas {
		addrs = append(addrs, r.URL[len("http://"):])
	}
	adapted, err := nginxconf.Site(site, "127.0.0.1:"+strconv.Itoa(port), "off", addrs)
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, name)
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	sitePath := filepath.Join(prefix, "site.conf")
	if err := os.WriteFile(sitePath, []byte(adapted), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s site: %w", name, err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, gatewayMain, user, prefix, sitePath), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s config: %w", name, err)
	}
	// Ready when a request goes through nginx and a replica to the upstream, which answers GET.
	v, err := startVariant(ctx, name, dir, nil, "/", port, bin, "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log"))
	if err != nil {
		return nil, err
	}
	return &Gateway{Nginx: v, Replicas: replicas}, nil
}

// FindSite reads nginxconf.Path from the working directory or the nearest parent that has it.
func FindSite() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", nginxconf.Path, err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, nginxconf.Path)); err == nil {
			return string(b), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding " + nginxconf.Path + ": it is in no parent of the working directory")
		}
		dir = parent
	}
}

// ReplicaSample is one run of the replica benchmark: sessions concurrent Claude-Code-shaped
// sessions through a gateway of n replicas of one kind.
type ReplicaSample struct {
	Kind     string // "cctrace" or "bare"
	Replicas int
	Sessions int
	Result
	// CPU is what the replicas used during the run (nginx not counted); RSS their resident
	// size summed, read after it.
	CPU time.Duration
	RSS int64
	// Load is the 1-minute load average when the run started.
	Load float64
}

// RunSessions runs cell (its Concurrency the number of sessions, each a client with a session
// id of its own) through g, after one unmeasured request per session, and reads the replicas'
// CPU and memory around it. ids numbers the requests; the upstream needs them unique across
// every client of the run.
func RunSessions(ctx context.Context, up *Upstream, rec *traffic.Recording, ids *atomic.Uint64, g *Gateway, kind string, cell Cell) ReplicaSample {
	s := ReplicaSample{Kind: kind, Replicas: len(g.Replicas), Sessions: cell.Concurrency, Load: loadAverage()}
	c := NewClient(up, rec.Body(cell.BodySize), cell.Concurrency, ids)
	defer c.Close()
	warm := Cell{BodySize: cell.BodySize, Concurrency: cell.Concurrency, MaxRequests: cell.Concurrency}
	c.Run(ctx, g.Nginx.URL, warm)
	pids := g.ReplicaPIDs()
	cpu0, _ := ReadCPU(pids)
	s.Result = c.Run(ctx, g.Nginx.URL, cell)
	cpu1, _ := ReadCPU(pids)
	s.CPU = cpu1 - cpu0
	if m, err := ReadMemory(pids); err == nil {
		s.RSS = m.RSS
	}
	return s
}
