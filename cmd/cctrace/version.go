package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/module"
)

// version and commit may be set at build time with -ldflags "-X main.version=… -X main.commit=…";
// when empty, the build information the Go toolchain records says what it can (build).
var version, commit string

// build is what a binary knows of where it came from.
type build struct {
	Version string // a release tag or pseudo-version, else "dev"
	Commit  string // the VCS revision, else "unknown"
	Go      string // the Go release it was built with
}

// String is how `cctrace version` prints it.
func (b build) String() string {
	return fmt.Sprintf("cctrace %s (commit %s, %s)", b.Version, b.Commit, b.Go)
}

// buildOf reads what info records, the -ldflags values winning. `go install …@version` records the
// module's version (a pseudo-version names its commit); `go build` in a clone records the VCS
// revision when it stamps one (-buildvcs), and "(devel)" as the version.
func buildOf(info *debug.BuildInfo, ok bool) build {
	b := build{Version: version, Commit: commit, Go: runtime.Version()}
	if !ok {
		info = &debug.BuildInfo{}
	}
	if b.Version == "" {
		b.Version = "dev"
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Commit == "unknown" && module.IsPseudoVersion(info.Main.Version) {
			if rev, err := module.PseudoVersionRev(info.Main.Version); err == nil {
				b.Commit = rev
			}
		}
		if modified {
			b.Commit += "+modified"
		}
	}
	if info.GoVersion != "" {
		b.Go = info.GoVersion
	}
	return b
}

// thisBuild is the running binary's build.
func thisBuild() build { return buildOf(debug.ReadBuildInfo()) }

// buildInfoGauge is cctrace_build_info: always 1, its labels saying which build is running, so
// that a dashboard can show it and an alert can tell replicas of different builds apart.
func buildInfoGauge(b build) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cctrace_build_info",
		Help:        "Always 1; the labels name the running cctrace's version, VCS commit and Go release.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go_version": b.Go},
	})
	g.Set(1)
	return g
}
