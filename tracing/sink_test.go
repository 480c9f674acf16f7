package tracing

import (
	"context"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

func TestMain(m *testing.M) {
	// The environment of whoever runs the tests must not reach a collector or rename the service.
	for _, name := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	} {
		os.Unsetenv(name)
	}
	goleak.VerifyTestMain(m)
}

var (
	t0        = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	turnTrace = instrument.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	otherLink = instrument.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
)

func sid(b byte) instrument.SpanID { return instrument.SpanID{0, 0, 0, 0, 0, 0, 0x10, b} }

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// step is one call the tracker makes on a sink. finish, when set, completes the span's fields
// just before SpanEnded, as the tracker does with the same pointer.
type step struct {
	started bool
	span    *instrument.Span
	finish  func(*instrument.Span)
}

func run(sink instrument.Sink, steps []step) {
	for _, st := range steps {
		if st.started {
			sink.SpanStarted(st.span)
			continue
		}
		if st.finish != nil {
			st.finish(st.span)
		}
		sink.SpanEnded(st.span)
	}
}

func messagesRequest(model string, messages int) wire.Request {
	return wire.Request{
		ExchangeID: 1,
		Time:       at(10),
		Method:     "POST",
		Path:       "/v1/messages",
		Endpoint:   wire.EndpointMessages,
		Headers: wire.Headers{
			SessionID:       "5f0c1e9a-session",
			ClientRequestID: "client-req-1",
			UserAgent:       "claude-cli/2.1.328 (external, cli)",
			Beta:            []string{"claude-code-20250219", "interleaved-thinking-2025-05-14"},
		},
		BodySize: 48213,
		Body: &wire.Body{
			Model:     model,
			MaxTokens: 32000,
			Stream:    true,
			Thinking:  "adaptive",
			Effort:    "high",
			System:    wire.SystemInfo{Blocks: 3, Bytes: 15000},
			Tools:     wire.ToolsInfo{Present: true, Count: 18, Deferred: 4},
			Messages:  make([]wire.Message, messages),

			CacheBreakpoints: 4,
		},
	}
}

// turnSteps is one turn: a chat that calls the Agent tool, the subagent with its own chat, an
// overloaded chat, its successful retry, and the turn's end.
func turnSteps() []step {
	root := &instrument.Span{
		TraceID: turnTrace, ID: sid(1), Kind: instrument.KindTurn, Name: "invoke_agent claude-code",
		Start: at(0), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "claude-code",
		Link: &instrument.LinkedSpan{TraceID: otherLink, SpanID: sid(0xee), Sampled: true},
		Turn: &instrument.Turn{Index: 3, Prompt: "fix the flaky test"},
	}
	chat1 := &instrument.Span{
		TraceID: turnTrace, ID: sid(2), Parent: sid(1), Kind: instrument.KindChat, Name: "chat claude-opus-4-6",
		Start: at(10), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "claude-code",
		Chat: &instrument.Chat{
			Kind: instrument.RequestTurn, Request: messagesRequest("claude-opus-4-6", 0), Messages: 7, PlanMode: true,
			Compacted: true, Prompt: "fix the flaky test",
			NewBlocks:      map[instrument.BlockKey]int{{Role: wire.RoleUser, Type: wire.BlockText}: 2},
			ResponseBlocks: map[wire.BlockType]int{wire.BlockText: 1, wire.BlockToolUse: 1},
		},
	}
	tool := &instrument.Span{
		TraceID: turnTrace, ID: sid(3), Parent: sid(1), Kind: instrument.KindTool, Name: "execute_tool Agent",
		Start: at(900), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "claude-code",
		Tool: &instrument.Tool{
			Name: "Agent", CallID: "toolu_01", InputBytes: 412,
			Input: `{"description":"find tests"}`,
			Agent: &wire.AgentCall{Description: "find tests", SubagentType: "Explore"},
		},
	}
	sub := &instrument.Span{
		TraceID: turnTrace, ID: sid(4), Parent: sid(3), Kind: instrument.KindSubagent, Name: "invoke_agent general-purpose",
		Start: at(950), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "Explore",
		Subagent: &instrument.Subagent{Type: "Explore", AgentID: "a1b2c3"},
	}
	subReq := messagesRequest("claude-haiku-4-5", 1)
	subReq.Time = at(950)
	subReq.Headers.AgentID = "a1b2c3"
	subChat := &instrument.Span{
		TraceID: turnTrace, ID: sid(5), Parent: sid(4), Kind: instrument.KindChat, Name: "chat claude-haiku-4-5",
		Start: at(950), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "Explore",
		Chat: &instrument.Chat{Kind: instrument.RequestSubagent, Request: subReq},
	}
	errReq := messagesRequest("claude-opus-4-6", 9)
	errReq.Time = at(3000)
	errChat := &instrument.Span{
		TraceID: turnTrace, ID: sid(6), Parent: sid(1), Kind: instrument.KindChat, Name: "chat claude-opus-4-6",
		Start: at(3000), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "claude-code",
		Chat: &instrument.Chat{Kind: instrument.RequestToolResults, Request: errReq},
	}
	retryReq := messagesRequest("claude-opus-4-6", 9)
	retryReq.Time = at(3500)
	retryReq.Headers.RetryCount = 1
	retry := &instrument.Span{
		TraceID: turnTrace, ID: sid(7), Parent: sid(1), Kind: instrument.KindChat, Name: "chat claude-opus-4-6",
		Start: at(3500), SessionID: "5f0c1e9a-session", TurnIndex: 3, Agent: "claude-code",
		Chat: &instrument.Chat{Kind: instrument.RequestToolResults, Request: retryReq, Attempt: 1},
	}

	return []step{
		{started: true, span: root},
		{started: true, span: chat1},
		{span: chat1, finish: func(s *instrument.Span) {
			s.End, s.Status = at(900), instrument.StatusOK
			s.Chat.Response = &wire.Response{
				ExchangeID: 1, Status: 200, HeaderTime: at(300), FirstChunk: at(760), End: at(900),
				RequestID: "req_011", ContentType: "text/event-stream", Streamed: true, BodySize: 5120,
				Message: &wire.MessageInfo{
					ID: "msg_01", Model: "claude-opus-4-6", StopReason: "tool_use",
					Usage: wire.Usage{
						InputTokens: 6, OutputTokens: 120, CacheReadInputTokens: 30000,
						CacheCreationInputTokens: 1500, CacheCreation1h: 1500,
					},
					ToolUses: []wire.ToolUse{{ID: "toolu_01", Name: "Agent", End: at(900)}},
				},
			}
		}},
		{started: true, span: tool},
		{started: true, span: sub},
		{started: true, span: subChat},
		{span: subChat, finish: func(s *instrument.Span) {
			s.End, s.Status = at(2000), instrument.StatusOK
			s.Chat.Response = &wire.Response{
				Status: 200, FirstChunk: at(1200), End: at(2000), RequestID: "req_012",
				Message: &wire.MessageInfo{ID: "msg_02", Model: "claude-haiku-4-5", StopReason: "end_turn",
					Usage: wire.Usage{InputTokens: 900, OutputTokens: 300}},
			}
		}},
		{span: sub, finish: func(s *instrument.Span) {
			s.End, s.Status, s.Name = at(2000), instrument.StatusOK, "invoke_agent Explore"
			s.Subagent.Requests, s.Subagent.Usage = 1, wire.Usage{InputTokens: 900, OutputTokens: 300}
		}},
		{span: tool, finish: func(s *instrument.Span) {
			s.End, s.Status = at(2950), instrument.StatusOK
			s.Tool.Outcome, s.Tool.ResultBytes, s.Tool.Result = "success", 2048, "agentId: a1b2c3"
		}},
		{started: true, span: errChat},
		{span: errChat, finish: func(s *instrument.Span) {
			s.End = at(3200)
			s.Status, s.ErrorType, s.StatusMessage = instrument.StatusError, "overloaded_error", "Overloaded"
			s.Chat.Response = &wire.Response{
				Status: 529, End: at(3200), RequestID: "req_013", ErrorType: "overloaded_error",
				ErrorMessage: "Overloaded", ParseError: "",
			}
		}},
		{started: true, span: retry},
		{span: retry, finish: func(s *instrument.Span) {
			s.End, s.Status = at(6000), instrument.StatusOK
			s.Chat.Response = &wire.Response{
				Status: 200, FirstChunk: at(4000), End: at(6000),
				Message: &wire.MessageInfo{ID: "msg_03", Model: "claude-opus-4-6", StopReason: "end_turn",
					Usage: wire.Usage{InputTokens: 10, OutputTokens: 50}},
			}
		}},
		{span: root, finish: func(s *instrument.Span) {
			s.End, s.Status = at(6000), instrument.StatusOK
			s.Turn.Outcome, s.Turn.StopReason, s.Turn.Trigger = "end_turn", "end_turn", "prompt"
			s.Turn.Requests, s.Turn.Retries, s.Turn.ToolCalls, s.Turn.Subagents = 4, 1, 1, 1
			s.Turn.Usage = wire.Usage{InputTokens: 916, OutputTokens: 470, CacheReadInputTokens: 30000, CacheCreationInputTokens: 1500}
			s.Turn.Models = []string{"claude-opus-4-6", "claude-haiku-4-5"}
			s.Turn.PlanModeEntered = at(10)
		}},
	}
}

func record(t *testing.T, steps []step, opts ...Option) map[instrument.SpanID]sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	sink, err := New(append([]Option{WithSpanProcessor(rec)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	run(sink, steps)
	if err := sink.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := len(rec.Started()) - len(rec.Ended()); n != 0 {
		t.Errorf("%d spans started but never ended", n)
	}
	ended := make(map[instrument.SpanID]sdktrace.ReadOnlySpan)
	for _, s := range rec.Ended() {
		id := instrument.SpanID(s.SpanContext().SpanID())
		if _, dup := ended[id]; dup {
			t.Errorf("span %s ended twice", id)
		}
		ended[id] = s
	}
	return ended
}

func attrMap(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSinkSpans(t *testing.T) {
	got := record(t, turnSteps(), WithServer("api.anthropic.com", 443))
	if len(got) != 7 {
		t.Fatalf("recorded %d spans, want 7", len(got))
	}

	tests := []struct {
		name       string
		id         instrument.SpanID
		parent     instrument.SpanID
		spanName   string
		kind       trace.SpanKind
		start, end time.Time
		status     sdktrace.Status
		attrs      map[attribute.Key]attribute.Value
		absent     []attribute.Key
		link       *instrument.LinkedSpan
		events     []string
	}{
		{
			name: "turn root", id: sid(1), spanName: "invoke_agent claude-code", kind: trace.SpanKindInternal,
			start: at(0), end: at(6000), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"gen_ai.operation.name":                    attribute.StringValue("invoke_agent"),
				"gen_ai.provider.name":                     attribute.StringValue("anthropic"),
				"gen_ai.agent.name":                        attribute.StringValue("claude-code"),
				"gen_ai.conversation.id":                   attribute.StringValue("5f0c1e9a-session"),
				"cctrace.turn.index":                       attribute.IntValue(3),
				"gen_ai.usage.input_tokens":                attribute.IntValue(916 + 30000 + 1500),
				"gen_ai.usage.output_tokens":               attribute.IntValue(470),
				"gen_ai.usage.cache_read.input_tokens":     attribute.IntValue(30000),
				"gen_ai.usage.cache_creation.input_tokens": attribute.IntValue(1500),
				"cctrace.turn.requests":                    attribute.IntValue(4),
				"cctrace.turn.retries":                     attribute.IntValue(1),
				"cctrace.turn.tool_calls":                  attribute.IntValue(1),
				"cctrace.turn.tool_errors":                 attribute.IntValue(0),
				"cctrace.turn.subagents":                   attribute.IntValue(1),
				"cctrace.turn.outcome":                     attribute.StringValue("end_turn"),
				"cctrace.turn.trigger":                     attribute.StringValue("prompt"),
				"cctrace.turn.stop_reason":                 attribute.StringValue("end_turn"),
				"cctrace.turn.models":                      attribute.StringSliceValue([]string{"claude-opus-4-6", "claude-haiku-4-5"}),
				"cctrace.turn.plan_mode":                   attribute.BoolValue(true),
			},
			absent: []attribute.Key{"cctrace.turn.prompt", "cctrace.compaction.trigger", "error.type", "server.address"},
			link:   &instrument.LinkedSpan{TraceID: otherLink, SpanID: sid(0xee), Sampled: true},
			events: []string{"cctrace.plan_mode.entered"},
		},
		{
			name: "chat that calls a tool", id: sid(2), parent: sid(1), spanName: "chat claude-opus-4-6",
			kind: trace.SpanKindClient, start: at(10), end: at(900), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"gen_ai.operation.name":                                  attribute.StringValue("chat"),
				"gen_ai.provider.name":                                   attribute.StringValue("anthropic"),
				"gen_ai.conversation.id":                                 attribute.StringValue("5f0c1e9a-session"),
				"gen_ai.request.model":                                   attribute.StringValue("claude-opus-4-6"),
				"gen_ai.response.model":                                  attribute.StringValue("claude-opus-4-6"),
				"gen_ai.response.id":                                     attribute.StringValue("msg_01"),
				"gen_ai.response.finish_reasons":                         attribute.StringSliceValue([]string{"tool_use"}),
				"gen_ai.request.max_tokens":                              attribute.IntValue(32000),
				"gen_ai.request.stream":                                  attribute.BoolValue(true),
				"gen_ai.usage.input_tokens":                              attribute.IntValue(6 + 30000 + 1500),
				"gen_ai.usage.output_tokens":                             attribute.IntValue(120),
				"gen_ai.usage.cache_read.input_tokens":                   attribute.IntValue(30000),
				"gen_ai.usage.cache_creation.input_tokens":               attribute.IntValue(1500),
				"gen_ai.response.time_to_first_chunk":                    attribute.Float64Value(0.75),
				"gen_ai.conversation.compacted":                          attribute.BoolValue(true),
				"cctrace.usage.cache_creation.ephemeral_1h.input_tokens": attribute.IntValue(1500),
				"http.response.status_code":                              attribute.IntValue(200),
				"server.address":                                         attribute.StringValue("api.anthropic.com"),
				"server.port":                                            attribute.IntValue(443),
				"cctrace.upstream.request_id":                            attribute.StringValue("req_011"),
				"cctrace.request.kind":                                   attribute.StringValue("turn"),
				"cctrace.request.endpoint":                               attribute.StringValue("messages"),
				"cctrace.request.messages":                               attribute.IntValue(7),
				"cctrace.retry.attempt":                                  attribute.IntValue(0),
				"cctrace.request.system.blocks":                          attribute.IntValue(3),
				"cctrace.request.system.bytes":                           attribute.IntValue(15000),
				"cctrace.request.tools":                                  attribute.IntValue(18),
				"cctrace.request.tools.deferred":                         attribute.IntValue(4),
				"cctrace.request.cache_breakpoints":                      attribute.IntValue(4),
				"cctrace.request.thinking":                               attribute.StringValue("adaptive"),
				"cctrace.request.effort":                                 attribute.StringValue("high"),
				"cctrace.request.betas":                                  attribute.StringSliceValue([]string{"claude-code-20250219", "interleaved-thinking-2025-05-14"}),
				"cctrace.request.plan_mode":                              attribute.BoolValue(true),
				"cctrace.request.body_bytes":                             attribute.Int64Value(48213),
				"cctrace.response.body_bytes":                            attribute.Int64Value(5120),
				"cctrace.response.tool_uses":                             attribute.IntValue(1),
				"cctrace.request.new_blocks.user.text":                   attribute.IntValue(2),
				"cctrace.response.blocks.text":                           attribute.IntValue(1),
				"cctrace.response.blocks.tool_use":                       attribute.IntValue(1),
				"cctrace.client.request_id":                              attribute.StringValue("client-req-1"),
				"user_agent.original":                                    attribute.StringValue("claude-cli/2.1.328 (external, cli)"),
			},
			absent: []attribute.Key{
				"cctrace.request.prompt", "error.type", "cctrace.request.parse_error",
				"cctrace.response.parse_error", "cctrace.usage.cache_creation.ephemeral_5m.input_tokens",
			},
		},
		{
			name: "Agent tool call", id: sid(3), parent: sid(1), spanName: "execute_tool Agent",
			kind: trace.SpanKindInternal, start: at(900), end: at(2950), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"gen_ai.operation.name":       attribute.StringValue("execute_tool"),
				"gen_ai.tool.name":            attribute.StringValue("Agent"),
				"gen_ai.tool.call.id":         attribute.StringValue("toolu_01"),
				"gen_ai.tool.type":            attribute.StringValue("function"),
				"cctrace.tool.input_bytes":    attribute.IntValue(412),
				"cctrace.tool.result_bytes":   attribute.IntValue(2048),
				"cctrace.tool.outcome":        attribute.StringValue("success"),
				"cctrace.agent.subagent_type": attribute.StringValue("Explore"),
				"cctrace.agent.background":    attribute.BoolValue(false),
			},
			absent: []attribute.Key{"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "cctrace.agent.description"},
		},
		{
			name: "subagent", id: sid(4), parent: sid(3), spanName: "invoke_agent Explore",
			kind: trace.SpanKindInternal, start: at(950), end: at(2000), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"gen_ai.operation.name":      attribute.StringValue("invoke_agent"),
				"gen_ai.agent.name":          attribute.StringValue("Explore"),
				"gen_ai.agent.id":            attribute.StringValue("a1b2c3"),
				"cctrace.subagent.requests":  attribute.IntValue(1),
				"gen_ai.usage.input_tokens":  attribute.IntValue(900),
				"gen_ai.usage.output_tokens": attribute.IntValue(300),
			},
		},
		{
			name: "subagent's chat", id: sid(5), parent: sid(4), spanName: "chat claude-haiku-4-5",
			kind: trace.SpanKindClient, start: at(950), end: at(2000), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"cctrace.request.kind":                attribute.StringValue("subagent"),
				"gen_ai.request.model":                attribute.StringValue("claude-haiku-4-5"),
				"gen_ai.response.time_to_first_chunk": attribute.Float64Value(0.25),
				"gen_ai.response.finish_reasons":      attribute.StringSliceValue([]string{"end_turn"}),
			},
			absent: []attribute.Key{"gen_ai.conversation.compacted", "cctrace.request.plan_mode"},
		},
		{
			name: "overloaded chat", id: sid(6), parent: sid(1), spanName: "chat claude-opus-4-6",
			kind: trace.SpanKindClient, start: at(3000), end: at(3200),
			status: sdktrace.Status{Code: codes.Error, Description: "Overloaded"},
			attrs: map[attribute.Key]attribute.Value{
				"error.type":                  attribute.StringValue("overloaded_error"),
				"http.response.status_code":   attribute.IntValue(529),
				"cctrace.upstream.request_id": attribute.StringValue("req_013"),
				"cctrace.request.kind":        attribute.StringValue("tool_results"),
			},
			absent: []attribute.Key{"gen_ai.response.id", "gen_ai.usage.input_tokens", "gen_ai.response.time_to_first_chunk"},
		},
		{
			name: "retry", id: sid(7), parent: sid(1), spanName: "chat claude-opus-4-6",
			kind: trace.SpanKindClient, start: at(3500), end: at(6000), status: sdktrace.Status{Code: codes.Ok},
			attrs: map[attribute.Key]attribute.Value{
				"cctrace.retry.attempt":     attribute.IntValue(1),
				"cctrace.request.messages":  attribute.IntValue(9),
				"gen_ai.usage.input_tokens": attribute.IntValue(10),
			},
			absent: []attribute.Key{"error.type"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := got[tt.id]
			if !ok {
				t.Fatalf("no span with id %s", tt.id)
			}
			if tid := instrument.TraceID(s.SpanContext().TraceID()); tid != turnTrace {
				t.Errorf("trace id = %s, want %s", tid, turnTrace)
			}
			if p := instrument.SpanID(s.Parent().SpanID()); p != tt.parent {
				t.Errorf("parent = %s, want %s", p, tt.parent)
			}
			if tt.parent.IsValid() && instrument.TraceID(s.Parent().TraceID()) != turnTrace {
				t.Errorf("parent trace id = %s, want %s", s.Parent().TraceID(), turnTrace)
			}
			if !s.SpanContext().IsSampled() {
				t.Error("span is not sampled")
			}
			if s.Name() != tt.spanName {
				t.Errorf("name = %q, want %q", s.Name(), tt.spanName)
			}
			if s.SpanKind() != tt.kind {
				t.Errorf("kind = %v, want %v", s.SpanKind(), tt.kind)
			}
			if !s.StartTime().Equal(tt.start) || !s.EndTime().Equal(tt.end) {
				t.Errorf("times = %v..%v, want %v..%v", s.StartTime(), s.EndTime(), tt.start, tt.end)
			}
			if s.Status() != tt.status {
				t.Errorf("status = %+v, want %+v", s.Status(), tt.status)
			}
			attrs := attrMap(s)
			for k, want := range tt.attrs {
				v, ok := attrs[k]
				if !ok {
					t.Errorf("attribute %s missing", k)
				} else if v.Type() != want.Type() || v.String() != want.String() {
					t.Errorf("attribute %s = %s (%s), want %s (%s)", k, v, v.Type(), want, want.Type())
				}
			}
			for _, k := range tt.absent {
				if v, ok := attrs[k]; ok {
					t.Errorf("attribute %s = %s, want none", k, v)
				}
			}
			if s.DroppedAttributes() != 0 {
				t.Errorf("%d attributes dropped", s.DroppedAttributes())
			}
			var links []instrument.LinkedSpan
			for _, l := range s.Links() {
				links = append(links, instrument.LinkedSpan{
					TraceID: instrument.TraceID(l.SpanContext.TraceID()),
					SpanID:  instrument.SpanID(l.SpanContext.SpanID()),
					Sampled: l.SpanContext.IsSampled(),
				})
			}
			switch {
			case tt.link == nil && len(links) != 0:
				t.Errorf("links = %v, want none", links)
			case tt.link != nil && (len(links) != 1 || links[0] != *tt.link):
				t.Errorf("links = %v, want [%v]", links, *tt.link)
			}
			var events []string
			for _, e := range s.Events() {
				events = append(events, e.Name)
			}
			if len(events) != len(tt.events) || (len(events) > 0 && events[0] != tt.events[0]) {
				t.Errorf("events = %v, want %v", events, tt.events)
			}
		})
	}
}

// TestSinkClientParent checks spans that joined the client's trace: they keep the client's
// trace id and run under the client's span, a remote parent, with no link; the tracker's own
// spans under them are local children as ever.
func TestSinkClientParent(t *testing.T) {
	client := instrument.SpanID{0xcc, 0, 0, 0, 0, 0, 0, 1}
	root := &instrument.Span{
		TraceID: otherLink, ID: sid(1), Parent: client, ClientParent: true, Kind: instrument.KindTurn,
		Name: "invoke_agent claude-code", Start: at(0), SessionID: "5f0c1e9a-session", Turn: &instrument.Turn{Index: 1},
	}
	chat := &instrument.Span{
		TraceID: otherLink, ID: sid(2), Parent: client, ClientParent: true, Kind: instrument.KindChat,
		Name: "chat claude-opus-4-6", Start: at(10), SessionID: "5f0c1e9a-session",
		Chat: &instrument.Chat{Kind: instrument.RequestTurn, Request: messagesRequest("claude-opus-4-6", 1)},
	}
	tool := &instrument.Span{
		TraceID: otherLink, ID: sid(3), Parent: sid(1), Kind: instrument.KindTool, Name: "execute_tool Bash",
		Start: at(20), SessionID: "5f0c1e9a-session", Tool: &instrument.Tool{Name: "Bash"},
	}
	end := func(ms int) func(*instrument.Span) { return func(s *instrument.Span) { s.End = at(ms) } }
	got := record(t, []step{
		{started: true, span: root}, {started: true, span: chat}, {span: chat, finish: end(15)},
		{started: true, span: tool}, {span: tool, finish: end(30)}, {span: root, finish: end(40)},
	})
	for _, tt := range []struct {
		id     instrument.SpanID
		parent instrument.SpanID
		remote bool
	}{{sid(1), client, true}, {sid(2), client, true}, {sid(3), sid(1), false}} {
		s := got[tt.id]
		if s == nil {
			t.Fatalf("span %s not recorded", tt.id)
		}
		p := s.Parent()
		if instrument.TraceID(s.SpanContext().TraceID()) != otherLink || instrument.SpanID(p.SpanID()) != tt.parent || p.IsRemote() != tt.remote {
			t.Errorf("%s: trace %s parent %s remote %v, want trace %s parent %s remote %v",
				s.Name(), s.SpanContext().TraceID(), p.SpanID(), p.IsRemote(), otherLink, tt.parent, tt.remote)
		}
		if len(s.Links()) != 0 {
			t.Errorf("%s: links %v, want none", s.Name(), s.Links())
		}
	}
}

// TestSinkContentCapture checks that previews reach spans only when capture is on.
func TestSinkContentCapture(t *testing.T) {
	previews := map[instrument.SpanID][]attribute.Key{
		sid(1): {"cctrace.turn.prompt"},
		sid(2): {"cctrace.request.prompt"},
		sid(3): {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "cctrace.agent.description"},
	}
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[capture], func(t *testing.T) {
			got := record(t, turnSteps(), WithContentCapture(capture))
			for id, keys := range previews {
				if got[id] == nil {
					t.Fatalf("no span with id %s", id)
				}
				attrs := attrMap(got[id])
				for _, k := range keys {
					if _, ok := attrs[k]; ok != capture {
						t.Errorf("span %s: attribute %s present = %v, want %v", got[id].Name(), k, ok, capture)
					}
				}
			}
		})
	}
}

func TestSinkLifecycle(t *testing.T) {
	orphanEnd := &instrument.Span{
		TraceID: turnTrace, ID: sid(9), Parent: sid(1), Kind: instrument.KindTool, Name: "execute_tool Bash",
		Start: at(100), End: at(200), Status: instrument.StatusError, ErrorType: "interrupted",
		Tool: &instrument.Tool{Name: "Bash", CallID: "toolu_09", Outcome: "interrupted"},
	}
	neverEnded := &instrument.Span{
		TraceID: turnTrace, ID: sid(8), Kind: instrument.KindTurn, Name: "invoke_agent claude-code",
		Start: at(0), Agent: "claude-code", SessionID: "s", TurnIndex: 3,
	}
	noIDs := &instrument.Span{Kind: instrument.KindChat, Start: at(0), End: at(5)}
	compactTurn := &instrument.Span{
		TraceID: turnTrace, ID: sid(1), Kind: instrument.KindTurn, Name: "invoke_agent claude-code",
		Start: at(0), End: at(50), Agent: "claude-code",
		Turn: &instrument.Turn{Index: 4, Outcome: "compaction", Compaction: "manual"},
	}
	compactedReq := messagesRequest("claude-opus-4-6", 3)
	compacted := &instrument.Span{
		TraceID: turnTrace, ID: sid(2), Parent: sid(1), Kind: instrument.KindChat, Start: at(10), End: at(50),
		Chat: &instrument.Chat{
			Kind: instrument.RequestTurn, Request: compactedReq, Compacted: true,
			Compaction: &instrument.Compaction{Trigger: "manual", MessagesBefore: 212, MessagesAfter: 3, ContextBefore: 150000},
			Response:   &wire.Response{Status: 200, ParseError: "unexpected end of JSON input", Incomplete: true},
		},
	}
	unparsed := &instrument.Span{
		TraceID: turnTrace, ID: sid(3), Kind: instrument.KindChat, Start: at(10), End: at(50),
		Chat: &instrument.Chat{Kind: instrument.RequestOther, Request: wire.Request{
			Endpoint: wire.EndpointCountTokens, BodySize: 9, ParseError: "invalid character 'x'",
		}, Response: &wire.Response{Status: 200, InputTokens: 1234}},
	}
	tests := []struct {
		name    string
		steps   []step
		check   func(t *testing.T, got map[instrument.SpanID]sdktrace.ReadOnlySpan)
		wantLen int
	}{
		{
			name:    "ended without start is created and ended at once",
			steps:   []step{{span: orphanEnd}},
			wantLen: 1,
			check: func(t *testing.T, got map[instrument.SpanID]sdktrace.ReadOnlySpan) {
				s := got[sid(9)]
				if s == nil {
					t.Fatal("span missing")
				}
				if !s.StartTime().Equal(at(100)) || !s.EndTime().Equal(at(200)) {
					t.Errorf("times = %v..%v", s.StartTime(), s.EndTime())
				}
				if instrument.SpanID(s.Parent().SpanID()) != sid(1) {
					t.Errorf("parent = %s", s.Parent().SpanID())
				}
				if s.Status().Code != codes.Error || attrMap(s)["error.type"].AsString() != "interrupted" {
					t.Errorf("status = %+v, error.type = %q", s.Status(), attrMap(s)["error.type"].AsString())
				}
			},
		},
		{
			name:    "open spans end at shutdown",
			steps:   []step{{started: true, span: neverEnded}},
			wantLen: 1,
			check: func(t *testing.T, got map[instrument.SpanID]sdktrace.ReadOnlySpan) {
				s := got[sid(8)]
				if s == nil {
					t.Fatal("span missing")
				}
				if s.Status().Code != codes.Unset {
					t.Errorf("status = %+v, want unset", s.Status())
				}
				// What the start's fields alone give: the tracker ends every span it started
				// when it closes, so this is a fallback.
				if got, want := attrSet(s.Attributes()), attrSet([]attribute.KeyValue{
					semconv.GenAIConversationID("s"),
					semconv.GenAIOperationNameInvokeAgent,
					semconv.GenAIProviderNameAnthropic,
				}); got != want {
					t.Errorf("attributes %s, want %s", got, want)
				}
				if !s.StartTime().Equal(at(0)) || s.Name() != "invoke_agent claude-code" || s.SpanKind() != trace.SpanKindInternal {
					t.Errorf("start %v, name %q, kind %v", s.StartTime(), s.Name(), s.SpanKind())
				}
			},
		},
		{
			// A request outside any session comes without ids: it belongs to no trace.
			name:    "no trace id, no span",
			steps:   []step{{started: true, span: noIDs}, {span: noIDs}},
			wantLen: 0,
			check:   func(*testing.T, map[instrument.SpanID]sdktrace.ReadOnlySpan) {},
		},
		{
			name:    "compaction",
			steps:   []step{{span: compactTurn}, {span: compacted}, {span: unparsed}},
			wantLen: 3,
			check: func(t *testing.T, got map[instrument.SpanID]sdktrace.ReadOnlySpan) {
				want := map[instrument.SpanID]map[attribute.Key]attribute.Value{
					sid(1): {
						"cctrace.compaction.trigger": attribute.StringValue("manual"),
						"cctrace.turn.outcome":       attribute.StringValue("compaction"),
						"cctrace.turn.index":         attribute.IntValue(4),
					},
					sid(2): {
						"gen_ai.conversation.compacted":      attribute.BoolValue(true),
						"cctrace.compaction.trigger":         attribute.StringValue("manual"),
						"cctrace.compaction.messages_before": attribute.IntValue(212),
						"cctrace.compaction.messages_after":  attribute.IntValue(3),
						"cctrace.compaction.context_before":  attribute.IntValue(150000),
						"cctrace.response.parse_error":       attribute.StringValue("unexpected end of JSON input"),
						"cctrace.response.incomplete":        attribute.BoolValue(true),
						"cctrace.request.messages":           attribute.IntValue(3),
					},
					sid(3): {
						"cctrace.request.endpoint":          attribute.StringValue("count_tokens"),
						"cctrace.request.parse_error":       attribute.StringValue("invalid character 'x'"),
						"cctrace.count_tokens.input_tokens": attribute.IntValue(1234),
						"cctrace.request.kind":              attribute.StringValue("other"),
					},
				}
				for id, attrs := range want {
					s := got[id]
					if s == nil {
						t.Fatalf("span %s missing", id)
					}
					have := attrMap(s)
					for k, v := range attrs {
						if have[k].Type() != v.Type() || have[k].String() != v.String() {
							t.Errorf("span %s: %s = %s, want %s", id, k, have[k], v)
						}
					}
				}
				if _, ok := attrMap(got[sid(3)])["gen_ai.request.model"]; ok {
					t.Error("gen_ai.request.model set without a decoded body")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := record(t, tt.steps)
			if len(got) != tt.wantLen {
				t.Fatalf("recorded %d spans, want %d", len(got), tt.wantLen)
			}
			tt.check(t, got)
		})
	}
}

// TestTurnSpansLeaveWithTheirRoot: a turn's spans reach the exporter when the turn ends, so that
// no exported span ever waits for a parent that a dying replica never sends; a span that ends
// after its turn (a background subagent's) goes at once, and Shutdown lets go of what is held.
func TestTurnSpansLeaveWithTheirRoot(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	s, err := New(WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	span := func(trace byte, id, parent byte, kind instrument.SpanKind, at int) *instrument.Span {
		sp := &instrument.Span{TraceID: instrument.TraceID{trace}, ID: instrument.SpanID{id}, Kind: kind,
			Name: "s", SessionID: "sess", Start: t0.Add(time.Duration(at) * time.Second)}
		if parent != 0 {
			sp.Parent = instrument.SpanID{parent}
		}
		switch kind {
		case instrument.KindTurn:
			sp.Turn = &instrument.Turn{Index: 1}
		case instrument.KindChat:
			sp.Chat = &instrument.Chat{Kind: instrument.RequestTurn}
		case instrument.KindSubagent:
			sp.Subagent = &instrument.Subagent{Type: "general-purpose"}
		}
		return sp
	}
	end := func(sp *instrument.Span, at int) {
		sp.End = t0.Add(time.Duration(at) * time.Second)
		s.SpanEnded(sp)
	}
	ended := func(want int) {
		t.Helper()
		if got := len(rec.Ended()); got != want {
			t.Fatalf("%d spans exported, want %d", got, want)
		}
	}
	root := span(1, 1, 0, instrument.KindTurn, 0)
	chat := span(1, 2, 1, instrument.KindChat, 0)
	sub := span(1, 3, 1, instrument.KindSubagent, 1)
	for _, sp := range []*instrument.Span{root, chat, sub} {
		s.SpanStarted(sp)
	}
	end(chat, 1)
	ended(0)
	end(root, 2)
	ended(2)
	end(sub, 3) // a background subagent, after its turn
	ended(3)

	// A turn still running at shutdown: its held spans go out then.
	root2 := span(2, 1, 0, instrument.KindTurn, 0)
	chat2 := span(2, 2, 1, instrument.KindChat, 0)
	s.SpanStarted(root2)
	s.SpanStarted(chat2)
	end(chat2, 1)
	ended(3)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Ended()); got != 5 {
		t.Fatalf("%d spans exported after shutdown, want 5 (the held chat span and the open root)", got)
	}
}

// TestSinkPerson checks that spans carry who they are attributed to in user.id and
// cctrace.team, and that spans attributed to nobody carry neither.
func TestSinkPerson(t *testing.T) {
	steps := turnSteps()
	for _, st := range steps {
		if st.span.ID == sid(1) || st.span.ID == sid(2) {
			st.span.User, st.span.Team = "alice", "platform"
		}
	}
	got := record(t, steps)
	for id, s := range got {
		attrs := attrMap(s)
		user, team := attrs["user.id"], attrs["cctrace.team"]
		if id == sid(1) || id == sid(2) {
			if user.AsString() != "alice" || team.AsString() != "platform" {
				t.Errorf("%s: user.id %q cctrace.team %q", s.Name(), user.AsString(), team.AsString())
			}
			continue
		}
		if _, ok := attrs["user.id"]; ok {
			t.Errorf("%s: user.id %q on a span of nobody", s.Name(), user.AsString())
		}
	}
}

// TestSuspendedSpansAreLeftToTheNextProcess: a turn's root and running tool span that the
// tracker suspends (the next process ends them) are never exported here, not even at shutdown;
// the turn's spans held so far go out at once, under the root the next process exports.
func TestSuspendedSpansAreLeftToTheNextProcess(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	s, err := New(WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	root := &instrument.Span{TraceID: turnTrace, ID: sid(1), Kind: instrument.KindTurn, Name: "invoke_agent claude-code",
		SessionID: "s", Start: at(0), Turn: &instrument.Turn{Index: 1}}
	chat := &instrument.Span{TraceID: turnTrace, ID: sid(2), Parent: sid(1), Kind: instrument.KindChat, Name: "chat m",
		SessionID: "s", Start: at(10), Chat: &instrument.Chat{Kind: instrument.RequestTurn}}
	tool := &instrument.Span{TraceID: turnTrace, ID: sid(3), Parent: sid(1), Kind: instrument.KindTool, Name: "execute_tool Bash",
		SessionID: "s", Start: at(20), Tool: &instrument.Tool{Name: "Bash", CallID: "toolu_1"}}
	for _, sp := range []*instrument.Span{root, chat, tool} {
		s.SpanStarted(sp)
	}
	chat.End = at(20)
	s.SpanEnded(chat)
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans exported before the turn ended", n)
	}
	s.SpanSuspended(tool)
	s.SpanSuspended(root)
	if got := rec.Ended(); len(got) != 1 || got[0].Name() != "chat m" {
		t.Fatalf("exported %d spans at the suspension, want the held chat span", len(got))
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans exported after shutdown, want only the chat span: the root and the tool are the next process's", n)
	}
}
