package wire

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The response headers the Anthropic API reports an account's limits in (docs/wire.md, "Rate
// limits"): a subscription's windows under unifiedPrefix, an API key's limits by kind under
// rateLimitPrefix, and retry-after on a 429.
const (
	rateLimitPrefix = "Anthropic-Ratelimit-"
	unifiedPrefix   = rateLimitPrefix + "Unified-"
	retryAfter      = "Retry-After"
)

// RateLimitHeader returns the headers of an upstream response that report rate limits
// (anthropic-ratelimit-*, retry-after), for DecodeRateLimit; nil when there are none. The values
// are shared with h, not copied: it costs a pass over the header names, so it may run on the
// forwarding path, and the decoding waits for the pipeline.
func RateLimitHeader(h http.Header) http.Header {
	var out http.Header
	for k, v := range h {
		if len(v) == 0 || !(hasPrefixFold(k, rateLimitPrefix) || strings.EqualFold(k, retryAfter)) {
			continue
		}
		if out == nil {
			out = make(http.Header, 16)
		}
		out[http.CanonicalHeaderKey(k)] = v
	}
	return out
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// RateLimit is what one response said of its account's limits. A subscription (an OAuth login)
// reports windows of usage (Unified); an API key reports what is left of each kind of limit
// (Kinds). The zero value is a response that said nothing of either.
type RateLimit struct {
	// Status is anthropic-ratelimit-unified-status: "allowed", "allowed_warning" or "rejected";
	// empty without unified headers.
	Status string
	// Representative is anthropic-ratelimit-unified-representative-claim as sent (e.g.
	// "five_hour"): the window that binds the account now. RepresentativeWindow finds it.
	Representative string
	// Windows are the subscription's windows (5h, 7d, per-model weekly windows), by name.
	Windows []LimitWindow
	// Overage is the account's use beyond its plan, when the headers say.
	Overage Overage
	// Kinds are an API key's limits, by kind: requests, tokens, input-tokens, output-tokens.
	Kinds []KindLimit
	// RetryAfter is retry-after (seconds, or an HTTP date), 0 when absent.
	RetryAfter time.Duration
}

// LimitWindow is one window of a subscription's usage: anthropic-ratelimit-unified-<name>-*.
// The zero value is a window with nothing reported.
type LimitWindow struct {
	Name string // as the header names it: "5h", "7d", "7d_oi", "7d-sonnet", …
	// Utilization is the share of the window used, 0..1; HasUtilization is false when the
	// header was absent or not a number.
	Utilization    float64
	HasUtilization bool
	Reset          time.Time // when the window starts over; zero when not reported
	Status         string    // "allowed", "allowed_warning", "rejected"; empty when not reported
}

// Overage is anthropic-ratelimit-unified-overage-*: use beyond the plan's windows.
type Overage struct {
	Status string
	Reset  time.Time
	InUse  bool
}

// KindLimit is an API key's limit of one kind: anthropic-ratelimit-<kind>-{limit,remaining,
// reset}. Limit and Remaining are -1 when not reported.
type KindLimit struct {
	Kind             string // requests, tokens, input-tokens, output-tokens
	Limit, Remaining int64
	Reset            time.Time
}

// Empty reports whether r holds nothing.
func (r *RateLimit) Empty() bool {
	return r == nil || (r.Status == "" && r.Representative == "" && len(r.Windows) == 0 &&
		r.Overage == (Overage{}) && len(r.Kinds) == 0 && r.RetryAfter == 0)
}

// Window returns the window of the given name.
func (r *RateLimit) Window(name string) (LimitWindow, bool) {
	for _, w := range r.Windows {
		if w.Name == name {
			return w, true
		}
	}
	return LimitWindow{}, false
}

// RepresentativeWindow returns the window the representative claim names, and false when it
// names none of the reported windows. The claim spells durations out ("five_hour",
// "seven_day_opus") where window headers abbreviate them ("5h", "7d_opus"); a claim that
// matches no window either way falls back to the most used window, which is the one that will
// stop the account first.
func (r *RateLimit) RepresentativeWindow() (LimitWindow, bool) {
	if r == nil || len(r.Windows) == 0 {
		return LimitWindow{}, false
	}
	if c := r.Representative; c != "" {
		short := strings.NewReplacer("five_hour", "5h", "seven_day", "7d").Replace(c)
		for _, name := range []string{c, short, strings.ReplaceAll(short, "_", "-")} {
			if w, ok := r.Window(name); ok {
				return w, true
			}
		}
	}
	best := -1
	for i, w := range r.Windows {
		if w.HasUtilization && (best < 0 || w.Utilization > r.Windows[best].Utilization) {
			best = i
		}
	}
	if best < 0 {
		return LimitWindow{}, false
	}
	return r.Windows[best], true
}

// maxLimitWindows bounds the windows kept from one response: the names come from the upstream.
const maxLimitWindows = 16

// ParseRateLimit decodes the headers RateLimitHeader kept; nil when they say nothing. Values
// that do not parse are left out, never an error: a later API may change them.
func ParseRateLimit(h http.Header) *RateLimit {
	if len(h) == 0 {
		return nil
	}
	r := &RateLimit{}
	windows := map[string]*LimitWindow{}
	kinds := map[string]*KindLimit{}
	window := func(name string) *LimitWindow {
		w := windows[name]
		if w == nil && len(windows) < maxLimitWindows {
			w = &LimitWindow{Name: name}
			windows[name] = w
		}
		return w
	}
	for k, v := range h {
		val := strings.TrimSpace(v[0])
		key := strings.ToLower(k)
		if strings.EqualFold(k, retryAfter) {
			r.RetryAfter = parseRetryAfter(val)
			continue
		}
		rest, ok := strings.CutPrefix(key, strings.ToLower(unifiedPrefix))
		if !ok {
			if rest, ok = strings.CutPrefix(key, strings.ToLower(rateLimitPrefix)); ok {
				parseKind(kinds, rest, val)
			}
			continue
		}
		switch rest {
		case "status":
			r.Status = cleanToken(val)
			continue
		case "representative-claim":
			r.Representative = cleanToken(val)
			continue
		case "overage-status":
			r.Overage.Status = cleanToken(val)
			continue
		case "overage-reset":
			r.Overage.Reset = parseUnix(val)
			continue
		case "overage-in-use":
			r.Overage.InUse, _ = strconv.ParseBool(val)
			continue
		}
		i := strings.LastIndexByte(rest, '-')
		if i <= 0 {
			continue
		}
		name, field := cleanToken(rest[:i]), rest[i+1:]
		if name == "" || name == "overage" {
			continue
		}
		switch field {
		case "utilization":
			if u, err := strconv.ParseFloat(val, 64); err == nil && !math.IsNaN(u) && !math.IsInf(u, 0) {
				if w := window(name); w != nil {
					w.Utilization, w.HasUtilization = u, true
				}
			}
		case "reset":
			if t := parseUnix(val); !t.IsZero() {
				if w := window(name); w != nil {
					w.Reset = t
				}
			}
		case "status":
			if w := window(name); w != nil {
				w.Status = cleanToken(val)
			}
		}
	}
	for _, w := range windows {
		r.Windows = append(r.Windows, *w)
	}
	slices.SortFunc(r.Windows, func(a, b LimitWindow) int { return strings.Compare(a.Name, b.Name) })
	for _, k := range kinds {
		r.Kinds = append(r.Kinds, *k)
	}
	slices.SortFunc(r.Kinds, func(a, b KindLimit) int { return strings.Compare(a.Kind, b.Kind) })
	if r.Empty() {
		return nil
	}
	return r
}

// apiKinds are the kinds of an API key's limits, longest first so that "input-tokens-limit" is
// not read as kind "input" of field "tokens-limit".
var apiKinds = []string{"output-tokens", "input-tokens", "requests", "tokens"}

func parseKind(kinds map[string]*KindLimit, rest, val string) {
	for _, kind := range apiKinds {
		field, ok := strings.CutPrefix(rest, kind+"-")
		if !ok {
			continue
		}
		k := kinds[kind]
		if k == nil {
			k = &KindLimit{Kind: kind, Limit: -1, Remaining: -1}
		}
		switch field {
		case "limit":
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				k.Limit = n
			}
		case "remaining":
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				k.Remaining = n
			}
		case "reset":
			if t, err := time.Parse(time.RFC3339, val); err == nil {
				k.Reset = t
			}
		default:
			return
		}
		kinds[kind] = k
		return
	}
}

// parseUnix reads Unix seconds (a fraction allowed); zero when v is not a number.
func parseUnix(v string) time.Time {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e11 {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func parseRetryAfter(v string) time.Duration {
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 && n < 1e7 {
		return time.Duration(n * float64(time.Second))
	}
	return 0
}

// maxTokenBytes bounds a status or window name from the upstream.
const maxTokenBytes = 32

// cleanToken keeps a short lower-case token of letters, digits, '_' and '-' from an upstream
// value that becomes a label: anything else is dropped.
func cleanToken(v string) string {
	var b []byte
	for i := 0; i < len(v) && len(b) < maxTokenBytes; i++ {
		c := v[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
			b = append(b, c)
		}
	}
	return string(b)
}

// DecodeRateLimit fills resp.RateLimit from resp.RateLimitHeader, off the forwarding path.
func DecodeRateLimit(resp *Response) {
	if resp != nil && resp.RateLimit == nil {
		resp.RateLimit = ParseRateLimit(resp.RateLimitHeader)
	}
}

// Refusals: why the API refused to answer, when it did, as Refusal names them.
const (
	// RefusalRateLimit is a 429 rate_limit_error: the account's own limit is spent.
	RefusalRateLimit = "rate_limit"
	// RefusalOverloaded is a 529 overloaded_error (or such an error event mid-stream): the API
	// is short of capacity for everyone, which is not the account's limit.
	RefusalOverloaded = "overloaded"
)

// Refusal tells the API's two refusals apart: RefusalRateLimit, RefusalOverloaded, or "" for
// an answer that is neither.
func Refusal(resp *Response) string {
	if resp == nil {
		return ""
	}
	switch {
	case resp.ErrorType == "rate_limit_error" || (resp.Status == http.StatusTooManyRequests && resp.ErrorType == ""):
		return RefusalRateLimit
	case resp.ErrorType == "overloaded_error" || (resp.Status == 529 && resp.ErrorType == ""):
		return RefusalOverloaded
	}
	return ""
}
