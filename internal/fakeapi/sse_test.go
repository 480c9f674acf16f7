package fakeapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSplitText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		size int
		want []string
	}{
		{"empty", "", 16, nil},
		{"one byte", "a", 16, []string{"a"}},
		{"short text still splits", "OK", 16, []string{"O", "K"}},
		{"halves below twice the size", "abcdefgh", 16, []string{"abcd", "efgh"}},
		{"chunks of size", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"never cuts a rune", "ééé", 1, []string{"é", "é", "é"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := splitText(tc.in, tc.size)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("splitText(%q, %d) = %q, want %q", tc.in, tc.size, got, tc.want)
			}
		})
	}
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE parses an event stream, checking that each event's data names the same type.
func readSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var name string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s data: %v", name, err)
			}
			if data["type"] != name {
				t.Errorf("event %s carries type %v", name, data["type"])
			}
			out = append(out, sseEvent{name, data})
		case line == "":
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	return out
}

func TestStreamShape(t *testing.T) {
	reply := Reply{
		Text: "Some text that spans several deltas.",
		ToolCalls: []ToolCall{
			{Name: "Bash", Input: map[string]any{"command": "ls -la /tmp", "description": "List"}},
			{Name: "Read", Input: map[string]any{"file_path": "/x"}},
		},
		Pings: 2,
		Usage: Usage{InputTokens: 3, CacheReadInputTokens: 5, CacheCreationInputTokens: 7, CacheCreation1h: 7, OutputTokens: 11},
	}
	srv := New(Script{Rules: []Rule{{Name: "r", Replies: []Reply{reply}}}}, WithChunkSize(8))
	rec := httptest.NewRecorder()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages?beta=true", strings.NewReader(body)))

	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	if !rec.Flushed {
		t.Error("stream was never flushed")
	}
	events := readSSE(t, rec.Body.String())
	var names []string
	for _, e := range events {
		names = append(names, e.name)
	}
	seq := strings.Join(names, " ")
	for _, want := range []string{
		"message_start ping ping ping content_block_start content_block_delta",
		"content_block_stop ping ping content_block_start content_block_delta",
		"content_block_stop message_delta message_stop",
	} {
		if !strings.Contains(seq, want) {
			t.Errorf("event sequence %q lacks %q", seq, want)
		}
	}
	if !strings.HasSuffix(seq, "message_delta message_stop") {
		t.Errorf("sequence does not end with message_delta message_stop: %q", seq)
	}

	start := events[0].data["message"].(map[string]any)
	su := start["usage"].(map[string]any)
	if su["output_tokens"] != 1.0 || su["input_tokens"] != 3.0 || su["cache_read_input_tokens"] != 5.0 ||
		su["cache_creation"].(map[string]any)["ephemeral_1h_input_tokens"] != 7.0 {
		t.Errorf("message_start usage = %v", su)
	}

	texts := map[float64]string{}
	deltas := map[float64]int{}
	for _, e := range events {
		if e.name != "content_block_delta" {
			continue
		}
		idx := e.data["index"].(float64)
		d := e.data["delta"].(map[string]any)
		deltas[idx]++
		switch d["type"] {
		case "text_delta":
			texts[idx] += d["text"].(string)
		case "input_json_delta":
			texts[idx] += d["partial_json"].(string)
		default:
			t.Errorf("delta type %v", d["type"])
		}
	}
	if texts[0] != reply.Text || deltas[0] < 2 {
		t.Errorf("text %q over %d deltas", texts[0], deltas[0])
	}
	for i, c := range reply.ToolCalls {
		idx := float64(i + 1)
		var got map[string]any
		if err := json.Unmarshal([]byte(texts[idx]), &got); err != nil {
			t.Fatalf("tool %d input %q: %v", i, texts[idx], err)
		}
		for k, v := range c.Input {
			if got[k] != v {
				t.Errorf("tool %d input %v, want %v", i, got, c.Input)
			}
		}
		if deltas[idx] < 3 {
			t.Errorf("tool %d input over %d deltas, want several", i, deltas[idx])
		}
	}

	md := events[len(events)-2].data
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" {
		t.Errorf("message_delta = %v", md)
	}
	if mu := md["usage"].(map[string]any); mu["output_tokens"] != 11.0 || mu["cache_creation_input_tokens"] != 7.0 {
		t.Errorf("message_delta usage = %v", mu)
	}
}
