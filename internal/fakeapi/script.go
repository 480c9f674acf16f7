package fakeapi

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Usage is the token usage a Reply reports. The streamed message_start carries every input count
// and OutputTokens 1; message_delta carries the same input counts and the final OutputTokens.
// The zero value reports no tokens at all.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	// CacheCreation5m and CacheCreation1h split CacheCreationInputTokens by TTL; they should add
	// up to it.
	CacheCreation5m int `json:"ephemeral_5m_input_tokens"`
	CacheCreation1h int `json:"ephemeral_1h_input_tokens"`
	// WebSearchRequests, WebFetchRequests and CodeExecutionRequests are usage.server_tool_use:
	// the server tools the API ran for the answer (see Reply.ServerTools).
	WebSearchRequests     int `json:"web_search_requests"`
	WebFetchRequests      int `json:"web_fetch_requests"`
	CodeExecutionRequests int `json:"code_execution_requests"`
	// Speed ("standard" or "fast") and InferenceGeo ("global", "us") are reported as given;
	// empty leaves them out.
	Speed        string `json:"speed"`
	InferenceGeo string `json:"inference_geo"`
}

// Iteration is one entry of usage.iterations: a sub-inference such as an advisor's, reported
// beside (not inside) the usage's counts.
type Iteration struct {
	Type                     string `json:"type"` // "message", "advisor_message", "compaction"
	Model                    string `json:"model,omitempty"`
	InputTokens              int    `json:"input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
}

// Add returns the sum of u and v: counts add up, the speed and inference geo are u's, else v's.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheCreation5m:          u.CacheCreation5m + v.CacheCreation5m,
		CacheCreation1h:          u.CacheCreation1h + v.CacheCreation1h,
		WebSearchRequests:        u.WebSearchRequests + v.WebSearchRequests,
		WebFetchRequests:         u.WebFetchRequests + v.WebFetchRequests,
		CodeExecutionRequests:    u.CodeExecutionRequests + v.CodeExecutionRequests,
		Speed:                    cmp.Or(u.Speed, v.Speed),
		InferenceGeo:             cmp.Or(u.InferenceGeo, v.InferenceGeo),
	}
}

// ToolCall is one tool_use block of a Reply.
type ToolCall struct {
	// ID is the tool_use id; when empty the server makes a unique "toolu_fake…" one, so a sticky
	// reply never repeats an id.
	ID    string
	Name  string
	Input map[string]any // marshalled as the tool input JSON; nil sends {}
}

// ServerToolCall is a call of one of the API's own tools (web_search) that the API ran while
// answering: a server_tool_use block and its result block, streamed before the reply's text.
type ServerToolCall struct {
	Name  string         // "web_search"
	Input map[string]any // {"query": …}
	// ResultType is the result block's type ("web_search_tool_result"); Results its content.
	ResultType string
	Results    []map[string]any
}

// Reply is one scripted answer. Exactly one of three shapes applies:
//   - Status != 0: an HTTP error with a JSON error body (ErrorType, ErrorMessage);
//   - StreamError != "": a stream that starts normally, sends Text, then an SSE error event of
//     that type and ends without message_stop (a non-streaming request gets a 500 instead);
//     with ToolCalls, the text block ends and the first call begins before the error, cut
//     halfway through its input;
//   - otherwise a message with Text (if any) followed by ToolCalls (if any).
//
// The zero value answers an empty end_turn message with zero usage.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// ServerTools come first in the answer; Usage should count them (WebSearchRequests, …).
	ServerTools []ServerToolCall
	// Iterations are reported in the usage as usage.iterations.
	Iterations []Iteration
	// StopReason defaults to "tool_use" when there are ToolCalls, else "end_turn".
	StopReason string
	Usage      Usage

	// Status, ErrorType and ErrorMessage describe an HTTP error reply. ErrorType defaults to
	// the type the status implies (529 → overloaded_error, 429 → rate_limit_error,
	// 500 → api_error).
	Status       int
	ErrorType    string
	ErrorMessage string
	// RetryAfter, when positive, is sent as retry-after (whole seconds) and retry-after-ms.
	RetryAfter time.Duration

	// StreamError is the error type of a mid-stream SSE error event.
	StreamError string

	// Pings is how many ping events to send before the first content block and between blocks,
	// PingEvery the pause before each. Zero PingEvery sends them without pause.
	Pings     int
	PingEvery time.Duration
	// ChunkDelay is the pause before each content delta (zero: none).
	ChunkDelay time.Duration
}

// stopReason is the stop_reason the reply ends with.
func (r Reply) stopReason() string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case len(r.ToolCalls) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// errorType is the JSON error type of an HTTP error reply.
func (r Reply) errorType() string {
	if r.ErrorType != "" {
		return r.ErrorType
	}
	switch r.Status {
	case 529:
		return "overloaded_error"
	case 429:
		return "rate_limit_error"
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 404:
		return "not_found_error"
	default:
		return "api_error"
	}
}

// Matcher decides whether a Rule applies to a request.
type Matcher func(*Request) bool

// Rule answers the requests it matches with its Replies in order: the first matching request gets
// Replies[0], the next Replies[1], and once they run out the last one again (sticky).
// A Rule with no Replies answers with the zero Reply.
type Rule struct {
	// Name says what kind of request the rule stands for ("title", "main", "subagent", …);
	// it is reported in Served.Rule.
	Name    string
	Match   Matcher // nil matches every request
	Replies []Reply
}

// Script chooses a reply for each Messages API request: the first Rule whose Match accepts the
// request answers it. Requests no rule accepts get Default, reported as rule "default".
// The zero value answers every request with an empty end_turn message.
type Script struct {
	Name    string
	Rules   []Rule
	Default Reply
	// Limits, when set, reports the account's limits on every answer (ratelimit.go).
	Limits *Limits
	// PromptCache, when set, reports the input counts of every message the way the API's
	// prompt cache would (promptcache.go), instead of the replies' own: reads of what earlier
	// requests cached, writes up to the last cache marker, the rest uncached. The replies'
	// output tokens stay theirs.
	PromptCache bool
}

// IsTitle matches session-title side requests: no tools, a JSON schema output format, or a
// <session> wrapper around the user text.
func IsTitle(r *Request) bool {
	if r.ToolsPresent && len(r.ToolNames) > 0 {
		return false
	}
	if r.OutputFormat == "json_schema" {
		return true
	}
	for _, m := range r.Messages {
		for _, t := range m.Texts {
			if strings.Contains(t, "<session>") {
				return true
			}
		}
	}
	return false
}

// IsSide matches every request without tools (titles and other auxiliary side requests) that
// is not a compaction.
func IsSide(r *Request) bool {
	return len(r.ToolNames) == 0 && !IsCompaction(r)
}

// IsSubagent matches a subagent's requests.
func IsSubagent(r *Request) bool { return r.Subagent() }

// IsCompaction matches the summarisation request of a compaction: its last user text starts
// with "CRITICAL: Respond with TEXT ONLY".
func IsCompaction(r *Request) bool {
	m := r.Last()
	if m == nil || m.Role != "user" {
		return false
	}
	for _, t := range m.Texts {
		if strings.HasPrefix(strings.TrimSpace(t), "CRITICAL: Respond with TEXT ONLY") {
			return true
		}
	}
	return false
}

// IsTaskNotification matches a main-chain request whose last user message carries a background
// task's completion notice (a <task-notification> inside a system reminder), which Claude Code
// sends as a new request after a background subagent finishes.
func IsTaskNotification(r *Request) bool {
	m := r.Last()
	if m == nil || m.Role != "user" || len(m.ToolResults) > 0 {
		return false
	}
	for _, t := range m.Texts {
		if strings.Contains(t, "<task-notification>") {
			return true
		}
	}
	return false
}

// HasTool matches requests that offer the tool named name (a server tool by its name, too).
func HasTool(name string) Matcher {
	return func(r *Request) bool { return slices.Contains(r.ToolNames, name) }
}

// HasToolResults matches requests whose last message carries tool results.
func HasToolResults(r *Request) bool { return r.HasToolResults() }

// All matches when every matcher does (and when there are none).
func All(ms ...Matcher) Matcher {
	return func(r *Request) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

// Not inverts a matcher.
func Not(m Matcher) Matcher { return func(r *Request) bool { return !m(r) } }
