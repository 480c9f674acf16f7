package metrics

// CappedLabel is a label of another sink (the limits' account and window labels) capped as the
// metrics' own are: its first values keep their name, later ones become "other". The zero value
// is not usable; call NewCappedLabel or Metrics.CappedLabel.
type CappedLabel struct{ c *cappedLabel }

// NewCappedLabel returns a label that admits max distinct values and counts no overflow.
func NewCappedLabel(max int) *CappedLabel { return &CappedLabel{newCappedLabel(max)} }

// CappedLabel returns a label that admits max distinct values and counts each value past them
// in cctrace_label_overflow_total{label=name}, whose series appears with the first: one alert
// covers every cap.
func (m *Metrics) CappedLabel(name string, max int) *CappedLabel {
	c := newCappedLabel(max)
	c.overflow, c.name = m.labelOverflow, name
	return &CappedLabel{c}
}

// Value returns the label value to use for v (v made valid and bounded, or "other" past the
// cap), or def when v is empty.
func (l *CappedLabel) Value(v, def string) string { return l.c.value(v, def) }
