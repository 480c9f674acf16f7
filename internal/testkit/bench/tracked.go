package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Tracked is what a cctrace variant's own metrics say it has tracked so far: the request
// attempts it ended a chat span for (cctrace_requests_total, all series) and, of those, the
// request bodies it forwarded without decoding because one of its memory budgets was full
// (cctrace_bodies_not_decoded_total{body="request"}, either budget), QueueFull those of them
// the decode queue dropped (reason="decode_queue"; the others the copy budget refused).
type Tracked struct {
	Requests, NotDecoded, QueueFull int64
}

// ReadTracked scrapes metricsURL + "/metrics" for Tracked.
func ReadTracked(ctx context.Context, metricsURL string) (Tracked, error) {
	text, err := getText(ctx, metricsURL+"/metrics")
	if err != nil {
		return Tracked{}, err
	}
	return parseTracked(text)
}

// parseTracked reads Tracked from a Prometheus text exposition.
func parseTracked(text string) (Tracked, error) {
	var t Tracked
	seen := false // the not-decoded series exists from cctrace's start
	for _, line := range strings.Split(text, "\n") {
		var dst *int64
		switch {
		case strings.HasPrefix(line, "cctrace_requests_total{"), strings.HasPrefix(line, "cctrace_requests_total "):
			dst = &t.Requests
		case strings.HasPrefix(line, "cctrace_bodies_not_decoded_total{"):
			seen = true
			if !strings.Contains(line, `body="request"`) {
				continue
			}
			dst = &t.NotDecoded
		default:
			continue
		}
		var also *int64
		if strings.Contains(line, `reason="decode_queue"`) {
			also = &t.QueueFull
		}
		// name{labels} value: label values here hold no spaces (model ids, kinds, codes).
		fields := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(fields) == 0 {
			return Tracked{}, fmt.Errorf("metrics line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return Tracked{}, fmt.Errorf("metrics line %q: %w", line, err)
		}
		*dst += int64(v)
		if also != nil {
			*also += int64(v)
		}
	}
	if !seen {
		return Tracked{}, fmt.Errorf("no cctrace_bodies_not_decoded_total in the metrics")
	}
	return t, nil
}

// CellTrackWait bounds how long a run waits for cctrace to track the requests sent before it and
// during it: the pipeline decodes a full queue (pipeline.DefaultQueueBudget) in well under a
// second. A small request whose body was not decoded (64 KiB or less, or a subagent's that
// cctrace had not seen) and that finds no turn open waits up to instrument.AdoptWindow for the
// next turn to adopt it (its chat span, and so its count, comes only then), so a few such
// requests are counted in a later run.
const CellTrackWait = time.Second

// WaitTracked scrapes metricsURL until cctrace has tracked at least want requests or timeout has
// passed, and returns the last reading and whether it reached want. It returns at once when a
// scrape fails: cctrace is up for the whole run, and a build without the metrics will not grow
// them. It scrapes at once and then every 20 ms.
func WaitTracked(ctx context.Context, metricsURL string, want int64, timeout time.Duration) (Tracked, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		t, err := ReadTracked(ctx, metricsURL)
		if err != nil || t.Requests >= want {
			return t, err == nil, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return t, false, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
