package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cctrace/cctrace/internal/budget"
	"github.com/cctrace/cctrace/internal/identity"
)

// budgetsCmd is "cctrace budgets rules --budgets FILE [--out FILE]": the Prometheus alerting
// rules of a budgets file.
func budgetsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rules" {
		fmt.Fprintln(stderr, "usage: cctrace budgets rules --budgets FILE [--out FILE]")
		return 2
	}
	fs := flag.NewFlagSet("budgets rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("budgets", os.Getenv("CCTRACE_BUDGETS"), "YAML budgets file")
	out := fs.String("out", "", "write the rules to this file instead of stdout")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "cctrace budgets rules: give --budgets FILE")
		return 2
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace budgets rules: %v\n", err)
		return 1
	}
	b, err := budget.Parse(*file, data)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace budgets rules: %v\n", err)
		return 1
	}
	rules, err := budget.Rules(b, *file)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace budgets rules: %v\n", err)
		return 1
	}
	if *out == "" {
		_, _ = stdout.Write(rules)
		return 0
	}
	if err := os.WriteFile(*out, rules, 0o644); err != nil {
		fmt.Fprintf(stderr, "cctrace budgets rules: %v\n", err)
		return 1
	}
	return 0
}

// fingerprintCmd is "cctrace fingerprint [--identity-secret-file FILE] [--state-dir DIR]": the
// fingerprint of the credential on standard input, as a running cctrace with the same secret
// shows it, for the directory file. The credential is read from standard input, never from the
// command line, where other users and the shell's history would see it.
func fingerprintCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var t teamOptions
	fs := flag.NewFlagSet("fingerprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&t.identitySecretFile, "identity-secret-file", "", "file with the fingerprint secret")
	fs.StringVar(&t.stateDir, "state-dir", stateDir(os.Getenv), "where cctrace keeps its generated fingerprint secret")
	if err := parseArgs("fingerprint", fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	secret, err := storedSecret(t)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace fingerprint: %v\n", err)
		return 1
	}
	f, err := identity.NewFingerprinter(secret)
	if err != nil {
		fmt.Fprintf(stderr, "cctrace fingerprint: %v\n", err)
		return 1
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "cctrace fingerprint: reading the credential: %v\n", err)
		return 1
	}
	cred := strings.TrimSpace(line)
	if cred == "" {
		fmt.Fprintln(stderr, "cctrace fingerprint: give the API key or token on standard input, e.g. printenv ANTHROPIC_API_KEY | cctrace fingerprint")
		return 2
	}
	fmt.Fprintln(stdout, f.Of(cred))
	return 0
}

// storedSecret is the secret a running cctrace with the same options uses, without making one:
// a fingerprint of a secret nobody keeps would match nothing.
func storedSecret(t teamOptions) ([]byte, error) {
	if secret, given, err := givenSecret(t); given {
		return secret, err
	}
	if t.stateDir == "" {
		return nil, errors.New("no secret: give --identity-secret-file or --state-dir")
	}
	return identity.LoadSecret(filepath.Join(t.stateDir, identity.SecretFileName))
}
