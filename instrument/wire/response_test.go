package wire

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// decodeStream feeds chunks to a new streamDecoder, the i-th at t0+i ms, and returns the result.
func decodeStream(chunks ...[]byte) Response {
	d := newStreamDecoder()
	for i, c := range chunks {
		d.Write(c, t0.Add(time.Duration(i)*time.Millisecond))
	}
	var resp Response
	d.Finish(&resp)
	return resp
}

func diffResponse(t *testing.T, got, want Response) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("response mismatch\ngot:  %s\nwant: %s", g, w)
	}
}

func streamFixtures() map[string]Response {
	readInput := `{"file_path": "/repo/config.go"}`
	grepInput := `{"pattern": "func Test", "path": "/repo"}`
	agentInput := `{"description": "Find retry logic", "prompt": "Search the codebase for HTTP retry logic.\nReport file paths and line numbers.", "subagent_type": "Explore", "run_in_background": true}`
	return map[string]Response{
		"stream_parallel_tools.sse": {
			FirstChunk: t0,
			Message: &MessageInfo{
				ID: "msg_01ParallelTools", Model: "claude-sonnet-4-6", StopReason: "tool_use",
				Usage: Usage{
					InputTokens: 12, OutputTokens: 187, CacheReadInputTokens: 30000,
					CacheCreationInputTokens: 2048, CacheCreation1h: 2048,
				},
				Blocks: map[BlockType]int{BlockThinking: 1, BlockText: 1, BlockToolUse: 2},
				ToolUses: []ToolUse{
					{ID: "toolu_01ReadCfg", Name: "Read", End: t0, InputBytes: len(readInput), Input: readInput},
					{ID: "toolu_01GrepTests", Name: "Grep", End: t0, InputBytes: len(grepInput), Input: grepInput},
				},
				Text: "I'll read the config and search for its tests — in parallel.",
			},
		},
		"stream_agent.sse": {
			FirstChunk: t0,
			Message: &MessageInfo{
				ID: "msg_01AgentCall", Model: "claude-opus-4-6", StopReason: "tool_use",
				Usage: Usage{
					InputTokens: 3, OutputTokens: 96, CacheReadInputTokens: 41000,
					CacheCreationInputTokens: 512,
				},
				Blocks: map[BlockType]int{BlockToolUse: 1},
				ToolUses: []ToolUse{{
					ID: "toolu_01AgentExplore", Name: "Agent", End: t0,
					InputBytes: len(agentInput), Input: agentInput,
					Agent: &AgentCall{
						Description: "Find retry logic", SubagentType: "Explore", RunInBackground: true,
						PromptHash: HashText("Search the codebase for HTTP retry logic.\nReport file paths and line numbers."),
					},
				}},
			},
		},
		"stream_error.sse": {
			FirstChunk: t0,
			Message: &MessageInfo{
				ID: "msg_01Overloaded", Model: "claude-sonnet-4-6",
				Usage:  Usage{InputTokens: 2200, OutputTokens: 1},
				Blocks: map[BlockType]int{BlockText: 1},
				Text:   "Let me",
			},
			ErrorType:    "overloaded_error",
			ErrorMessage: "Overloaded",
			Incomplete:   true,
		},
		"stream_crlf_multiline.sse": {
			FirstChunk: t0,
			Message: &MessageInfo{
				ID: "msg_01CRLF", Model: "claude-haiku-4-5", StopReason: "end_turn",
				Usage:  Usage{InputTokens: 40, OutputTokens: 9},
				Blocks: map[BlockType]int{BlockText: 1},
				Text:   `{"title": "Fix flaky test"}`,
			},
		},
	}
}

func TestStreamDecoderFixtures(t *testing.T) {
	for name, want := range streamFixtures() {
		raw := readFixture(t, name)
		t.Run(name+"/whole", func(t *testing.T) {
			diffResponse(t, decodeStream(raw), want)
		})
		t.Run(name+"/every split", func(t *testing.T) {
			for k := 0; k <= len(raw); k++ {
				d := newStreamDecoder()
				d.Write(raw[:k], t0)
				d.Write(raw[k:], t0)
				var got Response
				d.Finish(&got)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("split at byte %d decodes differently", k)
				}
			}
		})
		t.Run(name+"/zero value decoder", func(t *testing.T) {
			var d streamDecoder
			d.Write(raw, t0)
			var got Response
			d.Finish(&got)
			diffResponse(t, got, want)
		})
		t.Run(name+"/byte at a time", func(t *testing.T) {
			d := newStreamDecoder()
			for i := range raw {
				d.Write(raw[i:i+1], t0)
			}
			var got Response
			d.Finish(&got)
			diffResponse(t, got, want)
		})
	}
}

// TestStreamDecoderTiming checks that FirstChunk and tool End come from the chunk that carried
// the event, feeding one SSE event per chunk.
func TestStreamDecoderTiming(t *testing.T) {
	raw := readFixture(t, "stream_parallel_tools.sse")
	events := bytes.SplitAfter(raw, []byte("\n\n"))
	resp := decodeStream(events...)
	// Event 3 (0-based) is the first content_block_delta; 14 and 17 stop the two tool_use blocks.
	if want := t0.Add(3 * time.Millisecond); !resp.FirstChunk.Equal(want) {
		t.Errorf("FirstChunk = %v, want %v", resp.FirstChunk, want)
	}
	for i, want := range []time.Duration{14, 17} {
		if got := resp.Message.ToolUses[i].End; !got.Equal(t0.Add(want * time.Millisecond)) {
			t.Errorf("ToolUses[%d].End = %v, want t0+%dms", i, got, want)
		}
	}
}

// TestDecodeResponseChunks checks that a stream decoded whole from its copy, timed by the chunks
// it was forwarded in, decodes exactly as when fed chunk by chunk as it passed; and that a
// content-encoded stream's chunks, which are not its events' bytes, are left unused.
func TestDecodeResponseChunks(t *testing.T) {
	raw := readFixture(t, "stream_parallel_tools.sse")
	events := bytes.SplitAfter(raw, []byte("\n\n"))
	want := decodeStream(events...)
	want.ContentType, want.Streamed = "text/event-stream", true

	got := Response{ContentType: "text/event-stream"}
	end := 0
	for i, ev := range events {
		end += len(ev)
		got.Chunks = append(got.Chunks, Chunk{End: end, At: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	DecodeResponse(&got, EndpointMessages, raw)
	diffResponse(t, got, want)

	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	encoded := Response{ContentType: "text/event-stream", ContentEncoding: "gzip", End: t0.Add(time.Hour),
		Chunks: []Chunk{{End: zipped.Len() / 2, At: t0}, {End: zipped.Len(), At: t0}}}
	DecodeResponse(&encoded, EndpointMessages, zipped.Bytes())
	if !encoded.FirstChunk.Equal(encoded.End) || encoded.Chunks != nil || encoded.Message == nil {
		t.Errorf("gzip stream: first chunk %v, end %v, chunks %v, message %v", encoded.FirstChunk, encoded.End, encoded.Chunks, encoded.Message)
	}
}

// TestStreamDecoderPassesOver checks which deltas are not decoded: once the first delta's time
// is known and the text preview is full, a delta (even a malformed one) is passed over unless a
// tool call is open, whose input deltas count.
func TestStreamDecoderPassesOver(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	text := func(s string) string {
		return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + s + "\"}}\n\n"
	}
	const malformed = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n"
	tool := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n"
	full := strings.Repeat("x", PreviewLimit+8)
	tests := []struct {
		name, stream string
		skipped      int
	}{
		{"preview not full", start + text("short") + malformed, 1},
		{"preview full", start + text(full) + malformed + text("more"), 0},
		{"a tool call open", start + text(full) + tool + malformed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeStream([]byte(tt.stream))
			if want := fmt.Sprintf("skipped %d events", tt.skipped); tt.skipped > 0 && !strings.Contains(r.ParseError, want) || tt.skipped == 0 && r.ParseError != "" {
				t.Errorf("ParseError %q, want %d skipped", r.ParseError, tt.skipped)
			}
			if r.Message == nil || r.Message.ID != "msg_1" {
				t.Errorf("message %+v", r.Message)
			}
		})
	}
}

func TestStreamDecoderCases(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		check  func(t *testing.T, r Response)
	}{
		{
			name: "usage missing from message_delta keeps message_start values",
			chunks: []string{
				"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":70,\"output_tokens\":1}}}\n\n",
				"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":null,\"output_tokens\":30}}\n\n",
				"data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":42}}\n\n",
				"data: {\"type\":\"message_stop\"}\n\n",
			},
			check: func(t *testing.T, r Response) {
				want := Usage{InputTokens: 5, CacheReadInputTokens: 70, OutputTokens: 42}
				if r.Message.Usage != want || r.Message.StopReason != "end_turn" || r.Incomplete {
					t.Errorf("got %+v stop=%q incomplete=%v", r.Message.Usage, r.Message.StopReason, r.Incomplete)
				}
			},
		},
		{
			name: "event name used when data has no type; lone CR line ends; unknown events ignored",
			chunks: []string{
				"event: message_start\rdata: {\"message\":{\"id\":\"msg_1\"}}\r\r",
				"event: future_event\ndata: {\"type\":\"future_event\",\"x\":1}\n\n",
				"retry: 100\nid: 7\ndata: {\"type\":\"message_stop\"}\n\n",
			},
			check: func(t *testing.T, r Response) {
				if r.Message == nil || r.Message.ID != "msg_1" || r.Incomplete || r.ParseError != "" {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "malformed event is skipped and reported",
			chunks: []string{
				"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n",
				"data: {\"type\":\"content_block_delta\",\n\n",
				"data: [DONE]\n\n",
				"data: {\"type\":\"message_stop\"}\n\n",
			},
			check: func(t *testing.T, r Response) {
				if !strings.Contains(r.ParseError, "skipped 2 events") || r.Message.ID != "msg_1" || r.Incomplete {
					t.Errorf("got ParseError=%q %+v", r.ParseError, r)
				}
			},
		},
		{
			name: "stream cut inside a tool call",
			chunks: []string{
				"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n",
				"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Agent\",\"input\":{}}}\n\n",
				"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"prompt\\\": \\\"x\"}}\n\n",
				"data: {\"type\":\"message_stop\"}", // no blank line: discarded, as in the SSE spec
			},
			check: func(t *testing.T, r Response) {
				tu := r.Message.ToolUses[0]
				if !r.Incomplete || !tu.End.IsZero() || tu.Agent != nil || tu.Input != `{"prompt": "x` || tu.InputBytes != 13 {
					t.Errorf("got incomplete=%v %+v", r.Incomplete, tu)
				}
			},
		},
		{
			name: "tool call without input deltas keeps the start input",
			chunks: []string{
				"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"TodoRead\",\"input\":{}}}\n\n",
				"data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
			},
			check: func(t *testing.T, r Response) {
				tu := r.Message.ToolUses[0]
				if tu.Input != "{}" || tu.InputBytes != 2 || !tu.End.Equal(t0.Add(time.Millisecond)) {
					t.Errorf("got %+v", tu)
				}
			},
		},
		{
			name: "text preview is bounded",
			chunks: []string{
				"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
				strings.Repeat("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ééééééé\"}}\n\n", 100),
			},
			check: func(t *testing.T, r Response) {
				if n := len(r.Message.Text); n > PreviewLimit || n < PreviewLimit-1 {
					t.Errorf("Text has %d bytes", n)
				}
			},
		},
		{
			name:   "error event only",
			chunks: []string{"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n"},
			check: func(t *testing.T, r Response) {
				if r.Message != nil || r.ErrorType != "api_error" || r.ErrorMessage != "Internal server error" || !r.Incomplete {
					t.Errorf("got %+v", r)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := make([][]byte, len(tt.chunks))
			for i, c := range tt.chunks {
				chunks[i] = []byte(c)
			}
			tt.check(t, decodeStream(chunks...))
		})
	}
}

const textDeltaJSON = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \"there\"\u00e9"}}`

// TestStreamDecoderInPlace checks that events whole in a chunk and shaped as the Messages API
// sends them are read in place, whatever the line ends, and decode as when taken line by line;
// and that everything else still is taken line by line.
func TestStreamDecoderInPlace(t *testing.T) {
	events := func(eol string) string {
		return strings.Join([]string{
			"event: message_start", `data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3}}}`, "",
			"event: content_block_start", `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, "",
			"event: content_block_delta", "data: " + textDeltaJSON, "",
			"event:content_block_delta", "data:" + textDeltaJSON, "",
			"data: " + textDeltaJSON, "",
			"event: content_block_delta", `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}} `, "",
			"event: content_block_stop", `data: {"type":"content_block_stop","index":0}`, "",
			"event: message_delta", `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`, "",
			"event: message_stop", `data: {"type":"message_stop"}`, "", "",
		}, eol)
	}
	tests := []struct {
		name    string
		raw     string
		inPlace bool // every event is read in place: the buffers of events taken line by line stay unused
	}{
		{name: "LF", raw: events("\n"), inPlace: true},
		{name: "CRLF", raw: events("\r\n"), inPlace: true},
		{name: "CR", raw: events("\r"), inPlace: true},
		{name: "malformed data", raw: "event: content_block_delta\ndata: {\"type\":\n\ndata: [DONE]\n\n" + events("\n"), inPlace: true},
		// Lines between events are taken one by one, but change nothing for the next event.
		{name: "comment between events", raw: ": keep-alive\n\n" + events("\n"), inPlace: true},
		{name: "id field before an event", raw: "id: 1\n" + events("\n"), inPlace: true},
		{name: "comment in an event", raw: "event: message_start\n: keep-alive\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\"}}\n\n" + events("\n")},
		{name: "id field in an event", raw: "event: message_start\nid: 1\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\"}}\n\n" + events("\n")},
		{name: "two data lines", raw: "event: message_start\ndata: {\"type\":\"message_start\",\ndata: \"message\":{\"id\":\"msg_2\"}}\n\n" + events("\n")},
		{name: "long event name", raw: "event: " + strings.Repeat("x", maxInPlaceName+1) + "\ndata: {}\n\n" + events("\n")},
		{name: "data line first", raw: "data: {}\nevent: ping\n\n" + events("\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			lineByLine := &streamDecoder{buffered: true}
			lineByLine.Write(raw, t0)
			var want Response
			lineByLine.Finish(&want)
			if want.Message == nil || want.Incomplete {
				t.Fatalf("line by line: %+v", want)
			}

			d := newStreamDecoder()
			d.Write(raw, t0)
			if inPlace := d.data == nil && d.event == nil; inPlace != tt.inPlace {
				t.Errorf("all events read in place: %v, want %v", inPlace, tt.inPlace)
			}
			var got Response
			d.Finish(&got)
			diffResponse(t, got, want)

			// One event per chunk, as the proxy forwards them, except that a CRLF ending an
			// event is split: its CR ends a chunk, its LF starts the next.
			d = newStreamDecoder()
			for rest := raw; len(rest) > 0; {
				n := len(rest)
				for _, blank := range []string{"\n\n", "\r\r", "\r\n\r\n"} {
					if k := bytes.Index(rest, []byte(blank)); k >= 0 && k+len(blank) < n {
						n = k + len(blank)
					}
				}
				if rest[n-1] == '\n' && n > 1 && rest[n-2] == '\r' {
					n--
				}
				d.Write(rest[:n], t0)
				rest = rest[n:]
			}
			if inPlace := d.data == nil && d.event == nil; inPlace != tt.inPlace {
				t.Errorf("one event per chunk: all events read in place: %v, want %v", inPlace, tt.inPlace)
			}
			got = Response{}
			d.Finish(&got)
			diffResponse(t, got, want)
		})
	}
}

func TestStreamDecoderBoundsMemory(t *testing.T) {
	d := newStreamDecoder()
	d.Write([]byte("data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\ndata: \""), t0)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range (maxSSELine / len(chunk)) + 8 {
		d.Write(chunk, t0)
		if cap(d.line) > maxSSELine {
			t.Fatalf("line buffer grew to %d bytes", cap(d.line))
		}
	}
	d.Write([]byte("\"\n\ndata: {\"type\":\"message_stop\"}\n\n"), t0)
	var r Response
	d.Finish(&r)
	if r.Incomplete || r.Message.ID != "msg_1" || !strings.Contains(r.ParseError, "longer than 4 MiB") {
		t.Errorf("got %+v", r)
	}

	// Many data lines, each short, adding up to more than the limit.
	d = newStreamDecoder()
	line := []byte("data: " + strings.Repeat("y", 1<<20) + "\n")
	for range 6 {
		d.Write(line, t0)
	}
	if cap(d.data) > maxSSELine {
		t.Fatalf("event data buffer grew to %d bytes", cap(d.data))
	}
	d.Write([]byte("\n"), t0)
	r = Response{}
	d.Finish(&r)
	if !strings.Contains(r.ParseError, "event data longer than 4 MiB") {
		t.Errorf("ParseError = %q", r.ParseError)
	}
}

func TestDecodeResponse(t *testing.T) {
	gzipped := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	end := t0.Add(time.Second)
	agentPrompt := HashText("List every flaky test.")
	tests := []struct {
		name     string
		resp     Response
		endpoint Endpoint
		body     []byte
		want     Response
	}{
		{
			name:     "JSON message",
			resp:     Response{ContentType: "application/json", End: end},
			endpoint: EndpointMessages,
			body:     readFixture(t, "response_message.json"),
			want: Response{
				ContentType: "application/json", End: end,
				Message: &MessageInfo{
					ID: "msg_01NonStreamed", Model: "claude-sonnet-4-6", StopReason: "tool_use",
					Usage: Usage{
						InputTokens: 7, OutputTokens: 64, CacheReadInputTokens: 9000,
						CacheCreationInputTokens: 100, CacheCreation5m: 100,
					},
					Blocks: map[BlockType]int{BlockText: 1, BlockToolUse: 2},
					ToolUses: []ToolUse{
						{
							ID: "toolu_01Agent", Name: "Agent", End: end,
							InputBytes: len(`{"description": "Audit tests", "prompt": "List every flaky test.", "subagent_type": "general-purpose"}`),
							Input:      `{"description": "Audit tests", "prompt": "List every flaky test.", "subagent_type": "general-purpose"}`,
							Agent:      &AgentCall{Description: "Audit tests", SubagentType: "general-purpose", PromptHash: agentPrompt},
						},
						{
							ID: "toolu_01Bash", Name: "Bash", End: end,
							InputBytes: len(`{"command": "go test ./..."}`), Input: `{"command": "go test ./..."}`,
						},
					},
					Text: "Starting two agents.",
				},
			},
		},
		{
			name:     "JSON error",
			resp:     Response{Status: 529, ContentType: "application/json"},
			endpoint: EndpointMessages,
			body:     readFixture(t, "response_error.json"),
			want: Response{
				Status: 529, ContentType: "application/json",
				ErrorType: "overloaded_error", ErrorMessage: "Overloaded",
			},
		},
		{
			name:     "count_tokens",
			resp:     Response{ContentType: "application/json; charset=utf-8"},
			endpoint: EndpointCountTokens,
			body:     readFixture(t, "response_count_tokens.json"),
			want:     Response{ContentType: "application/json; charset=utf-8", InputTokens: 18342},
		},
		{
			name:     "gzip event stream decoded at once",
			resp:     Response{ContentType: "text/event-stream; charset=utf-8", ContentEncoding: "gzip", End: end},
			endpoint: EndpointMessages,
			body:     gzipped(readFixture(t, "stream_crlf_multiline.sse")),
			want: Response{
				ContentType: "text/event-stream; charset=utf-8", ContentEncoding: "gzip", End: end,
				Streamed: true, FirstChunk: end,
				Message: &MessageInfo{
					ID: "msg_01CRLF", Model: "claude-haiku-4-5", StopReason: "end_turn",
					Usage:  Usage{InputTokens: 40, OutputTokens: 9},
					Blocks: map[BlockType]int{BlockText: 1},
					Text:   `{"title": "Fix flaky test"}`,
				},
			},
		},
		{
			name:     "HTML error page",
			resp:     Response{Status: 502, ContentType: "text/html"},
			endpoint: EndpointMessages,
			body:     []byte("<html><body>Bad Gateway</body></html>"),
			want: Response{
				Status: 502, ContentType: "text/html",
				ParseError: "decoding response body: jsontext: invalid character '<' at start of value",
			},
		},
		{
			name:     "corrupt gzip",
			resp:     Response{ContentEncoding: "gzip"},
			endpoint: EndpointMessages,
			body:     []byte("not gzip"),
			want: Response{
				ContentEncoding: "gzip",
				ParseError:      "decoding response body: decompressing gzip body: unexpected EOF",
			},
		},
		{
			name:     "empty body",
			resp:     Response{Status: 204},
			endpoint: EndpointOther,
			want:     Response{Status: 204},
		},
		{
			name:     "JSON that is not an object",
			resp:     Response{ContentType: "application/json"},
			endpoint: EndpointOther,
			body:     []byte(`["models"]`),
			want:     Response{ContentType: "application/json", ParseError: "decoding response body: not a JSON object"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.resp
			DecodeResponse(&got, tt.endpoint, tt.body)
			diffResponse(t, got, tt.want)
		})
	}
}

func FuzzStreamDecoder(f *testing.F) {
	for name := range streamFixtures() {
		f.Add(readFixture(f, name), uint16(7))
	}
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"name\":\"Agent\"}}\r\n\r\n"), uint16(1))
	for _, data := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\u00e9"}}`,
		`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":""}} `,
		`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x\q"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"usage":{}}`,
		`{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": \"\u00e9"}}`,
		`{"type":"content_block_delta","index":1234567890,"delta":{"type":"input_json_delta","partial_json":"x"}}`,
		`{"type":"content_block_delta","index":123456789,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_delta","index":99999999999999999999,"delta":{"type":"input_json_delta","partial_json":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","partial_json":"x"}}`,
	} {
		f.Add([]byte("event: content_block_delta\ndata: "+data+"\n\n"), uint16(3))
		f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_delta\ndata: "+data+"\n\n"), uint16(5))
		f.Add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"name\":\"Agent\",\"input\":{}}}\n\nevent: content_block_delta\ndata: "+data+"\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"), uint16(9))
	}
	// Shapes around the in-place path: line ends, CR at a chunk's end, long names, several
	// data lines, comments and other fields between or inside events, events cut short.
	for _, s := range []string{
		"event: content_block_delta\r\ndata: " + textDeltaJSON + "\r\n\r\nevent: message_stop\rdata: {\"type\":\"message_stop\"}\r\r",
		"event: content_block_delta\ndata: " + textDeltaJSON + "\r\n\r",
		"event: content_block_delta\ndata: " + textDeltaJSON + "\r\r\ndata: {}\n\n",
		"event: content_block_delta\ndata: " + textDeltaJSON + " \n\n",
		"event: content_block_delta\ndata: " + textDeltaJSON + "\ndata: x\n\n",
		"event: content_block_delta\ndata: " + textDeltaJSON + "\nid: 1\n\n",
		"event: content_block_delta\ndata: " + textDeltaJSON + "\n: c\n\n",
		"event:content_block_delta\ndata:" + textDeltaJSON + "\n\n",
		"event:\ndata:\n\ndata\n\nevent\ndata: {}\n\n",
		"event: " + strings.Repeat("n", 70) + "\ndata: {\"type\":\"message_stop\"}\n\n",
		": hi\nevent: x\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: a\nevent: b\ndata: {}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\nb\"}}\n\n",
	} {
		f.Add([]byte(s), uint16(11))
	}
	// Past a full preview, where the deltas that change nothing are passed over unread.
	full := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("x", PreviewLimit+8) + "\"}}\n\n"
	for _, s := range []string{
		"event: content_block_delta\ndata: " + textDeltaJSON + "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: content_block_delta\ndata: {\"type\":\n\nevent: content_block_delta\ndata:" + textDeltaJSON + "\n\n",
		"event: content_block_delta\ndata: x\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: content_block_delta\ndata: x\r\n\r\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: content_block_delta\ndata: x\revent: message_stop\rdata: {\"type\":\"message_stop\"}\n\n",
		"event: content_block_delta\ndata: x\n: c\n\nevent: content_block_delta\ndata: x\n",
	} {
		f.Add([]byte(full+s), uint16(13))
	}
	f.Fuzz(func(t *testing.T, raw []byte, seed uint16) {
		whole := decodeStream(raw)
		// Chunk sizes derived from seed: any chunking must decode the same way.
		d := newStreamDecoder()
		step := int(seed%61) + 1
		for p := raw; len(p) > 0; {
			n := min(step, len(p))
			d.Write(p[:n], t0)
			p = p[n:]
			step = step*7%61 + 1
		}
		var chunked Response
		d.Finish(&chunked)
		if !reflect.DeepEqual(whole, chunked) {
			t.Fatalf("chunking changes the result:\nwhole:   %+v\nchunked: %+v", whole, chunked)
		}
		// Events read in place must decode exactly as when taken line by line, whether the
		// decoder is told to (buffered) or an event never lies whole in a chunk (byte at a time).
		for _, alt := range []struct {
			what     string
			d        *streamDecoder
			bytewise bool
		}{
			{"reading events in place (against line by line)", &streamDecoder{buffered: true}, false},
			{"feeding a byte at a time", newStreamDecoder(), true},
		} {
			if alt.bytewise {
				for i := range raw {
					alt.d.Write(raw[i:i+1], t0)
				}
			} else {
				alt.d.Write(raw, t0)
			}
			var got Response
			alt.d.Finish(&got)
			if !reflect.DeepEqual(whole, got) {
				t.Fatalf("%s changes the result:\nwant: %+v\ngot:  %+v", alt.what, whole, got)
			}
		}
		if m := whole.Message; m != nil {
			if len(m.Text) > PreviewLimit || len(m.ToolUses) > maxToolUses {
				t.Fatalf("unbounded output: %d text bytes, %d tool uses", len(m.Text), len(m.ToolUses))
			}
			for _, tu := range m.ToolUses {
				if len(tu.Input) > PreviewLimit {
					t.Fatalf("tool input preview has %d bytes", len(tu.Input))
				}
			}
		}
	})
}
