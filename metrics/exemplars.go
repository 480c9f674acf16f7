package metrics

import (
	"sort"
	"sync"
	"time"
)

// DefaultExemplarInterval is the default of WithExemplarInterval.
const DefaultExemplarInterval = time.Second

// exemplarGate decides which observations carry their trace id as an exemplar: at most one per
// series (per bucket, for a histogram's series) in each interval. client_golang builds an
// exemplar for every observation that has one (its labels checked, a timestamp, a protobuf
// message), about fifteen per request, and keeps only the last of each series or bucket; a
// scrape every few seconds sees one of them. The exemplar a scrape sees is then at most one
// interval older than the series' last observation, and still a trace of that series or bucket.
// Its methods are safe for concurrent use.
type exemplarGate struct {
	interval time.Duration // <= 0: every observation carries its exemplar
	mu       sync.Mutex
	last     map[exemplarSlot]time.Time // bounded by the series the label caps allow, times their buckets
}

// exemplarSlot is where client_golang keeps one exemplar: a series (the child metric
// WithLabelValues returns) and, for histograms, the bucket.
type exemplarSlot struct {
	series any
	bucket int
}

func newExemplarGate(interval time.Duration) *exemplarGate {
	return &exemplarGate{interval: interval, last: make(map[exemplarSlot]time.Time)}
}

// admit reports whether an observation of series (in bucket, -1 for counters) at now carries
// its exemplar, and if so notes that it did.
func (g *exemplarGate) admit(series any, bucket int, now time.Time) bool {
	if g.interval <= 0 {
		return true
	}
	k := exemplarSlot{series, bucket}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[k]; ok && now.Sub(t) < g.interval && !now.Before(t) {
		return false
	}
	g.last[k] = now
	return true
}

// bucketOf is the bucket client_golang counts v in, for a histogram with upper bounds buckets.
func bucketOf(buckets []float64, v float64) int { return sort.SearchFloat64s(buckets, v) }
