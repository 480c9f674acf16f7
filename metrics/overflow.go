package metrics

import "github.com/prometheus/client_golang/prometheus"

// LabelOverflow returns the counter of cctrace_label_overflow_total for label: what another
// sink that caps a label of its own (the limits' account label) counts its overflow in, so that
// one alert covers every cap.
func (m *Metrics) LabelOverflow(label string) prometheus.Counter {
	return m.labelOverflow.WithLabelValues(label)
}
