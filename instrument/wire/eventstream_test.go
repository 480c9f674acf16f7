package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// chunkFrame encodes an Anthropic stream event as Bedrock sends it: a chunk event whose payload
// is {"bytes": base64(event)}.
func chunkFrame(t testing.TB, event []byte) []byte {
	t.Helper()
	payload, err := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString(event), "p": "abcdefghij"})
	if err != nil {
		t.Fatal(err)
	}
	return frame(t, eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, payload)
}

func frame(t testing.TB, hs eventstream.Headers, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sseData returns the data of every event of an SSE text, in order.
func sseData(sse string) [][]byte {
	var out [][]byte
	for line := range strings.SplitSeq(sse, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, []byte(data))
		}
	}
	return out
}

// recordedStream is the SSE answer of a recorded exchange with tool calls and usage.
func recordedStream(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/claude-code/tool_roundtrip/001.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Response string `json:"response"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Response
}

// TestEventStreamDecoderSplitAnywhere feeds the same events as SSE and as Bedrock frames, the
// frames split in two at every byte, and wants the same decoded response each time.
func TestEventStreamDecoderSplitAnywhere(t *testing.T) {
	sse := recordedStream(t)
	now := time.Unix(1700000000, 0)
	var want Response
	sd := newStreamDecoder()
	sd.Write([]byte(sse), now)
	sd.Finish(&want)
	if want.Message == nil || len(want.Message.ToolUses) == 0 || want.Incomplete {
		t.Fatalf("the recording decodes as SSE to %+v", want)
	}

	var stream []byte
	for _, data := range sseData(sse) {
		stream = append(stream, chunkFrame(t, data)...)
	}
	for split := 0; split <= len(stream); split++ {
		d := newEventStreamDecoder()
		d.Write(stream[:split], now)
		d.Write(stream[split:], now)
		var got Response
		d.Finish(&got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d of %d:\n got %+v\nwant %+v", split, len(stream), got, want)
		}
	}
	// One byte at a time, too.
	d := newEventStreamDecoder()
	for i := range stream {
		d.Write(stream[i:i+1], now)
	}
	var got Response
	d.Finish(&got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("byte by byte:\n got %+v\nwant %+v", got, want)
	}
}

func TestEventStreamDecoderExceptionsAndDamage(t *testing.T) {
	now := time.Unix(1700000000, 0)
	start := chunkFrame(t, []byte(`{"type":"message_start","message":{"id":"msg_1","model":"claude-opus-5-5","usage":{"input_tokens":5,"output_tokens":1}}}`))
	tests := []struct {
		name      string
		stream    []byte
		errType   string
		errMsg    string
		parseErr  string
		wantInput int
	}{
		{
			name: "exception",
			stream: append(append([]byte(nil), start...), frame(t, eventstream.Headers{
				{Name: ":message-type", Value: eventstream.StringValue("exception")},
				{Name: ":exception-type", Value: eventstream.StringValue("throttlingException")},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			}, []byte(`{"message":"Too many requests, please wait before trying again."}`))...),
			errType: "throttlingException", errMsg: "Too many requests, please wait before trying again.", wantInput: 5,
		},
		{
			name: "error message",
			stream: frame(t, eventstream.Headers{
				{Name: ":message-type", Value: eventstream.StringValue("error")},
				{Name: ":error-code", Value: eventstream.StringValue("InternalFailure")},
				{Name: ":error-message", Value: eventstream.StringValue("boom")},
			}, nil),
			errType: "InternalFailure", errMsg: "boom",
		},
		{
			name: "bad crc",
			stream: func() []byte {
				b := append([]byte(nil), start...)
				b[len(b)-1] ^= 0xff
				return b
			}(),
			parseErr: "decoding event stream: skipped 1 events (first: decoding event-stream frame",
		},
		{
			name:     "bad base64",
			stream:   frame(t, eventstream.Headers{{Name: ":message-type", Value: eventstream.StringValue("event")}, {Name: ":event-type", Value: eventstream.StringValue("chunk")}}, []byte(`{"bytes":"%%%"}`)),
			parseErr: "decoding event stream: skipped 1 events (first: decoding chunk bytes",
		},
		{
			name:     "nonsense length",
			stream:   []byte{0, 0, 0, 3, 1, 2, 3, 4},
			parseErr: "decoding event stream: skipped 1 events (first: event-stream frame of 3 bytes)",
		},
		{
			name:      "overlong frame skipped",
			stream:    append([]byte{0, 0x80, 0, 0}, start...),
			parseErr:  fmt.Sprintf("decoding event stream: skipped 1 events (first: event-stream frame longer than %d bytes)", maxFrame),
			wantInput: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newEventStreamDecoder()
			d.Write(tt.stream, now)
			var got Response
			d.Finish(&got)
			if got.ErrorType != tt.errType || got.ErrorMessage != tt.errMsg {
				t.Errorf("error = %q %q, want %q %q", got.ErrorType, got.ErrorMessage, tt.errType, tt.errMsg)
			}
			if !strings.HasPrefix(got.ParseError, tt.parseErr) || (tt.parseErr == "") != (got.ParseError == "") {
				t.Errorf("ParseError = %q, want it to begin %q", got.ParseError, tt.parseErr)
			}
			if tt.wantInput > 0 && (got.Message == nil || got.Message.Usage.InputTokens != tt.wantInput) {
				t.Errorf("message = %+v, want input tokens %d", got.Message, tt.wantInput)
			}
			if !got.Incomplete {
				t.Error("a stream without message_stop is incomplete")
			}
		})
	}
}

func TestDecodeResponseEventStream(t *testing.T) {
	sse := recordedStream(t)
	var stream []byte
	for _, data := range sseData(sse) {
		stream = append(stream, chunkFrame(t, data)...)
	}
	resp := Response{ContentType: "application/vnd.amazon.eventstream", End: time.Unix(1700000000, 0)}
	DecodeResponse(&resp, EndpointMessages, stream)
	if !resp.Streamed || resp.Message == nil || resp.Message.StopReason != "tool_use" || resp.Incomplete || resp.ParseError != "" {
		t.Fatalf("decoded %+v", resp)
	}
}

func TestDecodeResponseCloudErrors(t *testing.T) {
	tests := []struct {
		name, body       string
		status           int
		wantType, wantMs string
	}{
		{"bedrock", `{"message":"The security token included in the request is invalid."}`, 403, "", "The security token included in the request is invalid."},
		{"vertex", `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials."},
		{"anthropic", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, 401, "authentication_error", "invalid x-api-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := Response{Status: tt.status, ContentType: "application/json"}
			DecodeResponse(&resp, EndpointMessages, []byte(tt.body))
			if resp.ErrorType != tt.wantType || resp.ErrorMessage != tt.wantMs {
				t.Errorf("got %q %q, want %q %q", resp.ErrorType, resp.ErrorMessage, tt.wantType, tt.wantMs)
			}
		})
	}
}

// FuzzEventStreamDecoder feeds arbitrary bytes, whole and split in two, to the Bedrock decoder:
// it must never panic, and where the split falls must not change what it decodes.
func FuzzEventStreamDecoder(f *testing.F) {
	var stream []byte
	for _, data := range sseData(`data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":3}}}

data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}}

data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}

data: {"type":"message_stop"}
`) {
		stream = append(stream, chunkFrame(f, data)...)
	}
	f.Add(stream, 17)
	f.Add(stream[:len(stream)-3], 0)
	f.Add([]byte{0, 0, 0, 20, 0, 0, 0, 0, 1, 2, 3, 4}, 5)
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		whole := newEventStreamDecoder()
		whole.Write(b, now)
		var want Response
		whole.Finish(&want)
		if len(b) == 0 {
			return
		}
		split = min(max(split, 0), len(b))
		parts := newEventStreamDecoder()
		parts.Write(b[:split], now)
		parts.Write(b[split:], now)
		var got Response
		parts.Finish(&got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d:\n got %+v\nwant %+v", split, got, want)
		}
	})
}

// TestEventStreamDecoderDropsLargeEventBuffer: a large event's decoded bytes are not held for
// the rest of the stream.
func TestEventStreamDecoderDropsLargeEventBuffer(t *testing.T) {
	now := time.Unix(1700000000, 0)
	text := strings.Repeat("x", 4*maxScratchBuf)
	event := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}`)
	d := newEventStreamDecoder()
	d.Write(chunkFrame(t, []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}`)), now)
	d.Write(chunkFrame(t, []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)), now)
	d.Write(chunkFrame(t, event), now)
	if c := cap(d.frames.event); c > maxScratchBuf {
		t.Errorf("the decoder holds a %d-byte event buffer after a large event", c)
	}
}
