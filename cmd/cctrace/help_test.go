package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

// TestFlagGroups: every flag of serve and run is in exactly one group, so that the help shows it.
func TestFlagGroups(t *testing.T) {
	grouped := map[string]int{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			grouped[name]++
		}
	}
	for name, n := range grouped {
		if n != 1 {
			t.Errorf("--%s is in %d groups", name, n)
		}
	}
	for _, command := range []string{"serve", "run"} {
		var o options
		newFlagSet(command, &o, defaultListen, defaultMetricsListen).VisitAll(func(f *flag.Flag) {
			if grouped[f.Name] == 0 {
				t.Errorf("%s: --%s is in no group of flagGroups", command, f.Name)
			}
		})
	}
}

// TestHelpByPurpose: serve's help lists its flags under their purpose, in that order; run's
// leaves the team gateway out and says where it is.
func TestHelpByPurpose(t *testing.T) {
	_, serveHelp, code := cctrace(t, nil, "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h: exit %d", code)
	}
	var headings []string
	for line := range strings.Lines(serveHelp) {
		if strings.HasSuffix(line, ":\n") && !strings.HasPrefix(line, " ") {
			headings = append(headings, strings.TrimSuffix(line, "\n"))
		}
	}
	want := []string{"Proxy:", "Export: traces and metrics (traces go to OTEL_EXPORTER_OTLP_ENDPOINT):", "The turns page and turn lines:", "Team gateway: people, budgets, access, replicas:"}
	if !slices.Equal(headings, want) {
		t.Errorf("serve -h headings %q, want %q\n%s", headings, want, serveHelp)
	}
	for _, want := range []string{"  --listen string\n", "  --max-request-body size\n", "(default 256MiB)", "  --access-file string\n"} {
		if !strings.Contains(serveHelp, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	order := []string{"Proxy:", "  --listen ", "Export:", "  --capture-content", "The turns page", "  --metrics-listen ", "Team gateway", "  --replica"}
	for i := 1; i < len(order); i++ {
		if strings.Index(serveHelp, order[i-1]) > strings.Index(serveHelp, order[i]) {
			t.Errorf("serve -h: %q comes after %q:\n%s", order[i-1], order[i], serveHelp)
		}
	}

	_, runHelp, code := cctrace(t, nil, "run", "-h")
	if code != 0 || !strings.Contains(runHelp, "Usage: cctrace run [flags] -- COMMAND [ARGS]") || !strings.Contains(runHelp, "--client-telemetry") {
		t.Fatalf("run -h: exit %d\n%s", code, runHelp)
	}
	for _, gateway := range []string{"Team gateway:", "--replica", "--access-file", "--tls-cert", "--budgets"} {
		if strings.Contains(runHelp, gateway) {
			t.Errorf("run -h shows %s", gateway)
		}
	}
	if !strings.Contains(runHelp, "see 'cctrace serve -h'") {
		t.Errorf("run -h does not say where the gateway's flags are:\n%s", runHelp)
	}
}

// TestRunRefusesGatewayFlags: run says in one line that a team gateway's flag is not for it,
// and does not pick one up from a CCTRACE_* variable set for a shared cctrace.
func TestRunRefusesGatewayFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--replica"}, "cctrace run: --replica is a team gateway's flag, not one for a private proxy of one command: give it to a shared 'cctrace serve' (see 'cctrace serve -h')"},
		{[]string{"--access-file", "access.yaml", "--budget-spend-prometheus", "http://prometheus:9090"}, "cctrace run: --access-file and --budget-spend-prometheus are a team gateway's flags"},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, "cctrace run: --tls-cert and --tls-key are a team gateway's flags"},
		{[]string{"--directory=people.yaml"}, "cctrace run: --directory is a team gateway's flag"},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			_, stderr, code := cctrace(t, nil, append(append([]string{"run"}, tt.args...), "--", "true")...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and one line starting %q", code, stderr, tt.want)
			}
		})
	}
	// A variable that would stop serve (no such file) is not run's business.
	_, stderr, code := cctrace(t, []string{"CCTRACE_ACCESS_FILE=/nonexistent/access.yaml", "CCTRACE_REPLICA=true", "CCTRACE_UPSTREAM=http://127.0.0.1:9"}, "run", "--", "true")
	if code != 0 {
		t.Errorf("run with a gateway's CCTRACE_* variables: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := cctrace(t, []string{"CCTRACE_ACCESS_FILE=/nonexistent/access.yaml"}, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"); code == 0 || !strings.Contains(stderr, "--access-file") {
		t.Errorf("serve with CCTRACE_ACCESS_FILE naming no file: exit %d\n%s", code, stderr)
	}
}
