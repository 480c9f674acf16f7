package stack

import (
	"log/slog"
	"net/url"
	"testing"

	"github.com/cctrace/cctrace/instrument"
)

// TestNewRejectsUpstream checks that New reports what the proxy refuses, and builds nothing then.
func TestNewRejectsUpstream(t *testing.T) {
	u, _ := url.Parse("ftp://api.example.com")
	p, pipe, err := New(u, instrument.New(instrument.Sinks{}), slog.New(slog.DiscardHandler))
	if err == nil || p != nil || pipe != nil {
		t.Fatalf("New(%s) = %v, %v, %v; want an error and nothing built", u, p, pipe, err)
	}
}
