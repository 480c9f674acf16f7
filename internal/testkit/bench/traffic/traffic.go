// Package traffic synthesises Claude-Code-shaped traffic for benchmarks: request bodies grown
// from a recorded Claude Code request to a chosen size (hundreds of messages, tool results and a
// long system prompt, as real sessions grow) and SSE replies of a chosen number of events.
//
// It depends on nothing else in cctrace, so that any package's benchmarks can use it.
package traffic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultRecording is the recorded exchange bodies are grown from, relative to the repository
// root: an interactive Claude Code 2.1.328 request with its full system prompt and tool list.
const DefaultRecording = "testdata/claude-code/interactive/005.json"

// Recording is one recorded Claude Code request: its decoded body, kept as raw JSON per
// top-level key so that synthesised bodies reuse the real system prompt, tools and metadata.
// The zero value has no keys; build it with LoadRecording or FindRecording.
type Recording struct {
	keys     map[string]json.RawMessage
	messages []json.RawMessage
}

// LoadRecording reads a recorded exchange (testdata/claude-code/*/NNN.json, whose "body" holds
// the request body) and keeps its request body. Headers are not read: they hold no secrets in the
// recordings, but a benchmark has no use for them either.
func LoadRecording(path string) (*Recording, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading recording: %w", err)
	}
	var exchange struct {
		Body map[string]json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(raw, &exchange); err != nil {
		return nil, fmt.Errorf("decoding recording %s: %w", path, err)
	}
	if len(exchange.Body) == 0 {
		return nil, fmt.Errorf("recording %s: no request body", path)
	}
	r := &Recording{keys: exchange.Body}
	if m, ok := r.keys["messages"]; ok {
		if err := json.Unmarshal(m, &r.messages); err != nil {
			return nil, fmt.Errorf("recording %s: decoding messages: %w", path, err)
		}
		delete(r.keys, "messages")
	}
	if len(r.messages) == 0 {
		return nil, fmt.Errorf("recording %s: no messages", path)
	}
	return r, nil
}

// FindRecording loads DefaultRecording from the current directory or the nearest parent that
// has it, so that tests in any package and commands run from the repository root find it.
func FindRecording() (*Recording, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("finding recording: %w", err)
	}
	for {
		p := filepath.Join(dir, DefaultRecording)
		if _, err := os.Stat(p); err == nil {
			return LoadRecording(p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("finding recording: " + DefaultRecording + " is in no parent of the working directory")
		}
		dir = parent
	}
}

// nonce is a fixed-width field in the human prompt of every body that Stamp overwrites, so that
// each request of a session is a new prompt (Claude Code never sends the same body twice except
// to retry) without rebuilding the body.
const nonce = "(request 0000000000)"

// NonceOffset returns where in body the digits of its nonce start, -1 when it has none.
func NonceOffset(body []byte) int {
	i := bytes.LastIndex(body, []byte(nonce))
	if i < 0 {
		return -1
	}
	return i + len("(request ")
}

// Stamp writes n, zero-padded to ten digits, at the nonce digits found by NonceOffset.
func Stamp(body []byte, at int, n uint64) {
	for i := at + 9; i >= at; i-- {
		body[i] = byte('0' + n%10)
		n /= 10
	}
}

// toolNames are the tools a synthesised history calls, in turn.
var toolNames = []string{"Read", "Bash", "Grep", "Edit", "Glob"}

// sourceText is what a Read tool result holds: Go source with the quotes, tabs, newlines and
// non-ASCII text that JSON escapes, as real tool results do.
var sourceText = strings.Repeat("func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n"+
	"\tif r.Method != \"POST\" { // ünïcödé → ✓\n\t\thttp.Error(w, \"method not allowed\", 405)\n\t\treturn\n\t}\n}\n", 10)

// Body returns a Messages API request body of at least size bytes (and little more), shaped like
// Claude Code's: the recording's system prompt, tools, metadata and first messages, then a
// history of assistant tool calls answered by tool results, ending with a user message that
// carries reminders and the human prompt. Bodies under the recording's own size keep a shortened
// system prompt and two tools, like a subagent's requests. The result is deterministic.
func (r *Recording) Body(size int) []byte {
	keys := make(map[string]json.RawMessage, len(r.keys)+1)
	for k, v := range r.keys {
		keys[k] = v
	}
	messages := append([]json.RawMessage(nil), r.messages[:min(2, len(r.messages))]...)
	last := mustJSON(map[string]any{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "<system-reminder>\nThe task tools haven't been used recently.\n</system-reminder>"},
		{"type": "text", "text": "Now run the tests and fix what fails " + nonce + "."},
	}})
	if probe := len(encode(keys, messages)) + len(last); probe > size {
		// A small request: two short tools, the system prompt cut to a share of the size, and
		// only the human prompt as history. (Without tools it would be a side request, such as
		// the session title, rather than a turn.)
		keys["tools"] = mustJSON([]map[string]any{
			{"name": "Read", "description": "Reads a file from the local filesystem.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}}, "required": []string{"file_path"}}},
			{"name": "Bash", "description": "Executes a bash command.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}}},
		})
		keys["system"] = mustJSON([]map[string]any{
			{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=cli;"},
			{"type": "text", "text": strings.Repeat("You are Claude Code, Anthropic's official CLI for Claude. ", max(1, size/2/58))},
		})
		messages = messages[:0]
	}
	n := len(encode(keys, messages)) + len(last)
	for i := 0; n < size; i++ {
		pair := historyPair(i)
		messages = append(messages, pair[:]...)
		n += len(pair[0]) + len(pair[1]) + 2
	}
	messages = append(messages, last)
	return encode(keys, messages)
}

// historyPair is the i-th assistant tool call and the user message answering it.
func historyPair(i int) [2]json.RawMessage {
	id := fmt.Sprintf("toolu_bench%05d", i)
	name := toolNames[i%len(toolNames)]
	assistant := mustJSON(map[string]any{"role": "assistant", "content": []map[string]any{
		{"type": "text", "text": "Let me look at the next file to see how the proxy handles this."},
		{"type": "tool_use", "id": id, "name": name, "input": map[string]any{"file_path": fmt.Sprintf("/repo/internal/pkg%d/file%d.go", i%17, i)}},
	}})
	var result map[string]any
	switch i % 3 {
	case 0:
		result = map[string]any{"type": "tool_result", "tool_use_id": id, "content": sourceText}
	case 1:
		result = map[string]any{"type": "tool_result", "tool_use_id": id, "content": []map[string]any{{"type": "text", "text": sourceText}}}
	default:
		result = map[string]any{"type": "tool_result", "tool_use_id": id, "content": "Exit code 1\n" + sourceText[:400], "is_error": true}
	}
	user := mustJSON(map[string]any{"role": "user", "content": []map[string]any{result}})
	return [2]json.RawMessage{assistant, user}
}

func encode(keys map[string]json.RawMessage, messages []json.RawMessage) []byte {
	all := make(map[string]json.RawMessage, len(keys)+1)
	for k, v := range keys {
		all[k] = v
	}
	all["messages"] = mustJSON(messages)
	return mustJSON(all)
}

// mustJSON marshals values built in this file, which always marshal.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("traffic: marshalling a synthesised value: %v", err))
	}
	return b
}

// Stream is a synthesised SSE reply. The zero value is an empty stream.
type Stream struct {
	// Events are the events in order, each ending with its blank line.
	Events [][]byte
	// Bytes is all events concatenated: the exact body a client must receive.
	Bytes []byte
	// Ends holds, for each event, the offset in Bytes just past it.
	Ends []int
}

// NewStream returns an SSE reply of events events (at least 7), shaped like a Messages API
// stream: message_start, ping, one text block of text_delta events, message_delta with
// stop_reason end_turn and cumulative usage, message_stop.
func NewStream(events int) *Stream {
	events = max(events, 7)
	s := &Stream{}
	add := func(name, data string) {
		s.Events = append(s.Events, []byte("event: "+name+"\ndata: "+data+"\n\n"))
	}
	// Members in the order the Messages API sends them.
	add("message_start", `{"type":"message_start","message":{"model":"claude-opus-5-5","id":"msg_bench0001","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":43,"cache_creation_input_tokens":307,"cache_read_input_tokens":51010,"cache_creation":{"ephemeral_5m_input_tokens":307,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`)
	add("ping", `{"type": "ping"}`)
	add("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	words := []string{"The proxy ", "forwards each ", "chunk as it ", "arrives, and ", "the tap ", "decodes it ", "after the ", "flush: \"no\" ", "delay.\n"}
	for i := 0; i < events-6; i++ {
		add("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(mustJSON(words[i%len(words)]))+`}}`)
	}
	add("content_block_stop", `{"type":"content_block_stop","index":0}`)
	add("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":43,"cache_creation_input_tokens":307,"cache_read_input_tokens":51010,"output_tokens":%d}}`, events*3))
	add("message_stop", `{"type":"message_stop"}`)
	for _, e := range s.Events {
		s.Bytes = append(s.Bytes, e...)
		s.Ends = append(s.Ends, len(s.Bytes))
	}
	return s
}
