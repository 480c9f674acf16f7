package redact

import (
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	tests := []struct {
		name, in, secret string
	}{
		{"anthropic", "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 here", "sk-ant-api03-abcdefghij"},
		{"openai", "OPENAI=sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "ABCDEFGHIJKLMNOPQRST"},
		{"aws id", "AKIAIOSFODNN7EXAMPLE is the id", "AKIAIOSFODNN7EXAMPLE"},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"},
		{"github", "token ghp_0123456789abcdefghijABCDEFGHIJ0123456789", "ghp_0123456789"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG"},
		{"gcp api key", "AIzaSyA-1234567890abcdefghijklmnopqrstu ok", "AIzaSyA-1234567890"},
		{"gcp json", `{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}`, "MIIE"},
		{"pem", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"},
		{"bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"},
		{"password assignment", "PASSWORD=hunter2hunter2", "hunter2hunter2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Scrub(tt.in)
			if strings.Contains(got, tt.secret) {
				t.Fatalf("Scrub(%q) = %q, still holds %q", tt.in, got, tt.secret)
			}
			if !strings.Contains(got, "[REDACTED]") {
				t.Fatalf("Scrub(%q) = %q, no redaction marker", tt.in, got)
			}
		})
	}
	for _, prefix := range []string{"sk-ant-api03-abcdefghij", "AKIAIOSF", "AIzaSyA-12345", "ghp_0123", "Bearer eyJhbGci", "password=hunt", `"private_key": "-----BEGIN`, "xoxb-1234"} {
		t.Run("cut "+prefix, func(t *testing.T) {
			// A preview cut in the middle of a key: the part that is there is still secret.
			in := "text before " + prefix
			if got := Scrub(in); strings.Contains(got, prefix[len(prefix)-4:]) {
				t.Fatalf("Scrub(%q) = %q", in, got)
			}
		})
	}
	for _, ordinary := range []string{"ls -la /tmp && go test ./...", "run the task-", "a token", "desk-"} {
		if got := Scrub(ordinary); got != ordinary {
			t.Errorf("ordinary text %q changed: %q", ordinary, got)
		}
	}
	if got := Scrub("ls -la /tmp && go test ./..."); got != "ls -la /tmp && go test ./..." {
		t.Fatalf("ordinary text changed: %q", got)
	}
}
