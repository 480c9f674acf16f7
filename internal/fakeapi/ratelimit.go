package fakeapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limits makes the fake report an account's limits on every answer, as the Anthropic API does
// (docs/wire.md, "Rate-limit headers"): a request with a bearer token (a subscription's OAuth
// login) gets the unified windows, one with an API key the API-key limits by kind. Each window
// fills with the tokens the fake has served to that kind of credential. The zero value reports
// nothing.
type Limits struct {
	// Base5h and Base7d are the windows' utilization before the first answer; Capacity5h and
	// Capacity7d the tokens (input of every kind and output) that fill each.
	Base5h, Base7d         float64
	Capacity5h, Capacity7d int
	// TokensPerMinute is the API key's tokens limit; requests 50 a minute.
	TokensPerMinute int
}

// limitState is what the fake has served per kind of credential, for Limits.
type limitState struct {
	start        time.Time
	bearer, keys int // tokens served
}

// Warning is the utilization from which a window reports allowed_warning.
const limitWarning = 0.8

// rateLimitHeaders sets the limit headers of an answer to hr on h, from what was served
// before it; served is added once the answer's usage is known (serveLimits).
func (s *Server) rateLimitHeaders(h http.Header, hr *http.Request, refused bool) {
	l := s.script.Limits
	if l == nil {
		return
	}
	s.mu.Lock()
	st := &s.limits
	if st.start.IsZero() {
		st.start = time.Now()
	}
	bearer, keys, start := st.bearer, st.keys, st.start
	s.mu.Unlock()
	if strings.HasPrefix(strings.ToLower(hr.Header.Get("Authorization")), "bearer ") {
		u5 := l.Base5h + float64(bearer)/float64(max(l.Capacity5h, 1))
		u7 := l.Base7d + float64(bearer)/float64(max(l.Capacity7d, 1))
		status := func(u float64) string {
			switch {
			case refused:
				return "rejected"
			case u >= limitWarning:
				return "allowed_warning"
			}
			return "allowed"
		}
		claim := "five_hour"
		if u7 > u5 {
			claim = "seven_day"
		}
		overall := status(max(u5, u7))
		h.Set("Anthropic-Ratelimit-Unified-Status", overall)
		h.Set("Anthropic-Ratelimit-Unified-Representative-Claim", claim)
		for _, w := range []struct {
			name  string
			util  float64
			reset time.Time
		}{
			{"5h", u5, start.Add(5 * time.Hour).Truncate(time.Hour)},
			{"7d", u7, start.Add(7 * 24 * time.Hour).Truncate(time.Hour)},
		} {
			p := "Anthropic-Ratelimit-Unified-" + w.name + "-"
			h.Set(p+"Utilization", strconv.FormatFloat(w.util, 'f', 4, 64))
			h.Set(p+"Reset", strconv.FormatInt(w.reset.Unix(), 10))
			h.Set(p+"Status", status(w.util))
		}
		h.Set("Anthropic-Ratelimit-Unified-Overage-Status", "rejected")
		h.Set("Anthropic-Ratelimit-Unified-Overage-In-Use", "false")
		return
	}
	if hr.Header.Get("X-Api-Key") == "" {
		return
	}
	reset := time.Now().Add(time.Minute).Truncate(time.Second).UTC().Format(time.RFC3339)
	requests := 50 - int(s.servedCount())
	if refused {
		requests = 0
	}
	for _, k := range []struct {
		kind             string
		limit, remaining int
	}{
		{"requests", 50, max(requests, 0)},
		{"tokens", l.TokensPerMinute, max(l.TokensPerMinute-keys, 0)},
		{"input-tokens", l.TokensPerMinute * 4 / 5, max(l.TokensPerMinute*4/5-keys, 0)},
		{"output-tokens", l.TokensPerMinute / 5, l.TokensPerMinute / 5},
	} {
		p := "Anthropic-Ratelimit-" + k.kind + "-"
		h.Set(p+"Limit", strconv.Itoa(k.limit))
		h.Set(p+"Remaining", strconv.Itoa(k.remaining))
		h.Set(p+"Reset", reset)
	}
}

func (s *Server) servedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.served) % 50
}

// serveLimits counts an answer's usage against its kind of credential.
func (s *Server) serveLimits(hr *http.Request, u Usage) {
	if s.script.Limits == nil {
		return
	}
	n := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(strings.ToLower(hr.Header.Get("Authorization")), "bearer ") {
		s.limits.bearer += n
	} else {
		s.limits.keys += n
	}
}

// ratelimitScript is the ratelimit scenario: a refusal of the account's limit (429 with
// retry-after) that Claude Code waits out, then a Bash call and its answer, with the limits on
// every answer.
func ratelimitScript() Script {
	s := withCommon("ratelimit",
		Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
			Text: "The command printed limits.", Usage: usage(27, 5011, 219, 23),
		}}},
		Rule{Name: "main", Replies: []Reply{
			{Status: http.StatusTooManyRequests, RetryAfter: time.Second,
				ErrorMessage: "This request would exceed your account's rate limit. Please try again later."},
			{Text: "I'll run it.", ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
				"command": "echo limits", "description": "Print a word",
			}}}, Usage: usage(25, 0, 4811, 43)},
		}},
	)
	s.Limits = &Limits{Base5h: 0.41, Base7d: 0.795, Capacity5h: 100_000, Capacity7d: 1_000_000, TokensPerMinute: 40_000}
	return s
}

func init() { scenarios["ratelimit"] = ratelimitScript }
