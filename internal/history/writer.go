package history

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cctrace/cctrace/limits"
	"github.com/cctrace/cctrace/summary"
)

// Writer puts what the sinks hand it into a store, on a goroutine of its own (Run): its
// TurnEnded, Reading and Share only queue, so that the tracker and the forwarding path never
// wait for a disk or a server. What queued while a transaction ran is the next transaction. When
// a write fails (a full disk, a broken file, a server gone) the writer says so once, in the log
// and in cctrace_history_degraded, and keeps history in memory until the process ends:
// forwarding and the page go on. Its methods are safe for concurrent use. The zero value is not
// usable; call NewWriter.
type Writer struct {
	log       *slog.Logger
	queue     chan item
	retention Retention
	pruneEach time.Duration
	m         *writerMetrics

	mu       sync.RWMutex
	db       *DB
	degraded bool

	done chan struct{}
}

var _ limits.Recorder = (*Writer)(nil)

// item is one record queued: exactly one field is set.
type item struct {
	turn    *summary.Turn
	reading *limits.Reading
	share   *limits.Share
}

// WriterOption configures NewWriter.
type WriterOption func(*Writer)

// WithLogger sets where the writer says that it degraded, and what pruning removed. Default:
// slog.Default().
func WithLogger(l *slog.Logger) WriterOption { return func(w *Writer) { w.log = l } }

// WithRetention sets what the store keeps (Retention). Default: DefaultRetention.
func WithRetention(r Retention) WriterOption { return func(w *Writer) { w.retention = r } }

// WithQueue bounds the records waiting to be written; past it, records are dropped and counted
// in cctrace_history_dropped_total. Default 8192.
func WithQueue(n int) WriterOption { return func(w *Writer) { w.queue = make(chan item, max(n, 1)) } }

// WithPruneInterval sets how often Run applies the retention. Default 10 minutes.
func WithPruneInterval(d time.Duration) WriterOption { return func(w *Writer) { w.pruneEach = d } }

// maxBatch bounds the records of one transaction.
const maxBatch = 512

// gatherFor is how long a record waits for others to share its transaction.
const gatherFor = 200 * time.Millisecond

// writeTimeout bounds one transaction: a server that hangs counts as one that failed.
const writeTimeout = 30 * time.Second

// NewWriter returns a writer into db and registers its metrics on reg (none when reg is nil).
func NewWriter(db *DB, reg prometheus.Registerer, opts ...WriterOption) (*Writer, error) {
	return newWriter(db, db.Kind(), reg, opts...)
}

// newWriter is NewWriter with the kind of store its metrics name: the one configured, which is
// not db's when db is memory standing in for a store that failed.
func newWriter(db *DB, kind Kind, reg prometheus.Registerer, opts ...WriterOption) (*Writer, error) {
	w := &Writer{db: db, log: slog.Default(), retention: DefaultRetention, pruneEach: 10 * time.Minute, done: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	if w.queue == nil {
		w.queue = make(chan item, 8192)
	}
	m, err := newWriterMetrics(reg, kind)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
}

// Store returns the store the page and the commands read: the one NewWriter was given, or the
// one in memory the writer went on with when that failed.
func (w *Writer) Store() *DB {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.db
}

// Degraded reports whether the writer gave up its store for one in memory.
func (w *Writer) Degraded() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.degraded
}

// TurnEnded queues an ended turn (its spans included) to be written.
func (w *Writer) TurnEnded(t summary.Turn) { w.put(item{turn: &t}) }

// Reading queues a limit reading to be written.
func (w *Writer) Reading(r limits.Reading) { w.put(item{reading: &r}) }

// Share queues a turn's share of a window's growth to be written.
func (w *Writer) Share(s limits.Share) { w.put(item{share: &s}) }

func (w *Writer) put(it item) {
	select {
	case w.queue <- it:
	default:
		w.m.dropped.Inc()
	}
}

// Run writes what queues until ctx ends, then writes what is left and returns. It applies the
// retention at once and every prune interval.
func (w *Writer) Run(ctx context.Context) {
	defer close(w.done)
	w.prune()
	tick := time.NewTicker(w.pruneEach)
	defer tick.Stop()
	var b Batch
	for {
		select {
		case it := <-w.queue:
			b.add(it)
			w.gather(ctx, &b)
			w.write(&b)
		case <-tick.C:
			w.prune()
		case <-ctx.Done():
			for {
				w.drain(&b)
				if b.Len() == 0 {
					return
				}
				w.write(&b)
			}
		}
	}
}

// Done is closed once Run has returned: everything queued before its context ended is written.
func (w *Writer) Done() <-chan struct{} { return w.done }

// drain adds what is queued to b, up to maxBatch.
// gather adds to b what queues within gatherFor of its first record, up to maxBatch: one
// transaction for a burst of turns rather than one each, so that a busy proxy spends less CPU on
// its history beside the requests it forwards.
func (w *Writer) gather(ctx context.Context, b *Batch) {
	t := time.NewTimer(gatherFor)
	defer t.Stop()
	for b.Len() < maxBatch {
		select {
		case it := <-w.queue:
			b.add(it)
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (w *Writer) drain(b *Batch) {
	for b.Len() < maxBatch {
		select {
		case it := <-w.queue:
			b.add(it)
		default:
			return
		}
	}
}

func (b *Batch) add(it item) {
	switch {
	case it.turn != nil:
		b.Turns = append(b.Turns, *it.turn)
	case it.reading != nil:
		b.Readings = append(b.Readings, *it.reading)
	case it.share != nil:
		b.Shares = append(b.Shares, *it.share)
	}
}

// write writes b and empties it; a failure leaves the store for one in memory, which gets b.
func (w *Writer) write(b *Batch) {
	defer func() { *b = Batch{Turns: b.Turns[:0], Readings: b.Readings[:0], Shares: b.Shares[:0]} }()
	db := w.Store()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err := db.Write(ctx, b)
	cancel()
	w.m.writeSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		w.m.written.Add(float64(b.Len()))
		return
	}
	if db.Kind() == KindMemory {
		w.m.dropped.Add(float64(b.Len()))
		w.log.Debug("history in memory: a batch was not written", "error", err)
		return
	}
	mem, merr := Open(context.Background(), string(KindMemory))
	if merr != nil {
		w.m.dropped.Add(float64(b.Len()))
		w.log.Error("history: writing failed and no store in memory could be opened; history is not kept", "store", db.Where(), "error", errors.Join(err, merr))
		return
	}
	w.mu.Lock()
	w.db, w.degraded = mem, true
	w.mu.Unlock()
	w.m.degraded.Set(1)
	w.log.Error("history: cannot write to the store; keeping history in memory until cctrace restarts (forwarding goes on)",
		"store", db.Where(), "error", err)
	_ = db.Close()
	if err := mem.Write(context.Background(), b); err == nil {
		w.m.written.Add(float64(b.Len()))
	}
}

func (w *Writer) prune() {
	db := w.Store()
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	n, err := db.Prune(ctx, w.retention, time.Now())
	switch {
	case err != nil:
		w.log.Warn("history: applying the retention failed", "store", db.Where(), "error", err)
	case n > 0:
		w.m.pruned.Add(float64(n))
		w.log.Debug("history: retention removed old turns", "turns", n)
	}
}

// writerMetrics are the writer's own metrics (docs/history.md).
type writerMetrics struct {
	written, dropped, pruned prometheus.Counter
	degraded                 prometheus.Gauge
	writeSeconds             prometheus.Histogram
}

// Metric names of the writer.
const (
	nameWritten      = "cctrace_history_records_written_total"
	nameDropped      = "cctrace_history_records_dropped_total"
	namePruned       = "cctrace_history_turns_pruned_total"
	nameDegraded     = "cctrace_history_degraded"
	nameWriteSeconds = "cctrace_history_write_duration_seconds"
)

// MetricNames lists every metric family NewWriter registers.
var MetricNames = []string{nameWritten, nameDropped, namePruned, nameDegraded, nameWriteSeconds}

func newWriterMetrics(reg prometheus.Registerer, kind Kind) (*writerMetrics, error) {
	labels := prometheus.Labels{"store": string(kind)}
	m := &writerMetrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: nameWritten, ConstLabels: labels,
			Help: "Records (turns, limit readings, window shares) written to the history store."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: nameDropped, ConstLabels: labels,
			Help: "Records not written to the history store: its queue was full (the store is slower than the traffic), or it failed and so did memory."}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: namePruned, ConstLabels: labels,
			Help: "Turns the history's retention removed, by age or size."}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{Name: nameDegraded, ConstLabels: labels,
			Help: "1 when writing to the history store failed and history is kept in memory until cctrace restarts; 0 otherwise."}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: nameWriteSeconds, ConstLabels: labels,
			Help:    "Time to write one batch (one transaction) to the history store.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.written, m.dropped, m.pruned, m.degraded, m.writeSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// OpenWriter opens the store dsn names (Open) and returns a writer into it. A store that cannot
// be opened (a broken file, a server that refuses) is left, as one that fails later is, for one
// in memory: said once in the log and in cctrace_history_degraded. The error is for the writer's
// metrics, or memory, failing.
func OpenWriter(ctx context.Context, dsn string, reg prometheus.Registerer, opts ...WriterOption) (*Writer, error) {
	db, err := Open(ctx, dsn)
	if err == nil {
		return NewWriter(db, reg, opts...)
	}
	mem, merr := Open(ctx, string(KindMemory))
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	w, werr := newWriter(mem, kindOf(dsn), reg, opts...)
	if werr != nil {
		mem.Close()
		return nil, werr
	}
	w.degraded = true
	w.m.degraded.Set(1)
	w.log.Error("history: cannot open the store; keeping history in memory until cctrace restarts (forwarding goes on)", "error", err)
	return w, nil
}
