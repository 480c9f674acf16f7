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

// StartGateway starts nginx (bin) named name with site (the contents of nginxconf.Path) in
// front of replicas, as many workers as CPUs. nginx's access log is off: it would measure the
// disk, not the proxies. Ready when a request goes through nginx and a replica to the upstream.
func StartGateway(ctx context.Context, name, dir, bin, site string, replicas []*Variant) (*Gateway, error) {
	var addrs []string
	for _, r := range replicas {
		addrs = append(addrs, r.URL[len("http://"):])
	}
	v, err := startNginx(ctx, name, dir, bin, func(port int) (string, error) {
		return nginxconf.Site(site, "127.0.0.1:"+strconv.Itoa(port), "off", addrs)
	})
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
