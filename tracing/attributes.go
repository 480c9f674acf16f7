package tracing

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// Attribute keys. gen_ai.*, http.*, server.*, error.type and user_agent.* follow the OpenTelemetry
// semantic conventions v1.41 (the semconv/v1.41.0 package of go.opentelemetry.io/otel v1.47.0).
// gen_ai.conversation.compacted is not in v1.41; it is spelled as the GenAI registry of
// open-telemetry/semantic-conventions-genai (semconv 1.44+) names it, set only when true.
// cctrace.* keys are this project's own.
const (
	keyConversationCompacted = attribute.Key("gen_ai.conversation.compacted")

	// Turn roots.
	keyTurnIndex      = attribute.Key("cctrace.turn.index")
	keyTurnSubagents  = attribute.Key("cctrace.turn.subagents")
	keyTurnOutcome    = attribute.Key("cctrace.turn.outcome")
	keyTurnTrigger    = attribute.Key("cctrace.turn.trigger")
	keyTurnStopReason = attribute.Key("cctrace.turn.stop_reason")
	keyTurnModels     = attribute.Key("cctrace.turn.models")
	keyTurnPrompt     = attribute.Key("cctrace.turn.prompt")
	keyTurnPlanMode   = attribute.Key("cctrace.turn.plan_mode")

	// Compactions (turn roots of a manual /compact, and the chat span that recognised one).
	keyCompactionTrigger        = attribute.Key("cctrace.compaction.trigger")
	keyCompactionMessagesBefore = attribute.Key("cctrace.compaction.messages_before")
	keyCompactionMessagesAfter  = attribute.Key("cctrace.compaction.messages_after")
	keyCompactionContextBefore  = attribute.Key("cctrace.compaction.context_before")

	// Chat spans: the request.
	keyRequestKind             = attribute.Key("cctrace.request.kind")
	keyRequestEndpoint         = attribute.Key("cctrace.request.endpoint")
	keyRequestMessages         = attribute.Key("cctrace.request.messages")
	keyRequestSystemBlocks     = attribute.Key("cctrace.request.system.blocks")
	keyRequestSystemBytes      = attribute.Key("cctrace.request.system.bytes")
	keyRequestTools            = attribute.Key("cctrace.request.tools")
	keyRequestToolsDeferred    = attribute.Key("cctrace.request.tools.deferred")
	keyRequestCacheBreakpoints = attribute.Key("cctrace.request.cache_breakpoints")
	keyRequestThinking         = attribute.Key("cctrace.request.thinking")
	keyRequestEffort           = attribute.Key("cctrace.request.effort")
	keyRequestOutputFormat     = attribute.Key("cctrace.request.output_format")
	keyRequestBetas            = attribute.Key("cctrace.request.betas")
	keyRequestPlanMode         = attribute.Key("cctrace.request.plan_mode")
	keyRequestBodyBytes        = attribute.Key("cctrace.request.body_bytes")
	keyRequestParseError       = attribute.Key("cctrace.request.parse_error")
	keyRequestPrompt           = attribute.Key("cctrace.request.prompt")
	keyRequestSynthetic        = attribute.Key("cctrace.request.synthetic")
	keyRequestNewBlocksPrefix  = "cctrace.request.new_blocks."
	keyResponseBlocksPrefix    = "cctrace.response.blocks."
	keyClientRequestID         = attribute.Key("cctrace.client.request_id")
	keyRetryAttempt            = attribute.Key("cctrace.retry.attempt")
	keyUsageCacheCreation5m    = attribute.Key("cctrace.usage.cache_creation.ephemeral_5m.input_tokens")
	keyUsageCacheCreation1h    = attribute.Key("cctrace.usage.cache_creation.ephemeral_1h.input_tokens")
	keyUsageWebSearch          = attribute.Key("cctrace.usage.server_tool_use.web_search_requests")
	keyUsageWebFetch           = attribute.Key("cctrace.usage.server_tool_use.web_fetch_requests")
	keyUsageCodeExecution      = attribute.Key("cctrace.usage.server_tool_use.code_execution_requests")
	keyUsageSpeed              = attribute.Key("cctrace.usage.speed")
	keyUsageInferenceGeo       = attribute.Key("cctrace.usage.inference_geo")
	keyUsageIterations         = attribute.Key("cctrace.usage.iterations")
	keyCountTokensInputTokens  = attribute.Key("cctrace.count_tokens.input_tokens")
	keyUpstreamRequestID       = attribute.Key("cctrace.upstream.request_id")
	keyResponseBodyBytes       = attribute.Key("cctrace.response.body_bytes")
	keyResponseParseError      = attribute.Key("cctrace.response.parse_error")
	keyResponseToolUses        = attribute.Key("cctrace.response.tool_uses")
	keyResponseIncomplete      = attribute.Key("cctrace.response.incomplete")
	keyResponseCanceled        = attribute.Key("cctrace.response.canceled")
	keyResponseTransportError  = attribute.Key("cctrace.response.transport_error")

	// Tool spans.
	keyToolInputBytes  = attribute.Key("cctrace.tool.input_bytes")
	keyToolResultBytes = attribute.Key("cctrace.tool.result_bytes")
	keyToolOutcome     = attribute.Key("cctrace.tool.outcome")

	// Agent tool calls and subagent spans.
	keyAgentSubagentType = attribute.Key("cctrace.agent.subagent_type")
	keyAgentDescription  = attribute.Key("cctrace.agent.description")
	keyAgentBackground   = attribute.Key("cctrace.agent.background")

	// The team of the person a span is attributed to (user.id).
	keyTeam = attribute.Key("cctrace.team")

	// Cost, on chat spans (their answer), turns and subagents (their totals).
	keyCost     = attribute.Key("cctrace.cost_usd")
	keyUnpriced = attribute.Key("cctrace.unpriced_requests")
)

// Attribute values.
var (
	operationChat        = semconv.GenAIOperationNameChat
	operationInvokeAgent = semconv.GenAIOperationNameInvokeAgent
	operationExecuteTool = semconv.GenAIOperationNameExecuteTool
	toolTypeFunction     = semconv.GenAIToolTypeKey.String("function")
)

// providerName is gen_ai.provider.name for each provider, as semantic conventions v1.41 name
// them. Microsoft Foundry has no value of its own: it serves Claude from the same Azure AI
// services resources (*.services.ai.azure.com) as the Azure AI Inference API, which
// azure.ai.inference names; azure.ai.openai is for Azure OpenAI's models only.
func providerName(p wire.Provider) attribute.KeyValue {
	return semconv.GenAIProviderNameKey.String(p.GenAIName())
}

// finishReasons are the gen_ai.response.finish_reasons values of the stop reasons the Messages API
// documents, built once rather than per span (a slice value costs two allocations).
var finishReasons = func() map[string]attribute.Value {
	m := make(map[string]attribute.Value)
	for _, r := range []string{"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded"} {
		m[r] = attribute.StringSliceValue([]string{r})
	}
	return m
}()

// errorTypeOther is error.type when the tracker gave no type (the semconv fallback value).
const errorTypeOther = "_OTHER"

// attrs accumulates attributes, leaving out zero values where "absent" is the truthful answer.
type attrs []attribute.KeyValue

func (a *attrs) add(kv ...attribute.KeyValue) { *a = append(*a, kv...) }

func (a *attrs) str(k attribute.Key, v string) {
	if v != "" {
		*a = append(*a, k.String(v))
	}
}

// positive adds v when it is above zero.
func (a *attrs) positive(k attribute.Key, v int) {
	if v > 0 {
		*a = append(*a, k.Int(v))
	}
}

func (a *attrs) flag(k attribute.Key, v bool) {
	if v {
		*a = append(*a, k.Bool(true))
	}
}

// attributeSet builds span attributes from the tracker's output.
type attributeSet struct {
	capture       bool
	serverAddress string
	serverPort    int
	provider      wire.Provider // of turns and subagents
	// latest names usage as the GenAI conventions' latest experimental version does
	// (WithGenAILatest).
	latest bool
}

// spanAttributes appends the attributes of s for its kind to a.
func (b attributeSet) spanAttributes(a *attrs, s *instrument.Span) {
	a.str(semconv.GenAIConversationIDKey, s.SessionID)
	// The person's name from the directory, or the identity that stands for them: a header
	// value or a credential's fingerprint, never a credential.
	a.str(semconv.UserIDKey, s.User)
	a.str(keyTeam, s.Team)
	switch s.Kind {
	case instrument.KindTurn:
		b.turn(a, s)
	case instrument.KindChat:
		b.chat(a, s)
	case instrument.KindTool:
		b.tool(a, s)
	case instrument.KindSubagent:
		b.subagent(a, s)
	}
	if s.Status == instrument.StatusError {
		errType := s.ErrorType
		if errType == "" {
			errType = errorTypeOther
		}
		a.add(semconv.ErrorTypeKey.String(errType))
	}
}

func (b attributeSet) turn(a *attrs, s *instrument.Span) {
	a.add(operationInvokeAgent, providerName(b.provider))
	a.str(semconv.GenAIAgentNameKey, s.Agent)
	index := s.TurnIndex
	if t := s.Turn; t != nil && index == 0 {
		index = t.Index
	}
	a.positive(keyTurnIndex, index)
	t := s.Turn
	if t == nil {
		return
	}
	totals(a, &turnTotals, &t.Totals, b.latest)
	a.add(keyTurnSubagents.Int(t.Subagents))
	a.str(keyTurnOutcome, string(t.Outcome))
	a.str(keyTurnTrigger, string(t.Trigger))
	a.str(keyTurnStopReason, t.StopReason)
	if len(t.Models) > 0 {
		a.add(keyTurnModels.StringSlice(t.Models))
	}
	a.str(keyCompactionTrigger, t.Compaction)
	a.flag(keyTurnPlanMode, !t.PlanModeEntered.IsZero())
	if b.capture {
		a.str(keyTurnPrompt, t.Prompt)
	}
}

func (b attributeSet) chat(a *attrs, s *instrument.Span) {
	c := s.Chat
	provider := b.provider
	if c != nil {
		provider = c.Request.Provider
	}
	a.add(operationChat, providerName(provider))
	a.str(semconv.ServerAddressKey, b.serverAddress)
	a.positive(semconv.ServerPortKey, b.serverPort)
	if c == nil {
		return
	}
	a.str(keyRequestKind, string(c.Kind))
	a.str(keyRequestSynthetic, string(c.Synthetic))
	a.add(keyRetryAttempt.Int(c.Attempt))
	if c.Priced {
		a.add(keyCost.Float64(c.Cost))
	}
	a.flag(keyConversationCompacted, c.Compacted)
	if cp := c.Compaction; cp != nil {
		a.str(keyCompactionTrigger, cp.Trigger)
		a.add(
			keyCompactionMessagesBefore.Int(cp.MessagesBefore),
			keyCompactionMessagesAfter.Int(cp.MessagesAfter),
		)
		a.positive(keyCompactionContextBefore, cp.ContextBefore)
	}
	a.flag(keyRequestPlanMode, c.PlanMode)
	for k, n := range c.NewBlocks {
		if n > 0 {
			a.add(newBlockKey(k).Int(n))
		}
	}
	for typ, n := range c.ResponseBlocks {
		if n > 0 {
			a.add(responseBlockKey(typ).Int(n))
		}
	}
	if b.capture {
		a.str(keyRequestPrompt, c.Prompt)
	}
	request(a, &c.Request)
	if c.Request.Body != nil {
		// The tracker drops Body.Messages once tracked and keeps their count in Messages.
		messages := c.Messages
		if messages == 0 {
			messages = len(c.Request.Body.Messages)
		}
		a.add(keyRequestMessages.Int(messages))
	}
	if c.Response != nil {
		response(a, &c.Request, c.Response, b.latest)
	}
	chatContext(a, c)
}

// request adds what the proxy and the body decoder saw of the request. Only the headers that
// wire.Headers holds are used; it never holds credentials.
func request(a *attrs, r *wire.Request) {
	a.add(keyRequestEndpoint.String(r.Endpoint.String()))
	a.add(keyRequestBodyBytes.Int64(r.BodySize))
	a.str(keyRequestParseError, r.ParseError)
	a.str(keyClientRequestID, r.Headers.ClientRequestID)
	a.str(semconv.UserAgentOriginalKey, r.Headers.UserAgent)
	if len(r.Headers.Beta) > 0 {
		a.add(keyRequestBetas.StringSlice(r.Headers.Beta))
	}
	body := r.Body
	if body == nil {
		return
	}
	a.str(semconv.GenAIRequestModelKey, body.Model)
	a.positive(semconv.GenAIRequestMaxTokensKey, body.MaxTokens)
	a.add(semconv.GenAIRequestStreamKey.Bool(body.Stream))
	a.add(
		keyRequestSystemBlocks.Int(body.System.Blocks),
		keyRequestSystemBytes.Int(body.System.Bytes),
		keyRequestCacheBreakpoints.Int(body.CacheBreakpoints),
	)
	if body.Tools.Present {
		a.add(
			keyRequestTools.Int(body.Tools.Count),
			keyRequestToolsDeferred.Int(body.Tools.Deferred),
		)
	}
	a.str(keyRequestThinking, body.Thinking)
	a.str(keyRequestEffort, body.Effort)
	a.str(keyRequestOutputFormat, body.OutputFormat)
}

// response adds what the upstream answered to req.
func response(a *attrs, req *wire.Request, r *wire.Response, latest bool) {
	a.positive(semconv.HTTPResponseStatusCodeKey, r.Status)
	a.str(keyUpstreamRequestID, r.RequestID)
	a.add(keyResponseBodyBytes.Int64(r.BodySize))
	a.str(keyResponseParseError, r.ParseError)
	a.flag(keyResponseIncomplete, r.Incomplete)
	a.flag(keyResponseCanceled, r.Canceled)
	a.str(keyResponseTransportError, r.Err)
	rateLimit(a, req, r)
	if !r.FirstChunk.IsZero() && !req.Time.IsZero() {
		a.add(semconv.GenAIResponseTimeToFirstChunkKey.Float64(r.FirstChunk.Sub(req.Time).Seconds()))
	}
	if req.Endpoint == wire.EndpointCountTokens {
		a.positive(keyCountTokensInputTokens, r.InputTokens)
	}
	m := r.Message
	if m == nil {
		return
	}
	a.str(semconv.GenAIResponseIDKey, m.ID)
	a.str(semconv.GenAIResponseModelKey, m.Model)
	if v, ok := finishReasons[m.StopReason]; ok {
		a.add(attribute.KeyValue{Key: semconv.GenAIResponseFinishReasonsKey, Value: v})
	} else if m.StopReason != "" {
		a.add(semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{m.StopReason}))
	}
	usage(a, m.Usage, latest, true)
	a.add(keyResponseToolUses.Int(len(m.ToolUses)))
	// What the answer billed beyond its tokens.
	st := m.Usage.ServerToolUse
	a.positive(keyUsageWebSearch, st.WebSearch)
	a.positive(keyUsageWebFetch, st.WebFetch)
	a.positive(keyUsageCodeExecution, st.CodeExecution)
	a.str(keyUsageSpeed, m.Usage.Speed)
	a.str(keyUsageInferenceGeo, m.Usage.InferenceGeo)
	a.positive(keyUsageIterations, len(m.Iterations))
}

// keyUsageCacheWrite is gen_ai.usage.cache_creation.input_tokens as the GenAI conventions'
// latest experimental version names it (docs/tracing.md).
const keyUsageCacheWrite = attribute.Key("gen_ai.usage.cache_write.input_tokens")

// usage adds token usage. gen_ai.usage.input_tokens counts every input token, cached ones
// included, as the conventions ask; Anthropic's own input_tokens excludes them. With latest,
// cache writes are gen_ai.usage.cache_write.input_tokens, and an agent's span (inference false)
// carries no cache counts, as that version has them only on inference spans.
func usage(a *attrs, u wire.Usage, latest, inference bool) {
	a.add(
		semconv.GenAIUsageInputTokensKey.Int(u.TotalInput()),
		semconv.GenAIUsageOutputTokensKey.Int(u.OutputTokens),
	)
	switch {
	case !latest:
		a.add(
			semconv.GenAIUsageCacheReadInputTokensKey.Int(u.CacheReadInputTokens),
			semconv.GenAIUsageCacheCreationInputTokensKey.Int(u.CacheCreationInputTokens),
		)
	case inference:
		a.add(
			semconv.GenAIUsageCacheReadInputTokensKey.Int(u.CacheReadInputTokens),
			keyUsageCacheWrite.Int(u.CacheCreationInputTokens),
		)
	}
	a.positive(keyUsageCacheCreation5m, u.CacheCreation5m)
	a.positive(keyUsageCacheCreation1h, u.CacheCreation1h)
}

func (b attributeSet) tool(a *attrs, s *instrument.Span) {
	a.add(operationExecuteTool, toolTypeFunction)
	t := s.Tool
	if t == nil {
		return
	}
	a.str(semconv.GenAIToolNameKey, t.Name)
	a.str(semconv.GenAIToolCallIDKey, t.CallID)
	a.str(keyToolOutcome, string(t.Outcome))
	a.positive(keyToolInputBytes, t.InputBytes)
	a.positive(keyToolResultBytes, t.ResultBytes)
	if b.capture {
		a.str(semconv.GenAIToolCallArgumentsKey, t.Input)
		a.str(semconv.GenAIToolCallResultKey, t.Result)
	}
	if ag := t.Agent; ag != nil {
		a.str(keyAgentSubagentType, ag.SubagentType)
		a.add(keyAgentBackground.Bool(ag.RunInBackground))
		if b.capture {
			a.str(keyAgentDescription, ag.Description)
		}
	}
}

func (b attributeSet) subagent(a *attrs, s *instrument.Span) {
	a.add(operationInvokeAgent, providerName(b.provider))
	sa := s.Subagent
	if sa == nil {
		a.str(semconv.GenAIAgentNameKey, s.Agent)
		return
	}
	name := sa.Type
	if name == "" {
		name = s.Agent
	}
	a.str(semconv.GenAIAgentNameKey, name)
	a.str(semconv.GenAIAgentIDKey, sa.AgentID)
	a.add(keyAgentBackground.Bool(sa.Background))
	totals(a, &subagentTotals, &sa.Totals, b.latest)
}

// totalsKeys name the counts of a turn's or a subagent's totals.
type totalsKeys struct{ requests, retries, toolCalls, toolErrors attribute.Key }

var (
	turnTotals = totalsKeys{"cctrace.turn.requests", "cctrace.turn.retries", "cctrace.turn.tool_calls",
		"cctrace.turn.tool_errors"}
	subagentTotals = totalsKeys{"cctrace.subagent.requests", "cctrace.subagent.retries",
		"cctrace.subagent.tool_calls", "cctrace.subagent.tool_errors"}
)

// totals adds a turn's or a subagent's totals: its counts, usage and estimated cost, and how
// many of its requests with usage could not be priced.
func totals(a *attrs, k *totalsKeys, t *instrument.Totals, latest bool) {
	a.add(
		k.requests.Int(t.Requests),
		k.retries.Int(t.Retries),
		k.toolCalls.Int(t.ToolCalls),
		k.toolErrors.Int(t.ToolErrors),
		keyCost.Float64(t.Cost),
	)
	a.positive(keyUnpriced, t.Unpriced)
	usage(a, t.Usage, latest, false)
}

// attrsPool recycles the memory SpanEnded builds attributes in: the SDK copies the attributes
// it is given, so the same memory serves span after span. What a slice still holds of its last
// span (strings, slice values) is not cleared: clearing costs more than the little it keeps
// alive until reused, or until the pool drops it at a garbage collection.
var attrsPool = sync.Pool{New: func() any {
	a := make(attrs, 0, 64)
	return &a
}}

// blockTypes are the block types wire decodes (it reports anything else as "other").
var blockTypes = []wire.BlockType{
	wire.BlockText, wire.BlockToolUse, wire.BlockToolResult, wire.BlockThinking,
	wire.BlockRedactedThinking, wire.BlockImage, wire.BlockDocument, wire.BlockOther,
}

// newBlockKeys are the cctrace.request.new_blocks.<role>.<type> keys of the roles and block types
// that wire decodes, built once rather than per span.
var newBlockKeys = func() map[instrument.BlockKey]attribute.Key {
	roles := []wire.Role{wire.RoleUser, wire.RoleAssistant, wire.RoleSystem, wire.RoleOther}
	m := make(map[instrument.BlockKey]attribute.Key, len(roles)*len(blockTypes))
	for _, r := range roles {
		for _, t := range blockTypes {
			m[instrument.BlockKey{Role: r, Type: t}] = attribute.Key(keyRequestNewBlocksPrefix + string(r) + "." + string(t))
		}
	}
	return m
}()

// responseBlockKeys are the cctrace.response.blocks.<type> keys of the block types wire decodes.
var responseBlockKeys = func() map[wire.BlockType]attribute.Key {
	m := make(map[wire.BlockType]attribute.Key, len(blockTypes))
	for _, t := range blockTypes {
		m[t] = attribute.Key(keyResponseBlocksPrefix + string(t))
	}
	return m
}()

// responseBlockKey is the attribute key that counts an answer's blocks of type typ.
func responseBlockKey(typ wire.BlockType) attribute.Key {
	if key, ok := responseBlockKeys[typ]; ok {
		return key
	}
	return attribute.Key(keyResponseBlocksPrefix + string(typ))
}

// newBlockKey is the attribute key that counts k's blocks.
func newBlockKey(k instrument.BlockKey) attribute.Key {
	if key, ok := newBlockKeys[k]; ok {
		return key
	}
	return attribute.Key(keyRequestNewBlocksPrefix + string(k.Role) + "." + string(k.Type))
}
