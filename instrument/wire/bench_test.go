package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// claudeCodeBody builds a request body shaped like Claude Code's at about size bytes: a billing
// header and a long system prompt, a few dozen tools with JSON schemas, and a history of
// assistant tool calls answered by tool results holding source code (with the quotes, tabs and
// newlines that JSON escapes), ending in a user message with reminders.
func claudeCodeBody(size int) []byte {
	source := strings.Repeat("func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != \"POST\" {\n\t\thttp.Error(w, \"method\", 405) // ünïcödé\n\t}\n}\n", 8)
	type block = map[string]any
	tools := make([]block, 0, 30)
	for i := range 30 {
		tools = append(tools, block{
			"name":        fmt.Sprintf("Tool%02d", i),
			"description": strings.Repeat("Describes when and how to use this tool. ", 20),
			"input_schema": block{"type": "object", "properties": block{
				"path": block{"type": "string", "description": "Absolute path"},
				"mode": block{"type": "string", "enum": []string{"a", "b"}},
			}, "required": []string{"path"}},
		})
	}
	req := block{
		"model": "claude-opus-4-6",
		"system": []block{
			{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=cli;"},
			{"type": "text", "text": strings.Repeat("You are Claude Code. Follow the instructions. ", 100), "cache_control": block{"type": "ephemeral"}},
		},
		"tools":      tools,
		"metadata":   block{"user_id": `{"device_id":"d","account_uuid":"a","session_id":"s"}`},
		"max_tokens": 32000, "thinking": block{"type": "adaptive"}, "stream": true,
	}
	messages := []block{{"role": "user", "content": []block{
		{"type": "text", "text": "<system-reminder>\nContext.\n</system-reminder>"},
		{"type": "text", "text": "Refactor the proxy."},
	}}}
	probe, _ := json.Marshal(req)
	for n, i := len(probe), 0; n < size; i++ {
		id := fmt.Sprintf("toolu_%04d", i)
		assistant := block{"role": "assistant", "content": []block{
			{"type": "text", "text": "Reading the next file."},
			{"type": "tool_use", "id": id, "name": "Read", "input": block{"file_path": fmt.Sprintf("/repo/f%d.go", i)}},
		}}
		user := block{"role": "user", "content": []block{
			{"type": "tool_result", "tool_use_id": id, "content": source},
		}}
		messages = append(messages, assistant, user)
		m, _ := json.Marshal([]block{assistant, user})
		n += len(m)
	}
	messages = append(messages, block{"role": "user", "content": []block{
		{"type": "text", "text": "<system-reminder>\nPlan mode is active.\n</system-reminder>", "cache_control": block{"type": "ephemeral"}},
	}})
	req["messages"] = messages
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

func BenchmarkParseBody(b *testing.B) {
	for _, size := range []int{10 << 10, 200 << 10, 1 << 20} {
		body := claudeCodeBody(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseBody(body, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBodyCache decodes the next request of a conversation the way the pipeline does: the
// same history with a new last message (here: one byte of it changed each time), resumed from
// the previous body.
func BenchmarkBodyCache(b *testing.B) {
	for _, size := range []int{10 << 10, 200 << 10, 1 << 20} {
		body := claudeCodeBody(size)
		at := bytes.LastIndex(body, []byte("Plan mode is active"))
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			c := NewBodyCache(0, ReuseMessages())                   // as the pipeline's
			if _, err := c.Parse("session", body, ""); err != nil { // the previous request
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				body[at] ^= 'P' ^ 'p'
				if _, err := c.Parse("session", body, ""); err != nil {
					b.Fatal(err)
				}
			}
			if resumed, _ := c.Stats(); resumed == 0 {
				b.Fatal("nothing resumed")
			}
		})
	}
}

// BenchmarkBodyCacheFirst decodes the first request of a conversation the way the pipeline does:
// whole, through a BodyCache with ReuseMessages that remembers it for the next one.
func BenchmarkBodyCacheFirst(b *testing.B) {
	for _, size := range []int{10 << 10, 200 << 10, 1 << 20} {
		body := claudeCodeBody(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			c := NewBodyCache(0, ReuseMessages())
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				if _, err := c.Parse(strconv.Itoa(n), body, ""); err != nil {
					b.Fatal(err)
				}
			}
			if resumed, _ := c.Stats(); resumed != 0 {
				b.Fatal("a first request was resumed")
			}
		})
	}
}

// BenchmarkParseBodyEncodingJSON is the baseline: encoding/json into a struct that keeps content
// as json.RawMessage, the cheapest way to use the standard library for the same job.
func BenchmarkParseBodyEncodingJSON(b *testing.B) {
	body := claudeCodeBody(1 << 20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var v struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			System json.RawMessage `json:"system"`
			Tools  []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamDecoder(b *testing.B) {
	// Fed one event per chunk, as the proxy would after each flush.
	events := benchStreamEvents()
	chunks := make([][]byte, len(events))
	for i, e := range events {
		chunks[i] = []byte(e)
	}
	benchStreamDecoder(b, chunks)
}

// BenchmarkStreamDecoderSplit feeds the same stream in 1000-byte chunks, cut anywhere in events,
// as reads deliver it when events arrive faster than the proxy forwards them.
func BenchmarkStreamDecoderSplit(b *testing.B) {
	stream := []byte(strings.Join(benchStreamEvents(), ""))
	var chunks [][]byte
	for len(stream) > 0 {
		n := min(1000, len(stream))
		chunks = append(chunks, stream[:n])
		stream = stream[n:]
	}
	benchStreamDecoder(b, chunks)
}

// benchStreamEvents is a long answer: thinking, 400 text deltas and a tool call.
func benchStreamEvents() []string {
	var events []string
	events = append(events, `event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[],"stop_reason":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":900,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":900},"output_tokens":1}}}`+"\n\n")
	events = append(events, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n")
	for range 400 {
		events = append(events, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Here is some streamed text with \"quotes\" and more words."}}`+"\n\n")
	}
	events = append(events, `event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`+"\n\n")
	events = append(events, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Edit","input":{}}}`+"\n\n")
	for range 50 {
		events = append(events, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"new_string\": \"func main() {\\n\\tfmt.Println(1)\\n}\", "}}`+"\n\n")
	}
	events = append(events, `event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":1}`+"\n\n",
		`event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":812}}`+"\n\n",
		`event: message_stop`+"\n"+`data: {"type":"message_stop"}`+"\n\n")
	return events
}

func benchStreamDecoder(b *testing.B, chunks [][]byte) {
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	now := time.Now()
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		d := newStreamDecoder()
		for _, c := range chunks {
			d.Write(c, now)
		}
		var resp Response
		d.Finish(&resp)
		if resp.Incomplete {
			b.Fatal("incomplete")
		}
	}
}
