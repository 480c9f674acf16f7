package configfile

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often a Watched file is checked for changes unless WithInterval says
// otherwise.
const DefaultInterval = 2 * time.Second

// Watched is a file parsed into a T and parsed again whenever it changes. A change that does not
// parse leaves the previous T in force, and is logged and reported. It polls the file's size and
// modification time rather than subscribing to file events: that sees the usual ways a file is
// replaced (an editor's rename, a Kubernetes ConfigMap's symlink swap, a volume mounted later)
// with nothing to re-arm, and a change takes effect within one interval. The zero value is not
// usable; call Load.
type Watched[T any] struct {
	path     string
	kind     string
	parse    func(name string, data []byte) (T, error)
	log      *slog.Logger
	report   func(kind string, err error)
	interval time.Duration

	cur atomic.Pointer[T]

	mu      sync.Mutex // serialises checks
	size    int64
	modTime time.Time
	data    []byte
}

// Option configures Load.
type Option func(*watchConfig)

type watchConfig struct {
	log      *slog.Logger
	report   func(kind string, err error)
	interval time.Duration
}

// WithLogger sets where reloads are logged. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *watchConfig) { c.log = l } }

// WithReport sets a function told of every load: kind (Load's) and nil, or why the file was
// refused. Default none.
func WithReport(f func(kind string, err error)) Option {
	return func(c *watchConfig) { c.report = f }
}

// WithInterval sets how often Run checks the file. Default DefaultInterval.
func WithInterval(d time.Duration) Option { return func(c *watchConfig) { c.interval = d } }

// Load reads and parses path (kind names it in logs and reports: "directory", "budgets", …). It
// fails when the file cannot be read or parsed: a file refused at start stops cctrace, rather
// than running with nobody known or no budget in force.
func Load[T any](path, kind string, parse func(name string, data []byte) (T, error), opts ...Option) (*Watched[T], error) {
	cfg := watchConfig{log: slog.Default(), interval: DefaultInterval}
	for _, o := range opts {
		o(&cfg)
	}
	w := &Watched[T]{path: path, kind: kind, parse: parse, log: cfg.log, report: cfg.report, interval: cfg.interval}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s file: %w", kind, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s file: %w", kind, err)
	}
	v, err := parse(path, data)
	if w.report != nil {
		w.report(kind, err)
	}
	if err != nil {
		return nil, err
	}
	w.cur.Store(&v)
	w.size, w.modTime, w.data = st.Size(), st.ModTime(), data
	return w, nil
}

// Current returns what the file said when it last parsed.
func (w *Watched[T]) Current() T { return *w.cur.Load() }

// Run checks the file every interval until ctx is done.
func (w *Watched[T]) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Check reloads the file if it changed since it was last read, and reports whether what is in
// force changed. A file that cannot be read (being replaced, or gone) is tried again at the next
// check; a file that does not parse is refused, logged and reported once per change.
func (w *Watched[T]) Check() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, err := os.Stat(w.path)
	if err != nil {
		return false
	}
	if st.Size() == w.size && st.ModTime().Equal(w.modTime) {
		return false
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		return false
	}
	w.size, w.modTime = st.Size(), st.ModTime()
	if bytes.Equal(data, w.data) {
		return false
	}
	w.data = data
	v, err := w.parse(w.path, data)
	if w.report != nil {
		w.report(w.kind, err)
	}
	if err != nil {
		w.log.Error("refusing the changed "+w.kind+" file: the previous one stays in force", "file", w.path, "error", err)
		return false
	}
	w.cur.Store(&v)
	w.log.Info("reloaded the "+w.kind+" file", "file", w.path)
	return true
}
