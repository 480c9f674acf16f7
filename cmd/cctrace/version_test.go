package main

import (
	"io"
	"net/http"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildOf(t *testing.T) {
	const rev = "be43bb385591f1871e73ca6ace364043c8313b13"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name                string
		info                *debug.BuildInfo
		ldVersion, ldCommit string
		want                build
	}{
		{"no build information", nil, "", "", build{"dev", "unknown", runtime.Version()}},
		{"go run, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "",
			build{"dev", "unknown", "go1.26.8"}},
		{"go build in a clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261206172612-be43bb385591"}, Settings: vcs("false")}, "", "",
			build{"v0.0.0-20261206172612-be43bb385591", rev, "go1.26.8"}},
		{"go build with local changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "", "",
			build{"dev", rev + "+modified", "go1.26.8"}},
		{"go install @latest of an untagged commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261206172612-be43bb385591"}}, "", "",
			build{"v0.0.0-20261206172612-be43bb385591", "be43bb385591", "go1.26.8"}},
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}, "", "",
			build{"v1.4.0", "unknown", "go1.26.8"}},
		{"-ldflags win", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "v1.5.0", "abc123",
			build{"v1.5.0", "abc123", "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			version, commit = tt.ldVersion, tt.ldCommit
			defer func() { version, commit = "", "" }()
			if got := buildOf(tt.info, tt.info != nil); got != tt.want {
				t.Errorf("buildOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBuildInfoGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(build{"v1.4.0", "be43bb385591", "go1.26.8"}))
	want := `# HELP cctrace_build_info Always 1; the labels name the running cctrace's version, VCS commit and Go release.
# TYPE cctrace_build_info gauge
cctrace_build_info{commit="be43bb385591",go_version="go1.26.8",version="v1.4.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cctrace_build_info"); err != nil {
		t.Error(err)
	}
}

// TestVersionCommand runs the binary: built by `go build` (TestMain), it knows its Go release
// whatever it knows of its VCS, and its /metrics say the same.
func TestVersionCommand(t *testing.T) {
	stdout, stderr, code := cctrace(t, nil, "version")
	line := regexp.MustCompile(`^cctrace (\S+) \(commit (\S+), (go\S+)\)\n$`)
	m := line.FindStringSubmatch(stdout)
	if code != 0 || m == nil || m[3] != runtime.Version() {
		t.Fatalf("cctrace version: exit %d, stdout %q, stderr %q; want %s", code, stdout, stderr, line)
	}
	s := startServe(t, nil)
	metrics := getText(t, "http://"+s.metricsAddr+"/metrics")
	want := `cctrace_build_info{commit="` + m[2] + `",go_version="` + m[3] + `",version="` + m[1] + `"} 1`
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// getText GETs url and returns its body, failing the test on anything but 200 OK.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}
