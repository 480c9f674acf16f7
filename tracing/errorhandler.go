package tracing

import (
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
)

// summaryInterval is the least time between two log lines about failing exports.
const summaryInterval = time.Minute

// exportErrorHandler logs OpenTelemetry errors without flooding: an unreachable collector makes
// every batch fail, so the first error is one warning and later ones are counted and summarised
// at most once per summaryInterval.
type exportErrorHandler struct {
	logger *slog.Logger
	now    func() time.Time

	mu         sync.Mutex
	warned     bool
	lastLine   time.Time
	suppressed int // errors since the last log line
	total      int // every error handled
}

var _ otel.ErrorHandler = (*exportErrorHandler)(nil)

func newExportErrorHandler(logger *slog.Logger, now func() time.Time) *exportErrorHandler {
	return &exportErrorHandler{logger: logger, now: now}
}

// Handle logs err, or counts it when a line was logged less than summaryInterval ago.
func (h *exportErrorHandler) Handle(err error) {
	if err == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total++
	now := h.now()
	switch {
	case !h.warned:
		h.warned = true
		h.lastLine = now
		h.logger.Warn("OpenTelemetry export failing (collector unreachable?); spans are dropped, further errors summarised every minute",
			"err", err)
	case now.Sub(h.lastLine) >= summaryInterval:
		h.logger.Warn("OpenTelemetry export still failing",
			"errors", h.suppressed+1, "since", h.lastLine, "err", err)
		h.lastLine = now
		h.suppressed = 0
	default:
		h.suppressed++
	}
}

// flush logs the errors counted since the last line, if any.
func (h *exportErrorHandler) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.suppressed == 0 {
		return
	}
	h.logger.Warn("OpenTelemetry export errors not logged before shutdown",
		"errors", h.suppressed, "since", h.lastLine)
	h.lastLine = h.now()
	h.suppressed = 0
}

// count returns how many errors h has handled.
func (h *exportErrorHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
