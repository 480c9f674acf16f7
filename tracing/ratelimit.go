package tracing

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Chat spans: the limits the answer reported (docs/wire.md, "Rate-limit headers").
const (
	keyRefusal             = attribute.Key("cctrace.upstream.refusal")
	keyLimitAccount        = attribute.Key("cctrace.ratelimit.account")
	keyLimitStatus         = attribute.Key("cctrace.ratelimit.status")
	keyLimitRepresentative = attribute.Key("cctrace.ratelimit.representative_window")
	keyLimitRetryAfter     = attribute.Key("cctrace.ratelimit.retry_after_seconds")
	keyLimitPrefix         = "cctrace.ratelimit."
)

// rateLimit adds what an answer said of its account's limits, and which refusal it was: a
// 429 is the account's limit, a 529 the API's capacity (error.type says the same in the API's
// words; this names the two alike on every span, streamed errors included).
func rateLimit(a *attrs, req *wire.Request, r *wire.Response) {
	a.str(keyRefusal, wire.Refusal(r))
	rl := r.RateLimit
	if rl.Empty() {
		return
	}
	a.str(keyLimitAccount, req.Identity.Account)
	a.str(keyLimitStatus, rl.Status)
	if w, ok := rl.RepresentativeWindow(); ok {
		a.str(keyLimitRepresentative, w.Name)
	}
	for _, w := range rl.Windows {
		p := keyLimitPrefix + w.Name + "."
		if w.HasUtilization {
			a.add(attribute.Float64(p+"utilization", w.Utilization))
		}
		if !w.Reset.IsZero() {
			a.add(attribute.Int64(p+"reset", w.Reset.Unix()))
		}
		a.str(attribute.Key(p+"status"), w.Status)
	}
	for _, k := range rl.Kinds {
		p := keyLimitPrefix + k.Kind + "."
		if k.Limit >= 0 {
			a.add(attribute.Int64(p+"limit", k.Limit))
		}
		if k.Remaining >= 0 {
			a.add(attribute.Int64(p+"remaining", k.Remaining))
		}
	}
	if rl.RetryAfter > 0 {
		a.add(keyLimitRetryAfter.Float64(rl.RetryAfter.Seconds()))
	}
}
