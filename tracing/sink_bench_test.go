package tracing

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/testkit/bench/traffic"
)

// discardProcessor takes ended spans and keeps nothing. With it the SDK snapshots each span at
// End, as it does for the batcher when exporting.
type discardProcessor struct{}

func (discardProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardProcessor) Shutdown(context.Context) error                  { return nil }
func (discardProcessor) ForceFlush(context.Context) error                { return nil }

// chatTurn is the spans of one request of internal/testkit/bench traffic as the tracker hands them to
// its sinks: a new prompt opens a turn, its chat span runs until the end_turn response, which
// ends the turn too. prepare resets them to how they look at SpanStarted; finish completes
// them as the tracker does before SpanEnded.
type chatTurn struct {
	body                *wire.Body // the decoded request body, messages already dropped
	messages            int
	chatName            string
	betas               []string
	start               time.Time
	turn, chat          instrument.Span
	turnFields          instrument.Turn
	chatFields          instrument.Chat
	newBlocks           map[instrument.BlockKey]int
	models              []string
	response            wire.Response
	message             wire.MessageInfo
	traceID             instrument.TraceID
	turnSpanID, chatsID instrument.SpanID
}

func newChatTurn(tb testing.TB) *chatTurn {
	tb.Helper()
	rec, err := traffic.FindRecording()
	if err != nil {
		tb.Fatal(err)
	}
	// The hot-path profiles ran with 10 KB bodies.
	body, err := wire.ParseBody(rec.Body(10<<10), "")
	if err != nil {
		tb.Fatal(err)
	}
	c := &chatTurn{messages: len(body.Messages), start: time.Now(), models: make([]string, 0, 1)}
	body.Messages = nil
	c.body = body
	c.chatName = "chat " + body.Model
	c.betas = []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27"}
	c.newBlocks = make(map[instrument.BlockKey]int)
	c.message = wire.MessageInfo{
		ID: "msg_bench0001", Model: "claude-opus-5-5", StopReason: "end_turn",
		Usage: wire.Usage{InputTokens: 43, CacheCreationInputTokens: 307, CacheReadInputTokens: 51010,
			CacheCreation5m: 307, OutputTokens: 1500},
		Blocks: map[wire.BlockType]int{wire.BlockText: 1},
	}
	return c
}

// prepare resets the spans for request i as the tracker builds them before SpanStarted.
func (c *chatTurn) prepare(i uint64) {
	const session = "5e55a000-0000-4000-8000-000000000001"
	c.traceID[0], c.traceID[1], c.traceID[15] = byte(i), byte(i>>8), 1
	c.turnSpanID = instrument.SpanID{0, 0, 0, 0, 0, 0, 0, 1}
	c.chatsID = instrument.SpanID{0, 0, 0, 0, 0, 0, 0, 2}
	now := c.start.Add(time.Duration(i) * time.Millisecond)
	c.turnFields = instrument.Turn{Index: int(i) + 1, Trigger: "prompt"}
	c.turn = instrument.Span{
		TraceID: c.traceID, ID: c.turnSpanID, Kind: instrument.KindTurn, Name: "invoke_agent claude-code",
		Start: now, SessionID: session, TurnIndex: int(i) + 1, Agent: "claude-code", Turn: &c.turnFields,
	}
	clear(c.newBlocks)
	c.chatFields = instrument.Chat{
		Kind: instrument.RequestTurn,
		Request: wire.Request{
			ExchangeID: i, Time: now, Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages,
			Headers: wire.Headers{
				SessionID: session, ClientRequestID: "bench-12345",
				UserAgent:        "claude-cli/2.1.328 (external, cli)",
				AnthropicVersion: "2023-06-01",
				Beta:             c.betas,
			},
			BodySize: 10 << 10, Body: c.body,
		},
		Messages:  c.messages,
		NewBlocks: c.newBlocks,
	}
	c.chat = instrument.Span{
		TraceID: c.traceID, ID: c.chatsID, Parent: c.turnSpanID, Kind: instrument.KindChat,
		Name: c.chatName, Start: now, SessionID: session, TurnIndex: int(i) + 1,
		Agent: "claude-code", Chat: &c.chatFields,
	}
}

// finish completes the spans as the end_turn response does.
func (c *chatTurn) finish() {
	now := c.chat.Start
	end := now.Add(800 * time.Millisecond)
	c.response = wire.Response{
		ExchangeID: c.chatFields.Request.ExchangeID, Status: 200, HeaderTime: now.Add(300 * time.Millisecond),
		FirstChunk: now.Add(310 * time.Millisecond), End: end, RequestID: "req_bench12345",
		ContentType: "text/event-stream", Streamed: true, BodySize: 60 << 10, Message: &c.message,
	}
	c.chatFields.Response = &c.response
	c.chat.End, c.chat.Status = end, instrument.StatusOK
	c.newBlocks[instrument.BlockKey{Role: wire.RoleAssistant, Type: wire.BlockText}]++
	c.turnFields.Requests = 1
	c.turnFields.Usage = c.message.Usage
	c.turnFields.Models = append(c.models[:0], c.message.Model)
	c.turnFields.Outcome, c.turnFields.StopReason = "end_turn", "end_turn"
	c.turn.End = end
}

// BenchmarkSinkChatSpan is the sink's work per API request of internal/testkit/bench traffic: the turn
// and chat spans of a new prompt started, then ended by its end_turn response.
func BenchmarkSinkChatSpan(b *testing.B) {
	sink, err := New(WithSpanProcessor(discardProcessor{}), WithServer("api.anthropic.com", 443))
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Shutdown(context.Background())
	c := newChatTurn(b)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		c.prepare(i)
		sink.SpanStarted(&c.turn)
		sink.SpanStarted(&c.chat)
		c.finish()
		sink.SpanEnded(&c.chat)
		sink.SpanEnded(&c.turn)
	}
}
