// Command cctrace-fakeapi serves a scripted fake of the Anthropic Messages API, for demos and for
// recording what Claude Code sends:
//
//	go run ./cmd/cctrace-fakeapi --listen 127.0.0.1:0 --scenario tool_roundtrip [--record DIR] [--provider vertex] [--page-cert FILE]
//
// It prints its base URL on stdout (use it as ANTHROPIC_BASE_URL, or as the base URL of the
// provider it plays) and serves until interrupted. It demands no credential.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/fakeapi"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cctrace-fakeapi:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("cctrace-fakeapi", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	scenario := fs.String("scenario", "tool_roundtrip",
		"scenario to serve: "+strings.Join(fakeapi.ScenarioNames(), ", "))
	record := fs.String("record", "", "directory to record every exchange into (NNN.json)")
	providerName := fs.String("provider", "anthropic", "provider to answer as: anthropic, vertex, bedrock or foundry")
	pageCert := fs.String("page-cert", "", "serve the page WebFetch calls fetch over HTTPS, and write its certificate to this file (for NODE_EXTRA_CA_CERTS)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing flags: %w", err)
	}
	provider, err := wire.ParseProvider(*providerName)
	if err != nil {
		return fmt.Errorf("choosing provider: %w", err)
	}
	script, err := fakeapi.Scenario(*scenario)
	if err != nil {
		return fmt.Errorf("choosing scenario: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := []fakeapi.Option{fakeapi.WithLogger(logger), fakeapi.WithProvider(provider, fakeapi.Auth{})}
	if *record != "" {
		opts = append(opts, fakeapi.WithRecordDir(*record))
	}
	if *pageCert != "" {
		page := fakeapi.NewPageServer()
		defer page.Close()
		if err := os.WriteFile(*pageCert, fakeapi.PageCertPEM(page), 0o600); err != nil {
			return fmt.Errorf("writing the page's certificate: %w", err)
		}
		opts = append(opts, fakeapi.WithPageURL(page.URL+"/cctrace-page"))
	}
	srv := fakeapi.New(script, opts...)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	fmt.Printf("http://%s\n", ln.Addr())

	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	total := srv.TotalUsage()
	logger.Info("served", "requests", len(srv.Served()), "input_tokens", total.InputTokens,
		"cache_read_input_tokens", total.CacheReadInputTokens,
		"cache_creation_input_tokens", total.CacheCreationInputTokens,
		"output_tokens", total.OutputTokens)
	return nil
}
