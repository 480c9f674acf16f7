package instrument

import (
	"encoding/hex"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// TraceID identifies one trace: one agentic turn. The zero value is invalid.
type TraceID [16]byte

// SpanID identifies one span within a trace. The zero value is invalid (no parent).
type SpanID [8]byte

// String returns the 32-digit lower-case hex form used by W3C trace context and Jaeger.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsValid reports whether t is not all zeros.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// String returns the 16-digit lower-case hex form.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsValid reports whether s is not all zeros.
func (s SpanID) IsValid() bool { return s != SpanID{} }

// SpanKind says what a span stands for. The zero value is invalid.
type SpanKind int

// Span kinds.
const (
	KindTurn     SpanKind = iota + 1 // root of a turn: invoke_agent claude-code
	KindChat                         // one API request attempt: chat {model}
	KindTool                         // one tool round trip: execute_tool {name}
	KindSubagent                     // a subagent run under its Agent tool call: invoke_agent {type}
)

// RequestKind is the role of one API request in the session (cctrace.request.kind).
type RequestKind string

// Request kinds.
const (
	RequestTurn        RequestKind = "turn"         // the request that carries a human prompt
	RequestToolResults RequestKind = "tool_results" // a main-chain request carrying tool results
	RequestSubagent    RequestKind = "subagent"     // any request of a subagent
	RequestAuxiliary   RequestKind = "auxiliary"    // side requests: titles, classifiers, …
	// RequestTool is a request a running tool call makes of the API itself (WebSearch's search,
	// WebFetch's question about the page it fetched): a chat span under that call's.
	RequestTool        RequestKind = "tool"
	RequestCompaction  RequestKind = "compaction"   // the summarisation request of a compaction
	RequestCountTokens RequestKind = "count_tokens" // /v1/messages/count_tokens
	// RequestResumption is a main-chain request that goes on with an answer whose stream was cut
	// before it stopped: Claude Code keeps what arrived and asks the model to resume.
	RequestResumption RequestKind = "resumption"
	RequestOther      RequestKind = "other" // not a Messages API request, or not decodable
	// RequestNoSession is a request that is not a Messages API call and names no session (a
	// load balancer's or a person's probe): it is counted, but makes no trace.
	RequestNoSession RequestKind = "no_session"
)

// Synthetic names a kind of user-role text that Claude Code writes itself rather than a person
// typing it: wire.Synthetic, which recognises them.
type Synthetic = wire.Synthetic

// Kinds of synthetic user text (see wire.Synthetic).
const (
	SyntheticCutOff           = wire.SyntheticCutOff
	SyntheticOutputLimit      = wire.SyntheticOutputLimit
	SyntheticHookFeedback     = wire.SyntheticHookFeedback
	SyntheticTaskNotification = wire.SyntheticTaskNotification
	SyntheticInterrupt        = wire.SyntheticInterrupt
	SyntheticCorrection       = wire.SyntheticCorrection
	SyntheticSafetyStop       = wire.SyntheticSafetyStop
	SyntheticScheduled        = wire.SyntheticScheduled
	SyntheticCompaction       = wire.SyntheticCompaction
)

// StatusCode is the outcome of a span. The zero value is StatusUnset.
type StatusCode int

// Span status codes, as in OpenTelemetry.
const (
	StatusUnset StatusCode = iota
	StatusOK
	StatusError
)

// Span is one unit of the tracker's output. SpanStarted hands it with the fields known at start;
// SpanEnded hands the same pointer completed. Sinks must not modify it, and must not keep it past
// the call unless they copy what they need.
type Span struct {
	TraceID TraceID
	ID      SpanID
	Parent  SpanID // zero for the root of a trace; a span of the client's with ClientParent
	Kind    SpanKind
	Name    string // span name per the GenAI conventions, e.g. "chat claude-sonnet-4-6"
	Start   time.Time
	End     time.Time // zero until ended

	SessionID string // gen_ai.conversation.id; never used as a metric label
	TurnIndex int    // 1-based index of the turn in its session; 0 outside any turn
	Agent     string // "claude-code" for the main chain, else the subagent type
	// User and Team are who the span is attributed to (wire.Identity): a chat span's own
	// request's; a turn's, a subagent's and a tool call's, the request that opened or answered
	// them. Empty when unknown; never used as unbounded metric labels (sinks cap them).
	User, Team string

	Status StatusCode
	// ErrorType is the error.type attribute: an upstream error type, an HTTP status, "canceled",
	// "interrupted", "timeout", … Empty unless Status is StatusError.
	ErrorType string
	// StatusMessage is a short description for StatusError.
	StatusMessage string

	// Link is the span context that Claude Code's own tracing propagated (traceparent header),
	// when there was one and it is not the span's parent: sinks add it as a span link.
	Link *LinkedSpan
	// ClientParent is set when Parent is the client's span that sent the request (see
	// WithJoinClientTrace): a span of the client's trace, which the tracker never emits, so
	// sinks treat it as a remote parent. A turn root with ClientParent is still the root of its
	// turn.
	ClientParent bool

	// TurnTotals are the running totals of the turn the span counts in, as of the sink call,
	// while that turn is open (nil otherwise): what a view of a turn in progress shows. A sink
	// copies what it keeps of them.
	TurnTotals *Totals

	Chat     *Chat     // KindChat only
	Tool     *Tool     // KindTool only
	Subagent *Subagent // KindSubagent only
	Turn     *Turn     // KindTurn only
}

// LinkedSpan is a span in another trace, from a W3C traceparent header.
type LinkedSpan struct {
	TraceID TraceID
	SpanID  SpanID
	Sampled bool
}

// Chat describes one API request attempt.
type Chat struct {
	Kind RequestKind
	// Request is the request as received, with Body.Messages dropped after tracking.
	Request wire.Request
	// Messages is len(Request.Body.Messages) before the tracker dropped them; 0 without a body.
	Messages int
	// Response is set when the span ends.
	Response *wire.Response
	Attempt  int // 0 for the first attempt, 1 for the first retry, …
	// Compacted is true on the first request after a compaction (gen_ai.conversation.compacted).
	Compacted bool
	// Compaction is set on the request where the tracker recognised a finished compaction.
	Compaction *Compaction
	// NewBlocks counts, by role and type, the content blocks of the messages this request
	// carries beyond those of its chain's previous request (all of them for a chain's first
	// request, and after its history was rewritten, as by a compaction). A retry carries none
	// new. Side requests have none: they belong to no chain.
	NewBlocks map[BlockKey]int
	// ResponseBlocks counts the content blocks of the answer, by type, when it belongs to a
	// chain and did not fail: the assistant's blocks as the upstream first sent them.
	ResponseBlocks map[wire.BlockType]int
	// Synthetic is the kind of Claude Code's own text in the request's newest user message,
	// when it carries one.
	Synthetic Synthetic
	// Cost is the estimated USD cost of the answer's usage; Priced is false when there was no
	// usage or the price table does not know the model (see WithPricing). Unpriced is true when
	// a price table is set and could not price an answer with usage.
	Cost     float64
	Priced   bool
	Unpriced bool
	// PlanMode is true when the request carries Plan Mode reminders.
	PlanMode bool
	// Prompt is the human text preview of a turn request; empty unless content capture is on.
	Prompt string
	// Context is the request's input tokens by part, estimated from its anatomy (see
	// wire.Anatomy.Apportion); set when the answer carried usage.
	Context *wire.Estimate
	// Change is what changed in the prompt since the previous request of its chain that was
	// answered with usage, and CacheMiss why the cache missed, when it did; both set when the
	// answer carried usage and the chain had such a request.
	Change    *Change
	CacheMiss *CacheMiss
}

// EachFirstSeenBlock calls f with the content blocks this exchange put on the wire for the first
// time in its conversation, by role and type, in no particular order: the request's new blocks
// other than the assistant's (those are earlier answers, sent back) and the answer's own blocks.
// Over a conversation every block is counted once, when it first appears.
func (c *Chat) EachFirstSeenBlock(f func(k BlockKey, n int)) {
	for k, n := range c.NewBlocks {
		if k.Role != wire.RoleAssistant && n > 0 {
			f(k, n)
		}
	}
	for typ, n := range c.ResponseBlocks {
		if n > 0 {
			f(BlockKey{Role: wire.RoleAssistant, Type: typ}, n)
		}
	}
}

// BlockKey is a (role, block type) pair for counting content blocks.
type BlockKey struct {
	Role wire.Role
	Type wire.BlockType
}

// Compaction is one context compaction, recognised on the first request after it.
type Compaction struct {
	Trigger string // "manual" (/compact) or "auto"
	// MessagesBefore and MessagesAfter are the chain's message counts around the compaction.
	MessagesBefore, MessagesAfter int
	// ContextBefore is the last context size (all input tokens) before the compaction.
	ContextBefore int
}

// ToolOutcome is how a tool round trip ended. The zero value is a call still running.
type ToolOutcome string

// Tool outcomes.
const (
	ToolSuccess ToolOutcome = "success"
	ToolError   ToolOutcome = "error" // the result has is_error set
	// ToolOutcomeUnknown is the outcome of a tool call whose result came in a request cctrace
	// forwarded without decoding its body (a memory budget was full): the call is over, but
	// whether it succeeded is not known. Not an error.
	ToolOutcomeUnknown ToolOutcome = "unknown"
	// ToolInterrupted: the user interrupted the turn while the call ran (Claude Code rejects it).
	ToolInterrupted ToolOutcome = "interrupted"
	// ToolAbandoned: the turn or subagent ended without the call's result.
	ToolAbandoned ToolOutcome = "abandoned"
	ToolShutdown  ToolOutcome = "shutdown" // cctrace stopped first
	ToolEvicted   ToolOutcome = "evicted"  // the session was dropped first
	// ToolHandedOff: the session went on on another replica first (see WithReplica).
	ToolHandedOff ToolOutcome = "handed_off"
)

// Outcome is how a turn ended: the stop reason of its final answer (end_turn, max_tokens,
// stop_sequence, refusal, …, as the upstream sent it) or one of cctrace's own outcomes below.
// The zero value is a turn still running.
type Outcome string

// Outcomes of a turn that are not a stop reason.
const (
	OutcomeInterrupted Outcome = "interrupted"  // a new prompt came first
	OutcomeError       Outcome = "error"        // its last request failed and was not retried
	OutcomeIdleTimeout Outcome = "idle_timeout" // no request for the turn idle timeout
	OutcomeEvicted     Outcome = "evicted"      // the session was dropped (idle, or too many)
	OutcomeShutdown    Outcome = "shutdown"     // cctrace stopped first
	OutcomeCompaction  Outcome = "compaction"   // a /compact summarisation
	// OutcomeHandedOff ends a turn's part on a replica whose session went on elsewhere (see
	// WithReplica): this replica stopped, or its session moved, before the turn ended. The
	// replica that carries the turn on ends it, in the same trace.
	OutcomeHandedOff Outcome = "handed_off"
)

// Trigger is what started a turn. The zero value is not used.
type Trigger string

// Turn triggers. A turn that a synthetic user text started has that text's kind as trigger:
// Trigger(SyntheticOutputLimit), Trigger(SyntheticHookFeedback), ….
const (
	TriggerPrompt Trigger = "prompt" // a human prompt
	// TriggerTaskNotification: Claude Code reporting that a background task finished.
	TriggerTaskNotification = Trigger(SyntheticTaskNotification)
	// TriggerContinuation: a request without human text while no turn was open, e.g. tool
	// results after cctrace restarted or a turn timed out.
	TriggerContinuation Trigger = "continuation"
	// TriggerUndecoded: a large request of the main agent whose body cctrace did not decode,
	// while no turn was open.
	TriggerUndecoded  Trigger = "undecoded"
	TriggerCompaction Trigger = "compaction" // a /compact summarisation
)

// Tool describes one tool round trip: from the end of its tool_use block in a response to the
// arrival of its tool_result in a later request.
type Tool struct {
	Name        string
	CallID      string
	Outcome     ToolOutcome
	InputBytes  int
	ResultBytes int
	// Input and Result are previews; empty unless content capture is on.
	Input, Result string
	// Agent is the decoded input of an Agent tool call.
	Agent *wire.AgentCall
}

// Subagent describes a subagent run.
type Subagent struct {
	Type       string // subagent_type, "general-purpose" when not given
	AgentID    string // x-claude-code-agent-id
	Background bool
	// Totals add up everything that ran under the subagent (the requests of its own chain and
	// of subagents it started), also after the turn that launched it ended.
	Totals
}

// Turn describes one agentic turn: one human prompt and everything it caused.
type Turn struct {
	Index      int
	Outcome    Outcome
	StopReason string
	Trigger    Trigger
	// Compaction is "manual" when this trace is a /compact summarisation.
	Compaction string
	// Totals add up every request, tool call and subagent of the turn, subagents' included,
	// answered before it ended.
	Totals
	// Prompt is a preview of the human prompt; empty unless content capture is on.
	Prompt string
	// PlanModeEntered and PlanModeExited mark when the turn's requests started and stopped
	// carrying Plan Mode reminders (zero when they did not).
	PlanModeEntered, PlanModeExited time.Time
}

// Sink receives the tracker's output, synchronously and in order, from one goroutine at a time.
// A sink must be fast: it runs on the tracker's goroutine, never on the forwarding path.
type Sink interface {
	// SpanStarted is called when a span opens. Its End is zero.
	SpanStarted(s *Span)
	// SpanEnded is called once per started span, with End and the final fields set. A request
	// outside any conversation (Chat.Kind RequestNoSession: a probe) is handed to SpanEnded
	// alone, never started, with no trace or span id: it belongs to no trace, so exporters
	// leave it out, and metrics count it.
	SpanEnded(s *Span)
	// SessionsActive reports the number of sessions the tracker holds, whenever it changes.
	SessionsActive(n int)
}

// Sinks hands every call to each of its sinks, in order. The zero value drops everything.
type Sinks []Sink

var _ Sink = Sinks(nil)

// SpanStarted implements Sink.
func (ss Sinks) SpanStarted(s *Span) {
	for _, k := range ss {
		k.SpanStarted(s)
	}
}

// SpanEnded implements Sink.
func (ss Sinks) SpanEnded(s *Span) {
	for _, k := range ss {
		k.SpanEnded(s)
	}
}

// SessionsActive implements Sink.
func (ss Sinks) SessionsActive(n int) {
	for _, k := range ss {
		k.SessionsActive(n)
	}
}
