package limits

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/metrics"
)

// Metric names, exact: the alert rules and dashboards depend on them.
const (
	nameUtilization = "cctrace_ratelimit_utilization"
	nameReset       = "cctrace_ratelimit_reset_timestamp_seconds"
	nameStatus      = "cctrace_ratelimit_status"
	nameAPILimit    = "cctrace_ratelimit_api_limit"
	nameAPIRemain   = "cctrace_ratelimit_api_remaining"
	nameAPIReset    = "cctrace_ratelimit_api_reset_timestamp_seconds"
	nameRefusals    = "cctrace_upstream_refusals_total"
	nameGrowth      = "cctrace_ratelimit_growth_total"
	nameTurnShare   = "cctrace_ratelimit_turn_share"
)

// MetricNames lists every metric family New registers.
var MetricNames = []string{
	nameUtilization, nameReset, nameStatus, nameAPILimit, nameAPIRemain, nameAPIReset,
	nameRefusals, nameGrowth, nameTurnShare,
}

// Window label values that are not windows: the account's status as a whole, and its use
// beyond the plan.
const (
	windowOverall = "overall"
	windowOverage = "overage"
)

// statuses are the values of the status label, each a series of its own that is 1 for the
// status reported last and 0 for the others; an unknown status counts as "other".
var statuses = []string{"allowed", "allowed_warning", "rejected", "other"}

// turnShareBuckets span a turn that used a trace of the window to one that used most of it.
var turnShareBuckets = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// maxWindowLabels bounds the window (and kind) label: the names come from the upstream.
const maxWindowLabels = 30

type metricSet struct {
	utilization, reset, status       *prometheus.GaugeVec
	apiLimit, apiRemaining, apiReset *prometheus.GaugeVec
	refusals, growth                 *prometheus.CounterVec
	turnShare                        *prometheus.HistogramVec
	accounts, windows                *metrics.CappedLabel
}

func newMetricSet(reg prometheus.Registerer, accounts, windows *metrics.CappedLabel) (*metricSet, error) {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &metricSet{
		accounts: accounts,
		windows:  windows,
		utilization: gauge(nameUtilization,
			`Share of a subscription window used (0..1) as the last answer of the account reported it, by account fingerprint and window ("5h", "7d", per-model weekly windows).`,
			"account", "window"),
		reset: gauge(nameReset,
			"When a subscription window starts over, in Unix seconds, as the last answer of the account reported it.",
			"account", "window"),
		status: gauge(nameStatus,
			`Status of a subscription account (window "overall"), of each window and of its overage: 1 for the status last reported (allowed, allowed_warning, rejected), 0 for the others.`,
			"account", "window", "status"),
		apiLimit: gauge(nameAPILimit,
			"An API key's limit by kind (requests, tokens, input-tokens, output-tokens) per minute, as the last answer reported it.",
			"account", "kind"),
		apiRemaining: gauge(nameAPIRemain,
			"What is left of an API key's limit by kind, as the last answer reported it.",
			"account", "kind"),
		apiReset: gauge(nameAPIReset,
			"When an API key's limit of a kind is whole again, in Unix seconds.",
			"account", "kind"),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameRefusals,
			Help: `Answers in which the API refused the request, by account and reason: rate_limit (429 rate_limit_error: the account's own limit is spent) or overloaded (529 overloaded_error: the API is short of capacity, not the account's limit).`,
		}, []string{"account", "reason"}),
		growth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: nameGrowth,
			Help: `Rise of a subscription window's utilization (1 is the whole window), by account and window: attributed="true" when requests cctrace forwarded account for it, "false" when none did (the account was used elsewhere).`,
		}, []string{"account", "window", "attributed"}),
		turnShare: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    nameTurnShare,
			Help:    "Each finished turn's share of a subscription window's growth (1 is the whole window), by window; the exemplars are the turns' trace ids.",
			Buckets: turnShareBuckets,
		}, []string{"window"}),
	}
	for _, c := range []prometheus.Collector{m.utilization, m.reset, m.status, m.apiLimit, m.apiRemaining, m.apiReset, m.refusals, m.growth, m.turnShare} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering limit metrics: %w", err)
		}
	}
	return m, nil
}

// accountLabel is the account label of a fingerprint, "unknown" for none.
func (m *metricSet) accountLabel(id string) string { return m.accounts.Value(id, "unknown") }

func (m *metricSet) windowLabel(w string) string { return m.windows.Value(w, "unknown") }

// unified sets the gauges of a subscription's reading.
func (m *metricSet) unified(account string, rl *wire.RateLimit) {
	if rl.Status != "" {
		m.setStatus(account, windowOverall, rl.Status)
	}
	if rl.Overage.Status != "" {
		m.setStatus(account, windowOverage, rl.Overage.Status)
	}
	if !rl.Overage.Reset.IsZero() {
		m.reset.WithLabelValues(account, windowOverage).Set(float64(rl.Overage.Reset.Unix()))
	}
	for _, w := range rl.Windows {
		name := m.windowLabel(w.Name)
		if w.HasUtilization {
			m.utilization.WithLabelValues(account, name).Set(w.Utilization)
		}
		if !w.Reset.IsZero() {
			m.reset.WithLabelValues(account, name).Set(float64(w.Reset.Unix()))
		}
		if w.Status != "" {
			m.setStatus(account, name, w.Status)
		}
	}
}

func (m *metricSet) setStatus(account, window, status string) {
	known := false
	for _, s := range statuses[:len(statuses)-1] {
		known = known || s == status
	}
	if !known {
		status = "other"
	}
	for _, s := range statuses {
		v := 0.0
		if s == status {
			v = 1
		}
		m.status.WithLabelValues(account, window, s).Set(v)
	}
}

// apiKey sets the gauges of an API key's reading.
func (m *metricSet) apiKey(account string, rl *wire.RateLimit) {
	for _, k := range rl.Kinds {
		if k.Limit >= 0 {
			m.apiLimit.WithLabelValues(account, k.Kind).Set(float64(k.Limit))
		}
		if k.Remaining >= 0 {
			m.apiRemaining.WithLabelValues(account, k.Kind).Set(float64(k.Remaining))
		}
		if !k.Reset.IsZero() {
			m.apiReset.WithLabelValues(account, k.Kind).Set(float64(k.Reset.Unix()))
		}
	}
}

func (m *metricSet) observeTurnShare(window string, share float64, trace instrument.TraceID) {
	o := m.turnShare.WithLabelValues(window)
	if eo, ok := o.(prometheus.ExemplarObserver); ok {
		eo.ObserveWithExemplar(share, prometheus.Labels{"trace_id": trace.String()})
		return
	}
	o.Observe(share)
}
