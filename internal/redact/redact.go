// Package redact removes secrets from text before cctrace shows it anywhere (content capture is
// off by default; when it is on, every preview passes through Scrub).
package redact

import "regexp"

// patterns match common credentials. Each match is replaced whole by "[REDACTED]".
var patterns = []*regexp.Regexp{
	regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{8,}`),                                       // Anthropic
	regexp.MustCompile(`sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`),                // OpenAI
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),                                   // AWS access key id
	regexp.MustCompile(`(?i)aws_secret_access_key\s*[=:]\s*["']?[A-Za-z0-9/+=]{40}["']?`), // AWS secret
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`),                                  // GitHub tokens
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}\b`),                                // GitHub fine-grained
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`),                                      // Google API key
	regexp.MustCompile(`"private_key"\s*:\s*"[^"]*"`),                                     // GCP service account JSON
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*`),
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}\b`), // Slack
	regexp.MustCompile(`(?i)(?:api[_-]?key|secret|password|passwd|token)\s*[=:]\s*["']?[^\s"']{8,}["']?`),
}

// cutTail matches the start of a credential at the very end of the text. Previews are cut at a
// fixed length before they are scrubbed, and a key cut short no longer matches its full pattern
// (an AIza key needs 35 characters after its prefix), yet its first part is still secret.
var cutTail = regexp.MustCompile(`(?:\b(?:sk-|AKIA|ASIA|AIza|gh[pousr]_|github_pat_|xox[abposr]-)[A-Za-z0-9_\-/+=]*` +
	`|(?i:\bbearer\s+[A-Za-z0-9\-._~+/]*=*)` +
	`|(?i:(?:api[_-]?key|secret|password|passwd|token|aws_secret_access_key)\s*[=:]\s*["']?[^\s"']*)` +
	`|"private_key"\s*:\s*"[^"]*)$`)

// Scrub returns s with every credential it recognises replaced by "[REDACTED]", including the
// beginning of one that s ends in the middle of.
func Scrub(s string) string {
	for _, p := range patterns {
		s = p.ReplaceAllString(s, "[REDACTED]")
	}
	return cutTail.ReplaceAllString(s, "[REDACTED]")
}
