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
	RequestCompaction  RequestKind = "compaction"   // the summarisation request of a compaction
	RequestCountTokens RequestKind = "count_tokens" // /v1/messages/count_tokens
	RequestOther       RequestKind = "other"        // not a Messages API request, or not decodable
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
	Parent  SpanID // zero for the root of a trace
	Kind    SpanKind
	Name    string // span name per the GenAI conventions, e.g. "chat claude-sonnet-4-6"
	Start   time.Time
	End     time.Time // zero until ended

	SessionID string // gen_ai.conversation.id; never used as a metric label
	TurnIndex int    // 1-based index of the turn in its session; 0 outside any turn
	Agent     string // "claude-code" for the main chain, else the subagent type

	Status StatusCode
	// ErrorType is the error.type attribute: an upstream error type, an HTTP status, "canceled",
	// "interrupted", "timeout", … Empty unless Status is StatusError.
	ErrorType string
	// StatusMessage is a short description for StatusError.
	StatusMessage string

	// Link is the span context that Claude Code's own tracing propagated (traceparent header),
	// when there was one: sinks add it as a span link.
	Link *LinkedSpan

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
	// NewBlocks counts the content blocks that this request carries for the first time in its
	// chain, by role and type (blocks resent with the history are not counted again).
	NewBlocks map[BlockKey]int
	// PlanMode is true when the request carries Plan Mode reminders.
	PlanMode bool
	// Prompt is the human text preview of a turn request; empty unless content capture is on.
	Prompt string
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

// ToolOutcomeUnknown is the outcome of a tool call whose result came in a request cctrace
// forwarded without decoding its body (a memory budget was full): the call is over, but whether
// it succeeded is not known. Not an error.
const ToolOutcomeUnknown = "unknown"

// Tool describes one tool round trip: from the end of its tool_use block in a response to the
// arrival of its tool_result in a later request.
type Tool struct {
	Name   string
	CallID string
	// Outcome is "success", "error" (is_error), ToolOutcomeUnknown (the result came in a request
	// whose body cctrace did not decode), or, when no result arrived, "interrupted" (a new
	// prompt superseded the turn), "abandoned" (the turn ended otherwise) or "shutdown".
	Outcome     string
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
	// Requests, ToolCalls and Usage total the subagent's own requests.
	Requests  int
	ToolCalls int
	Usage     wire.Usage
}

// Turn describes one agentic turn: one human prompt and everything it caused.
type Turn struct {
	Index int
	// Outcome is the final stop reason (end_turn, max_tokens, stop_sequence, refusal, …) or
	// "interrupted", "error", "idle_timeout", "evicted", "shutdown", or "compaction" for a manual
	// /compact trace.
	Outcome    string
	StopReason string
	// Trigger says what started the turn: "prompt" (a human prompt), "task_notification"
	// (Claude Code reporting a finished background task), "continuation" (a request without human
	// text while no turn was open, e.g. tool results after cctrace restarted or a turn timed out),
	// "undecoded" (a large request of the main agent whose body cctrace did not decode, while no
	// turn was open) or "compaction" (a /compact summarisation).
	Trigger string
	// Compaction is "manual" when this trace is a /compact summarisation.
	Compaction string
	Requests   int // API request attempts, subagents' included
	Retries    int
	ToolCalls  int
	ToolErrors int // tool results with is_error set (not interrupted or abandoned calls)
	Subagents  int
	// ToolCounts counts tool calls by tool name (subagents' included).
	ToolCounts map[string]int
	// ToolFailures counts tool results with is_error set, by tool name.
	ToolFailures map[string]int
	// Usage totals every request of the turn, subagents' included.
	Usage wire.Usage
	// Models lists the models the turn used, in order of first use.
	Models []string
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
	// SpanEnded is called once per started span, with End and the final fields set.
	SpanEnded(s *Span)
	// SessionsActive reports the number of sessions the tracker holds, whenever it changes.
	SessionsActive(n int)
}
