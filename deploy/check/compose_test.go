package check

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type composeFile struct {
	Services map[string]struct {
		Image       string         `yaml:"image"`
		Build       any            `yaml:"build"`
		Ports       []string       `yaml:"ports"`
		Healthcheck map[string]any `yaml:"healthcheck"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Volumes []string `yaml:"volumes"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// noHealthcheck names the services that cannot have a container healthcheck, and why.
var noHealthcheck = map[string]string{
	"otel-collector": "the contrib image has no shell or HTTP client",
	"tempo-init":     "a one-shot job",
}

// pinnedTag matches an image reference with a version tag: not latest, not untagged.
var pinnedTag = regexp.MustCompile(`^[a-z0-9./_-]+:v?[0-9]+\.[0-9]+\.[0-9]+$`)

func TestCompose(t *testing.T) {
	var c composeFile
	readYAML(t, "docker-compose.yml", &c)
	want := []string{"cctrace", "otel-collector", "jaeger", "tempo", "prometheus", "alertmanager", "grafana"}
	for _, s := range want {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("service %s missing", s)
		}
	}
	for name, s := range c.Services {
		t.Run(name, func(t *testing.T) {
			switch {
			case s.Build != nil:
				// Built from the repo's Dockerfile, checked by TestDockerfile.
			case !pinnedTag.MatchString(s.Image):
				t.Errorf("image %q is not pinned to a version", s.Image)
			}
			for _, p := range s.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("port %q is published beyond the host's 127.0.0.1", p)
				}
			}
			if _, exempt := noHealthcheck[name]; !exempt && s.Healthcheck == nil {
				t.Error("no healthcheck")
			}
			for dep, cond := range s.DependsOn {
				d, ok := c.Services[dep]
				if !ok {
					t.Errorf("depends on unknown service %s", dep)
					continue
				}
				if cond.Condition == "service_healthy" && d.Healthcheck == nil {
					t.Errorf("waits for %s to be healthy, which has no healthcheck", dep)
				}
				if cond.Condition == "" {
					t.Errorf("depends on %s without a condition", dep)
				}
			}
			for _, v := range s.Volumes {
				src, _, _ := strings.Cut(v, ":")
				if strings.HasPrefix(src, ".") {
					if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
						t.Errorf("bind mount source %s: %v", src, err)
					}
					continue
				}
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("volume %s is not a declared named volume", src)
				}
			}
		})
	}
}

// TestCollectorImageMatchesBuilder checks that the contrib image and the ocb manifest that
// scripts/deploy-check.sh builds its collector from are of one release.
func TestCollectorImageMatchesBuilder(t *testing.T) {
	var c composeFile
	readYAML(t, "docker-compose.yml", &c)
	_, tag, _ := strings.Cut(c.Services["otel-collector"].Image, ":")
	var m struct {
		Extensions []struct {
			GoMod string `yaml:"gomod"`
		} `yaml:"extensions"`
		Receivers []struct {
			GoMod string `yaml:"gomod"`
		} `yaml:"receivers"`
	}
	readYAML(t, "../tools/otelcol/manifest.yaml", &m)
	mods := append(m.Extensions, m.Receivers...)
	if len(mods) == 0 {
		t.Fatal("manifest lists no components")
	}
	for _, mod := range mods {
		if !strings.HasSuffix(mod.GoMod, " v"+tag) {
			t.Errorf("manifest component %q is not at the image's version v%s", mod.GoMod, tag)
		}
	}
}

func TestDockerfile(t *testing.T) {
	f, err := os.Open(filepath.Join(deployDir, "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var froms []string
	user := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "FROM":
			froms = append(froms, fields[1])
		case "USER":
			user = fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(froms) < 2 {
		t.Errorf("want a multi-stage build, got FROM %v", froms)
	}
	for _, img := range froms {
		if img != "scratch" && !regexp.MustCompile(`:[0-9]+\.[0-9]+\.[0-9]+`).MatchString(img) {
			t.Errorf("base image %q is not pinned to a version", img)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage runs as %q, want a non-root user", user)
	}
}
