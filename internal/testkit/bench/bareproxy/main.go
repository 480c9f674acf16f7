// Command bareproxy is the bench's baseline proxy, a program of its own: a bare
// httputil.ReverseProxy (bench.NewBareProxy), or with -taps cctrace's own proxy with its
// observations dropped, or with -go-raw a forwarder without net/http's server and transport
// (bench.GoRaw). cctrace-bench runs it as the variants bare, bare-control, cctrace-proxy and
// go-raw.
//
// It is not a subcommand of cctrace-bench on purpose. Run from the load generator's own
// executable, the proxy shares its code, at the same addresses, with the client and the
// upstream it sits between, and measured faster on the request's way out than the same code
// built into any other program. cctrace and nginx
// never get that advantage, so the baseline must not either.
//
// Usage:
//
//	bareproxy [-taps | -go-raw] -listen 127.0.0.1:PORT -upstream URL
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cctrace/cctrace/internal/testkit/bench"
)

func main() {
	fs := flag.NewFlagSet("bareproxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	upstream := fs.String("upstream", "", "upstream base URL")
	taps := fs.Bool("taps", false, "cctrace's proxy with its taps, its observations dropped, instead of httputil.ReverseProxy")
	goRaw := fs.Bool("go-raw", false, "a forwarder of one goroutine per connection, without http.Server, ReverseProxy or http.Transport (bench.GoRaw)")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *goRaw {
		err = bench.ServeGoRaw(ctx, *listen, *upstream)
	} else {
		err = bench.ServeBare(ctx, *listen, *upstream, *taps)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
}
