// Package wire decodes what Claude Code and the Anthropic Messages API exchange: request headers,
// request bodies, SSE streams and JSON responses. It keeps only what the tracker needs (shapes,
// sizes, ids, usage and short previews), never whole bodies, and never credentials.
//
// Every decoder here tolerates input it does not understand: an unknown field, role, block type or
// event is counted as "other", never an error. Parsing never affects forwarding: the proxy hands
// wire copies of the bytes it has already forwarded.
package wire

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Endpoint classifies a request path. The zero value is EndpointOther.
type Endpoint int

// Endpoints cctrace tells apart.
const (
	EndpointOther       Endpoint = iota // anything else (GET probes, models, …)
	EndpointMessages                    // POST /v1/messages
	EndpointCountTokens                 // POST /v1/messages/count_tokens
)

// String returns a short stable name, used in logs and span attributes.
func (e Endpoint) String() string {
	switch e {
	case EndpointMessages:
		return "messages"
	case EndpointCountTokens:
		return "count_tokens"
	default:
		return "other"
	}
}

// Headers holds the request headers cctrace reads. Credentials are never copied here.
// The zero value means none of them was present.
type Headers struct {
	SessionID        string   // X-Claude-Code-Session-Id
	AgentID          string   // x-claude-code-agent-id (subagent requests only)
	ParentAgentID    string   // x-claude-code-parent-agent-id (nested subagents)
	ClientRequestID  string   // x-client-request-id
	UserAgent        string   // User-Agent
	AnthropicVersion string   // anthropic-version
	Beta             []string // anthropic-beta, split on commas, trimmed
	RetryCount       int      // X-Stainless-Retry-Count (0 when absent or not a number)
	Traceparent      string   // W3C traceparent, when Claude Code's own tracing propagates it
}

// Identity is who sent a request: what the proxy read of it on the forwarding path, and the
// person and team the pipeline resolved from that (with Body.AccountUUID) before the tracker saw
// the request. The zero value is a request from nobody known.
type Identity struct {
	// Header is the value of the identity header a person sets (X-Cctrace-User by default),
	// cleaned and bounded; empty when absent.
	Header string
	// Credential is a keyed fingerprint of the request's x-api-key or bearer token ("key-" and 16
	// hex digits), never the credential itself; empty when the request carried none.
	Credential string
	// User and Team are the person and team the request is attributed to; empty until resolved,
	// and Team empty when the person has none.
	User, Team string
	// Account is the account whose limits the request counts against, as a keyed fingerprint:
	// the subscription account's ("acct-…") or, without one, the credential's; empty until
	// resolved, and when the request carried neither.
	Account string
}

// Request is one API request as seen by the proxy once its body has been read (or abandoned).
// The zero value is an empty request to an unknown endpoint.
type Request struct {
	ExchangeID uint64    // unique per proxied exchange, assigned by the proxy
	Time       time.Time // when the request reached the proxy
	Method     string
	Path       string // URL path, without the query
	Endpoint   Endpoint
	// Provider is the service the proxy forwarded the request to.
	Provider Provider
	// PathModel is the model the path names (Vertex AI, Bedrock: Route.Model); their bodies
	// carry none, and decoding fills Body.Model from it.
	PathModel string
	// PathStream is true when the path asks for a streamed answer (Route.Stream); decoding sets
	// Body.Stream from it.
	PathStream bool
	Headers    Headers
	// Identity is who sent the request, as far as cctrace can tell without keeping a credential.
	Identity Identity
	BodySize int64 // bytes of request body forwarded (after any transfer decoding)
	// ContentEncoding is the request's Content-Encoding header ("" for identity): the body copy
	// handed to the observer is still encoded so.
	ContentEncoding string
	// Body is the decoded body. Nil when the request had no JSON body or it could not be decoded;
	// ParseError then says why (empty when there was simply no body).
	Body       *Body
	ParseError string
}

// NotDecoded starts the ParseError of a request or response whose body cctrace forwarded but did
// not decode because one of its memory budgets was full (the proxy's copy budget, the pipeline's
// decode queue): load shed, not a malformed body. IsNotDecoded tells such errors apart.
const NotDecoded = "not decoded: "

// The ParseErrors of the two budgets begin so.
const (
	NotDecodedCopyBudget = NotDecoded + "cctrace was already copying "
	NotDecodedQueueFull  = NotDecoded + "cctrace's decode queue was full"
)

// IsNotDecoded reports whether parseError (Request.ParseError or Response.ParseError) says the
// body was not decoded because of a memory budget (see NotDecoded).
func IsNotDecoded(parseError string) bool { return strings.HasPrefix(parseError, NotDecoded) }

// Body is the part of a Messages API request body that the tracker and sinks use.
// The zero value is a request with no messages.
type Body struct {
	Model     string
	MaxTokens int
	Stream    bool
	// UserID is metadata.user_id as sent (a JSON string in current Claude Code, a legacy
	// user_<hash>_account_<uuid>_session_<uuid> string in older versions).
	UserID string
	// MetadataSessionID is the session id found inside UserID, in either format.
	MetadataSessionID string
	// AccountUUID is the account_uuid found inside UserID, in either format: the account of a
	// subscription login, empty with an API key.
	AccountUUID string

	Thinking string // thinking.type: "adaptive", "enabled", "disabled", or "" when absent
	Effort   string // output_config.effort, when present
	// OutputFormat is output_config.format.type (e.g. "json_schema"), when present.
	OutputFormat string
	// ContextManagement is true when the request carries a context_management object.
	ContextManagement bool
	// WorkingDirectory is the primary working directory Claude Code names in its environment
	// message (a local path: no sink shows it whole); empty when the request has none.
	WorkingDirectory string

	System SystemInfo
	Tools  ToolsInfo
	// Messages describes every message, in order; content is reduced to counts and sizes.
	Messages []Message
	// CacheBreakpoints counts cache_control markers across system, tools and messages.
	CacheBreakpoints int
	// Anatomy is what the request's input is made of, part by part, and where its cache
	// breakpoints lie.
	Anatomy Anatomy

	// HistoryHash identifies the messages array (every message, byte for byte): two requests
	// with the same HistoryHash carry the same conversation, which is how retries are recognised.
	HistoryHash uint64
	// FirstHumanText is the first human text of the first user message: its first text block that
	// is not a <system-reminder>, truncated to HumanTextLimit bytes. It is how a subagent's first
	// request is matched to the Agent tool call whose prompt it carries, and how compaction
	// continuations are recognised.
	FirstHumanText string
	// FirstHumanTextHash hashes the whole first human text (not truncated).
	FirstHumanTextHash uint64
	// CompactCommand is true when any user message carries <command-name>/compact</command-name>.
	CompactCommand bool
	// PlanMode is true when the conversation is in Plan Mode: the last Plan Mode announcement in
	// a system-role message or user reminder says it is active, not that it was exited.
	PlanMode bool
	// TurnOpener is the index of the message that opened the turn this request goes on with, as
	// far as its history tells: the last user message that carries human text, or Claude Code's
	// own text of a kind that opens turns (all but the resumptions of a cut answer), and no tool
	// results unless it says the user interrupted. -1 when there is none. With the session and
	// the first human text it names the turn the same way on any cctrace that decodes any of
	// the turn's requests, up to the first of Claude Code's own texts that open a turn when none
	// is open but continue an open one (a correction, hook feedback, a safety stop, a task
	// notification): the history cannot tell which it did, so from that message on TurnOpener
	// points at it, and a cctrace that picks the turn up after it names the turn anew.
	TurnOpener int
}

// HumanTextLimit bounds the human text kept from a request (previews and prefix matching).
const HumanTextLimit = 512

// SystemInfo summarises the top-level system prompt.
type SystemInfo struct {
	Blocks int // text blocks (a plain string counts as one)
	Bytes  int // total text bytes
	// BillingHeader is the x-anthropic-billing-header text block, when present.
	BillingHeader string
	// Subagent is true when the billing header carries cc_is_subagent=true.
	Subagent bool
}

// ToolsInfo summarises the tools array.
type ToolsInfo struct {
	Present  bool // the request had a "tools" key (an empty list is Present with Count 0)
	Count    int
	Deferred int      // tools with defer_loading: true
	Server   int      // tools the API runs itself (server tools: web_search_…, web_fetch_…, …)
	Names    []string // tool names, in order, at most ToolNameLimit of them
}

// ToolNameLimit bounds how many tool names a ToolsInfo keeps.
const ToolNameLimit = 256

// Role is a message role. Unknown roles are RoleOther.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleOther     Role = "other"
)

// roles are the roles parseRole returns.
var roles = [...]Role{RoleOther, RoleUser, RoleAssistant, RoleSystem}

// BlockType is a content block type. A string content counts as one BlockText.
// Unknown types are BlockOther.
type BlockType string

// Content block types seen from Claude Code.
const (
	BlockText             BlockType = "text"
	BlockToolUse          BlockType = "tool_use"
	BlockToolResult       BlockType = "tool_result"
	BlockThinking         BlockType = "thinking"
	BlockRedactedThinking BlockType = "redacted_thinking"
	BlockImage            BlockType = "image"
	BlockDocument         BlockType = "document"
	BlockOther            BlockType = "other"
)

// blockTypes lists the block types in the order BlockCounts keeps them.
var blockTypes = [...]BlockType{BlockText, BlockToolUse, BlockToolResult, BlockThinking, BlockRedactedThinking, BlockImage, BlockDocument, BlockOther}

// blockIndex is t's index in blockTypes; unknown types count as BlockOther.
func blockIndex(t BlockType) int {
	for i, bt := range blockTypes[:len(blockTypes)-1] {
		if t == bt {
			return i
		}
	}
	return len(blockTypes) - 1
}

// BlockCounts counts content blocks by type. It is a value, not a map: a request's history has
// hundreds of messages, and BodyCache keeps them decoded. The zero value counts none.
type BlockCounts [len(blockTypes)]int32

// Add counts n more blocks of type t.
func (c *BlockCounts) Add(t BlockType, n int) { c[blockIndex(t)] += int32(n) }

// Get returns how many blocks of type t there are.
func (c BlockCounts) Get(t BlockType) int { return int(c[blockIndex(t)]) }

// Each calls f with every block type that has a count, in a fixed order.
func (c BlockCounts) Each(f func(t BlockType, n int)) {
	for i, n := range c {
		if n != 0 {
			f(blockTypes[i], int(n))
		}
	}
}

// MarshalJSON writes the counts as an object of the types that have one, like the map they
// replace.
func (c BlockCounts) MarshalJSON() ([]byte, error) {
	m := make(map[BlockType]int, len(c))
	c.Each(func(t BlockType, n int) { m[t] = n })
	return json.Marshal(m)
}

// Message is one message of the request, reduced to what the tracker uses.
type Message struct {
	Role Role
	// Blocks counts content blocks by type.
	Blocks BlockCounts
	// HumanText is true when a user message has text that is not only <system-reminder> blocks.
	HumanText bool
	// Synthetic is the kind of Claude Code's own text a user message carries as its first
	// human text (or a task notification in its reminders, when it has no human text); "" for
	// text a person typed, and for messages without either.
	Synthetic Synthetic
	// Text is the message's human text (system reminders skipped), truncated to HumanTextLimit.
	// Only filled for the last user/assistant message and the first user message.
	Text string
	// ToolResults lists the tool_result blocks, in order (user messages only). ToolResults and
	// ToolUseIDs are only filled from the last assistant message on (for every message when
	// there is none): the tool calls in progress and their results. Earlier messages carry the
	// results of calls already answered, which the tracker does not look at again, and dropping
	// them is what lets a BodyCache keep about 40 bytes per message of a history instead of a
	// few hundred.
	ToolResults []ToolResult
	// ToolUseIDs lists the ids of tool_use blocks (assistant messages only).
	ToolUseIDs []string
}

// ToolResult is one tool_result block of a request.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Bytes     int // size of its content (text bytes, or raw JSON bytes for non-text blocks)
	// AgentID is the agentId: value found in its text (results of the Agent tool).
	AgentID string
	// Preview is the start of its text, truncated to PreviewLimit; only kept for the last message.
	Preview string
}

// PreviewLimit bounds content previews kept from requests and responses.
const PreviewLimit = 256

// Response is the upstream's answer to one Request, complete once the body ended, failed or was
// abandoned by the client. The zero value is a response that never arrived.
type Response struct {
	ExchangeID uint64
	Status     int       // HTTP status; 0 when no response was received (see Err)
	HeaderTime time.Time // when response headers arrived
	// FirstChunk is when the first content delta (text, tool input or thinking) arrived: time to
	// first token. Zero when none did.
	FirstChunk time.Time
	End        time.Time // when the body ended, failed or was closed
	RequestID  string    // upstream request-id header
	// ContentType and ContentEncoding are the response headers of the same name.
	ContentType     string
	ContentEncoding string
	Streamed        bool  // an event stream (IsEventStream)
	BodySize        int64 // bytes forwarded to the client
	// Message is the decoded message; nil for error responses and non-message endpoints.
	Message *MessageInfo
	// InputTokens is count_tokens' answer, when the endpoint was count_tokens.
	InputTokens int
	// ErrorType is error.type from a JSON error body or a mid-stream error event.
	ErrorType    string
	ErrorMessage string // error.message, truncated to PreviewLimit
	// Err is set when the exchange failed in transport: the upstream was unreachable, the stream
	// was cut, or the client went away (then Canceled is true too).
	Err      string
	Canceled bool
	// Incomplete is true when a stream ended without message_stop.
	Incomplete bool
	// ParseError says why the body could not be decoded, when it could not.
	ParseError string
	// Chunks says when each part of an event stream's body copy was forwarded, in order, for
	// DecodeResponse to time the events by (time to first token, tool call ends); nil for other
	// bodies, and once decoded.
	Chunks []Chunk
	// RateLimitHeader holds the response's rate-limit headers as sent (RateLimitHeader); nil
	// when it had none. RateLimit is what they say, once decoded (DecodeRateLimit).
	RateLimitHeader http.Header
	RateLimit       *RateLimit
}

// Chunk is one part of a response body as it was forwarded: the bytes of the body from the
// previous Chunk's End (or the start) up to End reached the client at At.
type Chunk struct {
	End int
	At  time.Time
}

// MessageInfo is the assistant message of a response (streamed or not).
type MessageInfo struct {
	ID         string
	Model      string
	StopReason string // end_turn, tool_use, max_tokens, stop_sequence, refusal, pause_turn, …
	Usage      Usage
	// Blocks counts content blocks of the response by type.
	Blocks   map[BlockType]int
	ToolUses []ToolUse
	// Text is the start of the response's text, truncated to PreviewLimit.
	Text string
	// Iterations are the sub-inferences the usage reports beside its top-level counts.
	Iterations []Iteration
}

// Usage is token usage as the upstream reported it; for streams, the last cumulative value.
// Its JSON form is the one cctrace serves (/api/turns), not the API's.
type Usage struct {
	InputTokens              int `json:"input"` // uncached input only, as Anthropic reports it
	OutputTokens             int `json:"output"`
	CacheReadInputTokens     int `json:"cache_read"`
	CacheCreationInputTokens int `json:"cache_creation"`
	// CacheCreation5m and CacheCreation1h split cache writes by TTL, when the upstream reports it
	// (usage.cache_creation.ephemeral_5m_input_tokens / ephemeral_1h_input_tokens).
	CacheCreation5m int `json:"cache_creation_5m,omitempty"`
	CacheCreation1h int `json:"cache_creation_1h,omitempty"`
	// ServerToolUse counts the API's own tools it ran for the answer (usage.server_tool_use),
	// billed per request beside the tokens.
	ServerToolUse ServerToolUse `json:"server_tool_use,omitzero"`
	// Speed is usage.speed ("standard", "fast": fast mode costs a multiple) and InferenceGeo
	// usage.inference_geo (where inference ran: "us" costs more for recent models); empty when
	// not reported.
	Speed        string `json:"speed,omitempty"`
	InferenceGeo string `json:"inference_geo,omitempty"`
}

// ServerToolUse counts server tool requests (usage.server_tool_use). The zero value is none.
type ServerToolUse struct {
	WebSearch     int `json:"web_search_requests,omitempty"`
	WebFetch      int `json:"web_fetch_requests,omitempty"`
	CodeExecution int `json:"code_execution_requests,omitempty"`
}

// Iteration is one entry of usage.iterations other than the answer's own sampling ("message"):
// a sub-inference the API ran within the request, such as an advisor's ("advisor_message") or a
// compaction's, whose tokens the top-level counts leave out. Model is empty when the entry
// names none (it ran on the request's model).
type Iteration struct {
	Type  string
	Model string
	Usage Usage
}

// TotalInput is every input token of the request: uncached, cache reads and cache writes.
func (u Usage) TotalInput() int {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

// ToolUse is one tool_use block of a response.
type ToolUse struct {
	ID   string
	Name string
	// End is when its content_block_stop arrived (the response end for non-streamed answers):
	// the moment the tool call is fully known to the client.
	End        time.Time
	InputBytes int
	// Input is the start of the input JSON, truncated to PreviewLimit.
	Input string
	// Agent holds the decoded input of an Agent (or Task) tool call.
	Agent *AgentCall
}

// AgentCall is the input of an Agent tool call that starts a subagent.
type AgentCall struct {
	Description     string
	SubagentType    string
	RunInBackground bool
	// PromptHash hashes the prompt with the same function as Body.FirstHumanTextHash, so that the
	// subagent's first request can be matched to this call.
	PromptHash uint64
}
