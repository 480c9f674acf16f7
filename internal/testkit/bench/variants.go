package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/bodybuf"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// Variant is one way of reaching the upstream: directly, or through a proxy process.
// The zero value is not usable; get one from a Start function or Direct.
type Variant struct {
	Name string
	URL  string           // base URL clients send to
	Proc *harness.Process // the proxy process; nil for direct
	// Metrics is a cctrace variant's metrics address (http://127.0.0.1:PORT), empty for the
	// others: what it has tracked is read from there (ReadTracked).
	Metrics string
}

// PIDs returns the proxy's process tree, nil for direct.
func (v *Variant) PIDs() []int {
	if v.Proc == nil {
		return nil
	}
	return Tree(v.Proc.PID())
}

// Stop stops the proxy process, if any.
func (v *Variant) Stop() {
	if v.Proc != nil {
		v.Proc.Stop()
	}
}

// Direct is the upstream itself, with no proxy in between.
func Direct(up *Upstream) *Variant { return &Variant{Name: "direct", URL: up.URL()} }

func startVariant(ctx context.Context, name, dir string, env []string, readyPath string, port int, bin string, args ...string) (*Variant, error) {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	p, err := harness.StartProcess(name, filepath.Join(dir, name+".log"), append(os.Environ(), env...), bin, args...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx, url+readyPath); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s did not come up: %w\n%s", name, err, p.LogTail())
	}
	return &Variant{Name: name, URL: url, Proc: p}, nil
}

// StartBare starts bin (internal/testkit/bench/bareproxy) as a bare httputil.ReverseProxy in its own
// process, so that its CPU and memory are read like every other proxy's. name is the variant's:
// "bare", or "bare-control" for a second one (see Control).
func StartBare(ctx context.Context, name, dir, bin, upstream string) (*Variant, error) {
	return startBareproxy(ctx, name, dir, bin, upstream)
}

// StartProxyOnly starts bin (internal/testkit/bench/bareproxy) with -taps: cctrace's own proxy
// (internal/proxy, with its request and response taps, body copies and inline stream decoder)
// handing every exchange to an Observer that drops it. Against bare it shows what the forwarding
// path costs; against cctrace, what decoding requests and tracking, metrics and spans do.
func StartProxyOnly(ctx context.Context, dir, bin, upstream string) (*Variant, error) {
	return startBareproxy(ctx, "cctrace-proxy", dir, bin, upstream, "-taps")
}

// StartGoRaw starts bin (internal/testkit/bench/bareproxy) with -go-raw: a forwarder of one goroutine
// per client connection, without net/http's server, ReverseProxy or transport (GoRaw). Against
// bare and nginx it shows how much of nginx's lead a Go program can have.
func StartGoRaw(ctx context.Context, dir, bin, upstream string) (*Variant, error) {
	return startBareproxy(ctx, "go-raw", dir, bin, upstream, "-go-raw")
}

// startBareproxy starts bin (internal/testkit/bench/bareproxy) with mode's flags as variant name.
func startBareproxy(ctx context.Context, name, dir, bin, upstream string, mode ...string) (*Variant, error) {
	port, err := harness.PickFreePort()
	if err != nil {
		return nil, err
	}
	args := slices.Concat(mode, []string{"-listen", "127.0.0.1:" + strconv.Itoa(port), "-upstream", upstream})
	return startVariant(ctx, name, dir, nil, "/", port, bin, args...)
}

// NewBareProxy returns the bare proxy the comparison is made against: httputil.ReverseProxy with
// FlushInterval -1, over a transport set up like cctrace's default one (16 idle connections per
// host, no compression), so that the difference is cctrace's taps and pipeline.
//
// Its one addition is endAtLength on request bodies. Without it Go's transport, after sending a
// body of known length, reads once more to see its EOF; by then the server has closed the body
// (the response headers went out), the read fails, and the transport drops the upstream
// connection mid-stream, which cut streams short in the first full runs. cctrace's request tap
// does the same.
func NewBareProxy(upstream *url.URL) http.Handler {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ForceAttemptHTTP2 = true
	t.MaxIdleConns = 100
	t.MaxIdleConnsPerHost = 16
	t.DisableCompression = true
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		Transport:     t,
		FlushInterval: -1,
		ErrorLog:      log.New(os.Stderr, "bare: ", 0),
	}
	return &bareProxy{rp: rp, transport: t}
}

// bareProxy is the bare ReverseProxy with endAtLength on request bodies.
type bareProxy struct {
	rp        *httputil.ReverseProxy
	transport *http.Transport
}

// ServeHTTP forwards r.
func (p *bareProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > 0 {
		r.Body = &endAtLength{ReadCloser: r.Body, left: r.ContentLength}
	}
	p.rp.ServeHTTP(w, r)
}

// CloseIdleConnections closes the proxy's idle upstream connections.
func (p *bareProxy) CloseIdleConnections() { p.transport.CloseIdleConnections() }

// endAtLength answers EOF once a body's Content-Length has been read, without reading further.
type endAtLength struct {
	io.ReadCloser
	left int64
}

func (b *endAtLength) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

// ServeBare runs the bare proxy on listen until ctx ends: the bareproxy command.
func ServeBare(ctx context.Context, listen, upstream string, taps bool) error {
	u, err := url.Parse(upstream)
	if err != nil {
		return fmt.Errorf("parsing upstream: %w", err)
	}
	var h http.Handler = NewBareProxy(u)
	if taps {
		bufs := &bodybuf.Pool{}
		if h, err = proxy.New(u, dropObserver{bufs}, proxy.WithBodyBuffers(bufs)); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// The server cctrace serves with: the header timeout starts at a connection's first byte
	// (proxy.AcceptOnFirstByte). With it from the connection's start, the bench's clients lost
	// requests on connections they had opened 30 s before using them.
	const idle = 10 * time.Minute // cctrace's, for new and kept-alive connections alike
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: idle}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(proxy.AcceptOnFirstByte(ln, idle)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// dropObserver drops what cctrace's proxy observed, giving the body copies back to bufs.
type dropObserver struct{ bufs *bodybuf.Pool }

func (o dropObserver) RequestRead(_ *wire.Request, body []byte)   { o.bufs.Put(body) }
func (o dropObserver) ResponseDone(_ *wire.Response, body []byte) { o.bufs.Put(body) }

// nginxSite proxies everything to the upstream without buffering either body, keeping as many
// idle upstream connections as cctrace does. Arguments: listen port, upstream host:port.
const nginxSite = `client_max_body_size 0;
upstream messages {
    server %[2]s;
    keepalive 16;
}
server {
    listen 127.0.0.1:%[1]d;
    location / {
        proxy_pass http://messages;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $proxy_host;
        proxy_buffering off;
        proxy_request_buffering off;
        proxy_read_timeout 600s;
    }
}
`

// StartNginx starts nginx (bin) in front of the upstream with nginxSite, as many workers as
// CPUs.
func StartNginx(ctx context.Context, dir, bin, upstream string) (*Variant, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing upstream: %w", err)
	}
	return startNginx(ctx, "nginx", dir, bin, func(port int) (string, error) {
		return fmt.Sprintf(nginxSite, port, u.Host), nil
	})
}

// startNginx starts nginx (bin) named name, its files in dir/name, with the site that site
// returns for its port; it is ready when a GET goes through to the upstream.
func startNginx(ctx context.Context, name, dir, bin string, site func(port int) (string, error)) (*Variant, error) {
	port, err := harness.PickFreePort()
	if err != nil {
		return nil, err
	}
	conf, err := site(port)
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, name)
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	n, err := harness.RunNginx(ctx, bin, prefix, conf, url+"/", 0)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &Variant{Name: name, URL: url, Proc: n.Process()}, nil
}

// StartCctrace starts the cctrace binary in front of the upstream as `cctrace serve`, exporting
// spans over OTLP gRPC to otlpEndpoint (http://127.0.0.1:PORT). Its turn summary lines go to its
// log file.
func StartCctrace(ctx context.Context, name, dir, bin, upstream, otlpEndpoint string) (*Variant, error) {
	port, err := harness.PickFreePort()
	if err != nil {
		return nil, err
	}
	mport, err := harness.PickFreePort()
	if err != nil {
		return nil, err
	}
	state, err := filepath.Abs(filepath.Join(dir, name+"-state")) // XDG_STATE_HOME must be absolute
	if err != nil {
		return nil, err
	}
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlpEndpoint,
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_SERVICE_NAME=" + name, // the no-op collector counts spans by variant
		// Its fingerprint secret in the run's directory, not in the user's state directory; by
		// the environment, which a base commit's build without --state-dir reads too.
		"XDG_STATE_HOME=" + state,
	}
	v, err := startVariant(ctx, name, dir, env, "", mport, bin, "serve",
		"--listen", "127.0.0.1:"+strconv.Itoa(port),
		"--metrics-listen", "127.0.0.1:"+strconv.Itoa(mport),
		"--upstream", upstream, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	v.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	v.Metrics = "http://127.0.0.1:" + strconv.Itoa(mport)
	return v, nil
}
