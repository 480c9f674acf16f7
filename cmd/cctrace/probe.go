package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// probeTimeout bounds each start-up reachability check.
const probeTimeout = 3 * time.Second

// endpoint is a TCP address cctrace depends on, for a start-up reachability check.
type endpoint struct {
	addr string // host:port to dial
	what string // what is unreachable, e.g. "upstream https://api.anthropic.com"
	fix  string // what to do about it
}

// upstreamEndpoint is the upstream, or the HTTP(S) proxy that proxyFor (http.ProxyFromEnvironment,
// as the forwarding transport uses) routes it through.
func upstreamEndpoint(upstream *url.URL, proxyFor func(*http.Request) (*url.URL, error)) endpoint {
	e := endpoint{
		addr: joinHostPort(hostPort(upstream)),
		what: "upstream " + upstream.Redacted(),
		fix:  "check --upstream and your network; Claude Code gets 502 answers until it is",
	}
	if p, err := proxyFor(&http.Request{URL: upstream}); err == nil && p != nil {
		e.addr = joinHostPort(hostPort(p))
		e.what = "proxy " + p.Redacted() + " (HTTPS_PROXY/HTTP_PROXY) for upstream " + upstream.Redacted()
		e.fix = "fix or unset the proxy variable; Claude Code gets 502 answers until it is"
	}
	return e
}

func joinHostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// collectorEndpoint is the OTLP endpoint the OTEL_* environment names, and false when none is set.
func collectorEndpoint(getenv func(string) string) (endpoint, bool) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		raw := strings.TrimSpace(getenv(name))
		if raw == "" {
			continue
		}
		hostport := raw
		if strings.Contains(raw, "://") {
			u, err := url.Parse(raw)
			if err != nil {
				return endpoint{}, false // the exporter reports a malformed endpoint itself
			}
			hostport = u.Host
		}
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			hostport = net.JoinHostPort(strings.Trim(hostport, "[]"), "4317")
		}
		return endpoint{
			addr: hostport,
			what: "OpenTelemetry collector " + raw + " (" + name + ")",
			fix:  "start it, or unset " + name + " to run without exporting; spans are dropped until it answers",
		}, true
	}
	return endpoint{}, false
}

// probe dials e once and writes one warning line to out when that fails. It reports whether e
// answered. A probe cut short by ctx (cctrace stopping) warns of nothing.
func probe(ctx context.Context, out io.Writer, e endpoint) bool {
	dctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", e.addr)
	if err == nil {
		conn.Close()
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	reason := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		reason = op.Err.Error() // without the "dial tcp ADDR:" prefix
	}
	if errors.Is(dctx.Err(), context.DeadlineExceeded) {
		reason = "no answer within " + probeTimeout.String()
	}
	fmt.Fprintf(out, "cctrace: warning: %s is not reachable (%s): %s\n", e.what, reason, e.fix)
	return false
}

// startProbes checks, without delaying start-up, that the upstream and (when exporting) the
// collector accept connections, and warns once for each that does not.
func (a *app) startProbes(upstream *url.URL) {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopProbes = cancel
	targets := []endpoint{upstreamEndpoint(upstream, http.ProxyFromEnvironment)}
	if a.tracing != nil {
		if e, ok := collectorEndpoint(os.Getenv); ok {
			targets = append(targets, e)
		}
	}
	for _, e := range targets {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			probe(ctx, a.out, e)
		}()
	}
	a.checkCredentials(ctx)
}
