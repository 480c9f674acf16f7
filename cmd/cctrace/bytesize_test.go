package main

import (
	"strings"
	"testing"
)

func TestByteSize(t *testing.T) {
	tests := []struct {
		in    string
		bytes int64
		out   string
	}{
		{"268435456", 256 << 20, "256MiB"},
		{"256MiB", 256 << 20, "256MiB"},
		{"256 MiB", 256 << 20, "256MiB"},
		{"256mib", 256 << 20, "256MiB"},
		{"32MiB", 32 << 20, "32MiB"},
		{"1GiB", 1 << 30, "1GiB"},
		{"1536KiB", 1536 << 10, "1536KiB"},
		{"2TiB", 2 << 40, "2TiB"},
		{"1000", 1000, "1000"},
		{"1000B", 1000, "1000"},
		{"0", 0, "0"},
		{"-1", -1, "-1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s byteSize
			if err := s.Set(tt.in); err != nil {
				t.Fatal(err)
			}
			if int64(s) != tt.bytes || s.String() != tt.out {
				t.Errorf("Set(%q) = %d %q, want %d %q", tt.in, int64(s), s.String(), tt.bytes, tt.out)
			}
		})
	}
	for _, bad := range []string{"", "MiB", "256MB", "256M", "1.5GiB", "lots", "9999999TiB"} {
		var s byteSize
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) = %d, want an error", bad, int64(s))
		}
	}
}

// TestSizeFlags: the size flags take units on the command line and in CCTRACE_*, and their
// mistakes say what a size looks like.
func TestSizeFlags(t *testing.T) {
	o, _, code := parseFlags("serve", []string{"--parse-limit", "64MiB"}, &strings.Builder{}, defaultListen, defaultMetricsListen)
	if code >= 0 || o.parseLimit != 64<<20 || o.maxRequestBody != 256<<20 {
		t.Errorf("--parse-limit 64MiB: code %d, parse limit %d, max request body %d", code, o.parseLimit, o.maxRequestBody)
	}
	t.Setenv("CCTRACE_MAX_REQUEST_BODY", "1GiB")
	if o, _, code = parseFlags("serve", nil, &strings.Builder{}, defaultListen, defaultMetricsListen); code >= 0 || o.maxRequestBody != 1<<30 {
		t.Errorf("CCTRACE_MAX_REQUEST_BODY=1GiB: code %d, max request body %d", code, o.maxRequestBody)
	}
	var stderr strings.Builder
	if _, _, code = parseFlags("serve", []string{"--parse-limit", "32MB"}, &stderr, defaultListen, defaultMetricsListen); code != 2 ||
		!strings.Contains(stderr.String(), "want a size such as 256MiB") {
		t.Errorf("--parse-limit 32MB: code %d, %s", code, stderr.String())
	}
}
