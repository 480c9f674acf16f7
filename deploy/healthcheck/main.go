// Command healthcheck is the container health probe of the cctrace image, which has no shell or
// HTTP client of its own:
//
//	healthcheck http://127.0.0.1:9787/healthz
//
// It exits 0 when a GET of the URL answers 2xx within two seconds, and 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// timeout bounds the whole probe; Docker's own --timeout is a second line of defence.
const timeout = 2 * time.Second

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck URL")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := probe(ctx, http.DefaultClient, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		cancel()
		os.Exit(1)
	}
}

// probe GETs url and returns nil when the answer is 2xx.
func probe(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errors.New("probing " + url + ": status " + resp.Status)
	}
	return nil
}
