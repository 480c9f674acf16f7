package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultSeedInterval is how often RunSeeding asks Prometheus unless told otherwise: a scrape or
// two, so that what another replica spent is known here within a minute.
const DefaultSeedInterval = 30 * time.Second

// PrometheusSpend reads what people and teams spent from a Prometheus that scrapes every
// replica: the same increase() of cctrace_cost_usd_total the alerts compare. A Ledger seeded
// with it enforces the sum over replicas rather than what one replica saw; what
// this replica spent since Prometheus last scraped it still counts, as the larger of the two.
// The zero value is not usable; call NewPrometheusSpend.
type PrometheusSpend struct {
	base   *url.URL
	client *http.Client
	// monthly is the last answer for the 30-day window, and monthlyAt when it came: that
	// query reads a month of samples, so it is asked at most every monthlyInterval.
	monthly   map[seedKey]float64
	monthlyAt time.Time
}

// monthlyInterval is how often Seed asks for the 30-day window again: a few minutes' spend
// moves a monthly total little, and this replica's own count covers them meanwhile.
const monthlyInterval = 10 * time.Minute

// NewPrometheusSpend returns a source querying the Prometheus HTTP API at base
// (http://prometheus:9090).
func NewPrometheusSpend(base string) (*PrometheusSpend, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus URL %q: want http(s)://host:port", base)
	}
	return &PrometheusSpend{base: u, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// Seed queries the spend of every person and team over both windows (the 30-day one at most
// every monthlyInterval) and seeds l with it, replacing what was seeded before (someone no
// longer in the answer spent nothing there). The metrics' placeholder values
// (metrics.Placeholder) name nobody and are not seeded.
func (p *PrometheusSpend) Seed(ctx context.Context, l *Ledger) error {
	now := time.Now()
	seeds := map[seedKey]float64{}
	monthly := p.monthly
	askMonthly := monthly == nil || now.Sub(p.monthlyAt) >= monthlyInterval
	if askMonthly {
		monthly = map[seedKey]float64{}
	}
	for _, q := range []struct{ scope, label string }{{ScopePerson, "user"}, {ScopeTeam, "team"}} {
		for _, w := range []struct {
			window, rng string
			into        map[seedKey]float64
			ask         bool
		}{{Daily, "24h", seeds, true}, {Monthly, "30d", monthly, askMonthly}} {
			if !w.ask {
				continue
			}
			expr := fmt.Sprintf("sum by (%s) (increase(cctrace_cost_usd_total[%s]))", q.label, w.rng)
			got, err := p.query(ctx, expr, q.label)
			if err != nil {
				return err
			}
			for name, usd := range got {
				w.into[seedKey{q.scope, name, w.window}] = usd
			}
		}
	}
	if askMonthly {
		p.monthly, p.monthlyAt = monthly, now
	}
	maps.Copy(seeds, monthly)
	l.seed(seeds)
	return nil
}

// query runs an instant query and returns the value of each series by its label.
func (p *PrometheusSpend) query(ctx context.Context, expr, label string) (map[string]float64, error) {
	u := p.base.JoinPath("/api/v1/query")
	u.RawQuery = url.Values{"query": {expr}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("querying prometheus: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying prometheus: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading prometheus' answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("querying prometheus: status %d: %.200s", resp.StatusCode, body)
	}
	var answer struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Status != "success" {
		return nil, fmt.Errorf("prometheus' answer to %s: %.200s", expr, body)
	}
	out := make(map[string]float64, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r.Metric[label] == "" {
			continue
		}
		out[r.Metric[label]] = v
	}
	return out, nil
}

// RunSeeding seeds l from p every interval until ctx is done. A failed query is logged when it
// starts failing and when it recovers, not every time. The seeds of the last answer stay for
// three intervals; past that, while Prometheus still does not answer, they are dropped, and
// budgets are enforced on this replica's own count: seeds that never expired would go on
// refusing someone whose spend has long left the window.
func RunSeeding(ctx context.Context, p *PrometheusSpend, l *Ledger, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing, dropped := false, false
	lastOK := time.Now()
	for {
		err := p.Seed(ctx, l)
		switch {
		case err == nil:
			if failing {
				log.Info("reading spend from Prometheus again")
			}
			failing, dropped, lastOK = false, false, time.Now()
		case ctx.Err() != nil: // stopping: nothing to report
		case !failing:
			log.Warn("cannot read spend from Prometheus: budgets go on with its last answer for now", "error", err)
			failing = true
		}
		if failing && !dropped && time.Since(lastOK) > 3*interval {
			l.seed(nil)
			dropped = true
			log.Warn("Prometheus has not answered for a while: budgets are enforced on this replica's own count", "since", lastOK.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
