package limits_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata/*.prom from what the sink exposes")

// account is the fingerprint the test gives every recorded request, as cctrace's resolve does.
const account = "acct-00000000000000aa"

// withAccount sets each request's account before the tracker sees it.
type withAccount struct{ tr *instrument.Tracker }

func (w withAccount) Request(r *wire.Request) {
	r.Identity.Account = account
	w.tr.Request(r)
}
func (w withAccount) Response(r *wire.Response) { w.tr.Response(r) }

// recorder keeps what the sink hands to history.
type recorder struct {
	readings []limits.Reading
	shares   []limits.Share
}

func (r *recorder) Reading(x limits.Reading) { r.readings = append(r.readings, x) }
func (r *recorder) Share(x limits.Share)     { r.shares = append(r.shares, x) }

// play replays a recording of the real CLI through the tracker into a fresh sink.
func play(t *testing.T, dirs ...string) (*limits.Sink, *prometheus.Registry, *recorder) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	sink, err := limits.New(reg, nil, limits.WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	tr := instrument.New(instrument.Sinks{sink},
		instrument.WithPricing(metrics.DefaultPrices().ProviderCost(wire.ProviderAnthropic, false)))
	for _, dir := range dirs {
		ex, err := replay.Load(filepath.Join("..", "testdata", "claude-code", dir))
		if err != nil {
			t.Fatal(err)
		}
		replay.Play(withAccount{tr}, ex)
	}
	tr.Close(time.Now())
	return sink, reg, rec
}

// exposition is the text exposition of the limit metrics reg holds.
func exposition(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if slices.Contains(limits.MetricNames, mf.GetName()) {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.Bytes()
}

// TestRecordedLimits replays the real CLI's sessions against a fake that reports limits (a
// subscription's windows, an API key's kinds, a 429 the CLI waits out) and compares the gauges
// and counters with testdata/<recording>.prom.
func TestRecordedLimits(t *testing.T) {
	for _, dir := range []string{"ratelimit", "ratelimit_subscription"} {
		t.Run(dir, func(t *testing.T) {
			_, reg, _ := play(t, dir)
			got := exposition(t, reg)
			golden := filepath.Join("testdata", dir+".prom")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./limits -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("metrics differ from %s:\n%s", golden, got)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}
