package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// flagGroup is a heading of the flags' help and the flags under it, in the order shown.
type flagGroup struct {
	title string
	flags []string
	// gateway marks the flags of a cctrace shared by a team: `cctrace run`, a private proxy for
	// one command, refuses them and ignores their CCTRACE_* variables.
	gateway bool
}

// flagGroups sorts every flag by what it is for; a flag is in exactly one group.
var flagGroups = []flagGroup{
	{title: "Proxy", flags: []string{"listen", "provider", "upstream", "region", "foundry-resource",
		"parse-limit", "max-request-body", "shutdown-grace", "state-dir"}},
	{title: "Export: traces and metrics (traces go to OTEL_EXPORTER_OTLP_ENDPOINT)", flags: []string{"capture-content",
		"join-client-trace", "client-telemetry", "pricing", "turn-idle-timeout", "session-idle-timeout", "max-sessions"}},
	{title: "The turns page and turn lines", flags: []string{"metrics-listen", "trace-ui-url", "log", "log-level",
		"history", "history-max-age", "history-max-size"}},
	{title: "Team gateway: people, budgets, access, replicas", gateway: true, flags: []string{"replica", "tls-cert", "tls-key",
		"identity-header", "identity-order", "identity-secret-file", "directory", "max-users", "max-teams",
		"budgets", "enforce-budgets", "budget-spend-prometheus", "access-file", "trusted-user-header",
		"trusted-team-header", "trusted-role-header", "metrics-token-file", "metrics-only-listen"}},
}

// takesFlag reports whether command takes the flag name: run takes no team gateway flag.
func takesFlag(command, name string) bool {
	if command != "run" {
		return true
	}
	for _, g := range flagGroups {
		if g.gateway && slices.Contains(g.flags, name) {
			return false
		}
	}
	return true
}

// gatewayFlagsSet returns, as --name, the flags given on the command line that command does not
// take.
func gatewayFlagsSet(command string, fs *flag.FlagSet) []string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if !takesFlag(command, f.Name) {
			set = append(set, "--"+f.Name)
		}
	})
	return set
}

// commandSummary says in a sentence what each command with flags does.
var commandSummary = map[string]string{
	"serve": "Runs the proxy until SIGINT or SIGTERM: point ANTHROPIC_BASE_URL at --listen; the turns page\nand /metrics are at --metrics-listen.",
	"demo":  "Replays Claude Code sessions recorded from the real CLI through cctrace to a fake Anthropic\nAPI on 127.0.0.1, and serves the turns page and /metrics until Ctrl-C. With\nOTEL_EXPORTER_OTLP_ENDPOINT set, the traces are exported too.",
	"run":   "Runs COMMAND (e.g. claude) with ANTHROPIC_BASE_URL set to a private proxy on free loopback\nports, and stops when it exits; its turns go to Claude Code's status line, the turn lines and\nthe turns page.",
}

// printHelp writes command's usage and its flags by group.
func printHelp(w io.Writer, command string, fs *flag.FlagSet) {
	synopsis := "cctrace " + command + " [flags]"
	if command == "run" {
		synopsis += " -- COMMAND [ARGS]"
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", synopsis, commandSummary[command])
	for _, g := range flagGroups {
		if g.gateway && command == "run" {
			continue
		}
		var b strings.Builder
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				writeFlag(&b, f)
			}
		}
		if b.Len() > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", g.title, b.String())
		}
	}
	if command == "demo" {
		return
	}
	fmt.Fprint(w, "\nEach flag can also be set as CCTRACE_<NAME>, upper case with dashes as underscores\n(CCTRACE_MAX_REQUEST_BODY=1GiB). Sizes are bytes or take a unit: KiB, MiB, GiB.\n")
	if command == "run" {
		fmt.Fprint(w, "The team gateway's flags (people, budgets, access, replicas, TLS) are cctrace serve's: see 'cctrace serve -h'.\n")
	}
}

// writeFlag writes one flag as flag.PrintDefaults does, with two dashes.
func writeFlag(w io.Writer, f *flag.Flag) {
	kind, usage := flag.UnquoteUsage(f)
	if _, ok := f.Value.(*byteSize); ok {
		kind = "size"
	}
	fmt.Fprintf(w, "  --%s", f.Name)
	if kind != "" {
		fmt.Fprintf(w, " %s", kind)
	}
	fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
	if d := f.DefValue; d != "" && d != "false" && d != "0" {
		fmt.Fprintf(w, " (default %s)", d)
	}
	fmt.Fprintln(w)
}
