package check

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestCollectorReleaseInStep checks that the collector image the chart runs, the one
// deploy/docker-compose.yml runs and the one ocb builds for the checks (tools/otelcol) are one
// release: the configs are validated with the last, and must hold for the first two.
func TestCollectorReleaseInStep(t *testing.T) {
	var manifest struct {
		Dist struct {
			Version string `json:"version"`
		} `json:"dist"`
	}
	readYAML(t, "../../../tools/otelcol/manifest.yaml", &manifest)
	var values struct {
		Collector struct {
			Image struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"image"`
		} `json:"collector"`
	}
	readYAML(t, "../cctrace/values.yaml", &values)
	var compose struct {
		Services map[string]struct {
			Image string `json:"image"`
		} `json:"services"`
	}
	readYAML(t, "../../docker-compose.yml", &compose)

	want := manifest.Dist.Version
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(want) {
		t.Fatalf("tools/otelcol/manifest.yaml: dist.version %q", want)
	}
	if got := values.Collector.Image.Tag; got != want {
		t.Errorf("the chart's collector image tag is %q, ocb builds %s", got, want)
	}
	if got, image := compose.Services["otel-collector"].Image, values.Collector.Image.Repository+":"+want; got != image {
		t.Errorf("deploy/docker-compose.yml runs %q, want %s", got, image)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
