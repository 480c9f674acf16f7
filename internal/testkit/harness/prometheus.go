package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus is a running Prometheus server on 127.0.0.1 that scrapes one target every second,
// with exemplar storage on. The zero value is not usable; get one from StartPrometheus.
type Prometheus struct {
	port int
	proc *Process
}

// ScrapeJob is the job label Prometheus puts on the series it scrapes from the target.
const ScrapeJob = "cctrace"

// StartPrometheus starts Prometheus (binary from CCTRACE_PROMETHEUS_BIN, see Require) scraping
// scrapeTarget every second. scrapeTarget is "host:port" (path /metrics) or a URL such as
// "http://127.0.0.1:9464/metrics". Storage lives in the test's temporary directory and
// --enable-feature=exemplar-storage is set, so exemplars exposed in the OpenMetrics format are
// kept. It returns once /-/ready answers; t.Cleanup stops it.
func StartPrometheus(t testing.TB, scrapeTarget string) *Prometheus {
	t.Helper()
	bin := Require(t, EnvPrometheus, "Prometheus")
	target, err := parseScrapeTarget(scrapeTarget)
	if err != nil {
		t.Fatal(err)
	}
	p := retryStart(t, "prometheus", func(dir string) (*Prometheus, error) { return startPrometheusOnce(bin, dir, target) })
	p.proc.cleanup(t)
	return p
}

type scrapeTarget struct {
	scheme, host, path string
}

func parseScrapeTarget(s string) (scrapeTarget, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return scrapeTarget{}, fmt.Errorf("parsing scrape target %q: %w", s, err)
	}
	if u.Host == "" {
		return scrapeTarget{}, fmt.Errorf("scrape target %q has no host:port", s)
	}
	path := u.Path
	if path == "" {
		path = "/metrics"
	}
	return scrapeTarget{scheme: u.Scheme, host: u.Host, path: path}, nil
}

func startPrometheusOnce(bin, dir string, target scrapeTarget) (*Prometheus, error) {
	port, err := PickFreePort()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(prometheusConfig, ScrapeJob, target.scheme, target.path, target.host)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("writing prometheus config: %w", err)
	}
	p := &Prometheus{port: port}
	p.proc, err = startServer(context.Background(), "prometheus", dir, nil, p.URL()+"/-/ready", bin,
		"--config.file="+cfgPath,
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--enable-feature=exemplar-storage",
	)
	return p, err
}

// prometheusConfig arguments: job name, scheme, metrics path, target host:port.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: %q
    scheme: %s
    metrics_path: %q
    static_configs:
      - targets: [%q]
`

// URL returns the server's base URL, "http://127.0.0.1:PORT".
func (p *Prometheus) URL() string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port)
}

// Query evaluates the PromQL expression expr now and returns its value. It fails the test
// unless the result is a scalar or a vector of exactly one sample.
func (p *Prometheus) Query(t testing.TB, expr string) float64 {
	t.Helper()
	v, err := p.query(expr)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// WaitQuery polls Query until expr evaluates to want (within a relative 1e-9), and fails the
// test if that has not happened within Patience. Scrapes happen every second.
func (p *Prometheus) WaitQuery(t testing.TB, expr string, want float64) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%s == %v", expr, want), func() error {
		got, err := p.query(expr)
		if err == nil && !closeEnough(got, want) {
			err = fmt.Errorf("last value %v", got)
		}
		return err
	})
}

func closeEnough(got, want float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= 1e-9*math.Max(math.Abs(got), math.Abs(want))
}

// queryResponse mirrors the JSON of /api/v1/query.
type queryResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

func (p *Prometheus) query(expr string) (float64, error) {
	body, err := GetBody(p.URL() + "/api/v1/query?" + url.Values{"query": {expr}}.Encode())
	if err != nil {
		return 0, fmt.Errorf("querying prometheus for %s: %w", expr, err)
	}
	var resp queryResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return 0, fmt.Errorf("decoding prometheus answer for %s: %w", expr, err)
	}
	if resp.Status != "success" {
		return 0, fmt.Errorf("prometheus query %s: %s: %s", expr, resp.ErrorType, resp.Error)
	}
	var sample [2]any
	switch resp.Data.ResultType {
	case "scalar":
		if err := json.Unmarshal(resp.Data.Result, &sample); err != nil {
			return 0, fmt.Errorf("decoding scalar for %s: %w", expr, err)
		}
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(resp.Data.Result, &vec); err != nil {
			return 0, fmt.Errorf("decoding vector for %s: %w", expr, err)
		}
		if len(vec) != 1 {
			return 0, fmt.Errorf("prometheus query %s: want 1 sample, got %d: %s", expr, len(vec), resp.Data.Result)
		}
		sample = vec[0].Value
	default:
		return 0, fmt.Errorf("prometheus query %s: result type %q, want scalar or vector", expr, resp.Data.ResultType)
	}
	text, ok := sample[1].(string)
	if !ok {
		return 0, fmt.Errorf("prometheus query %s: sample value %v is not a string", expr, sample[1])
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("prometheus query %s: parsing value: %w", expr, err)
	}
	return v, nil
}

// Exemplar is one exemplar Prometheus stored for a series. The zero value is empty.
type Exemplar struct {
	SeriesLabels map[string]string // labels of the series, __name__ included
	Labels       map[string]string // the exemplar's own labels, e.g. trace_id
	Value        float64
	Timestamp    time.Time
}

// Exemplars returns the exemplars stored in the last hour for the series selected by expr
// (/api/v1/query_exemplars). It fails the test if the query errs.
func (p *Prometheus) Exemplars(t testing.TB, expr string) []Exemplar {
	t.Helper()
	ex, err := p.exemplars(expr)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func (p *Prometheus) exemplars(expr string) ([]Exemplar, error) {
	now := time.Now()
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)},
		"end":   {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)},
	}
	body, err := GetBody(p.URL() + "/api/v1/query_exemplars?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("querying prometheus exemplars for %s: %w", expr, err)
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels    map[string]string `json:"labels"`
				Value     string            `json:"value"`
				Timestamp float64           `json:"timestamp"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decoding exemplars for %s: %w", expr, err)
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("prometheus exemplar query %s: %s", expr, resp.Error)
	}
	var out []Exemplar
	for _, series := range resp.Data {
		for _, e := range series.Exemplars {
			v, err := strconv.ParseFloat(e.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("exemplar value %q: %w", e.Value, err)
			}
			out = append(out, Exemplar{
				SeriesLabels: series.SeriesLabels,
				Labels:       e.Labels,
				Value:        v,
				Timestamp:    time.UnixMilli(int64(math.Round(e.Timestamp * 1000))),
			})
		}
	}
	return out, nil
}
