package metrics

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values that stand for more than one input.
const (
	labelOther   = "other"   // a value past its label's cap
	labelUnknown = "unknown" // no value was reported
	labelNone    = "none"    // the value was reported empty (stop_reason)
)

// Placeholder reports whether a label value is one of those that stand for more than one input
// (and so names nobody): readers of the metrics, such as budget seeding, skip them.
func Placeholder(v string) bool {
	return v == labelOther || v == labelUnknown || v == labelNone
}

// maxLabelBytes bounds one label value; longer values are cut at a rune boundary.
const maxLabelBytes = 128

// defaultLabelCap bounds labels whose values come from the upstream or the client but should form
// a small set (stop reasons, outcomes, subagent types, triggers, block types), so that a misbehaving
// peer cannot blow up the series count.
const defaultLabelCap = 50

// cappedLabel admits the first max distinct values of one label and maps the rest to "other",
// counting each value so mapped in its overflow counter. It is safe for concurrent use.
type cappedLabel struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
	// overflow counts the values mapped to "other" under name; nil: not counted. The series
	// appears with the first such value: until a cap is reached there is nothing to show.
	overflow *prometheus.CounterVec
	name     string
}

func newCappedLabel(max int) *cappedLabel {
	return &cappedLabel{max: max, seen: make(map[string]struct{})}
}

// value returns the label value to use for v, or def when v is empty.
func (c *cappedLabel) value(v, def string) string {
	v = cleanLabel(v)
	if v == "" {
		// The stand-in for "none given" is one fixed value: it takes no place under the cap,
		// so that a full cap still tells unattributed requests apart.
		return def
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		if c.overflow != nil {
			c.overflow.WithLabelValues(c.name).Inc()
		}
		return labelOther
	}
	c.seen[v] = struct{}{}
	return v
}

// cleanLabel makes v a valid, bounded label value: client_golang panics on invalid UTF-8.
func cleanLabel(v string) string {
	v = strings.TrimSpace(strings.ToValidUTF8(v, "\uFFFD"))
	if len(v) <= maxLabelBytes {
		return v
	}
	cut := maxLabelBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}
