package instrument

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// hostileBody builds a request body of n repetitions of a JSON fragment, wrapped as messages.
func hostileBody(tools, messages string) []byte {
	return []byte(`{"model":"claude-sonnet-4-6","stream":true,"max_tokens":10,"tools":[` + tools + `],"messages":[` + messages + `]}`)
}

func repeatJoin(s string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(s, i)
	}
	return strings.Join(parts, ",")
}

// TestHostileInput decodes hostile request bodies and feeds them, with hostile responses, to the
// tracker: deep nesting, huge strings, thousands of blocks and tools, unknown roles and block
// types, duplicated tool ids, results for ids nobody asked for. Each must be parsed or skipped
// without a panic, and the tracker must keep only a bounded amount of it.
func TestHostileInput(t *testing.T) {
	huge := strings.Repeat("x", 64<<20)
	bash := `{"name":"Bash","input_schema":{"type":"object"}}`
	tests := []struct {
		name string
		body []byte
	}{
		{"deep nesting in content", hostileBody(bash, `{"role":"user","content":`+strings.Repeat(`[{"type":"text","text":`, 200_000)+`"x"`+strings.Repeat(`}]`, 200_000)+`}`)},
		{"deep nesting in an unknown field", hostileBody(bash, `{"role":"user","content":"hi","extra":`+strings.Repeat(`{"a":`, 500_000)+`1`+strings.Repeat(`}`, 500_000)+`}`)},
		{"unbalanced nesting", hostileBody(bash, `{"role":"user","content":`+strings.Repeat(`[`, 1_000_000))},
		{"huge prompt", hostileBody(bash, `{"role":"user","content":"`+huge+`"}`)},
		{"huge tool result", hostileBody(bash, `{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"`+huge+`"}]}`)},
		{"20000 content blocks", hostileBody(bash, `{"role":"user","content":[`+repeatJoin(`{"type":"text","text":"block %d"}`, 20_000)+`]}`)},
		{"5000 tools", hostileBody(repeatJoin(`{"name":"tool_%d","input_schema":{}}`, 5000), `{"role":"user","content":"hi"}`)},
		{"unknown roles and block types", hostileBody(bash, `{"role":"developer","content":"x"},{"role":"tool","content":[{"type":"hologram","data":[1,2]}]},{"role":42,"content":null},{"role":"user","content":[{"type":"mystery"},{"type":"text","text":"hi"}]}`)},
		{"duplicated tool ids and unknown results", hostileBody(bash, `{"role":"user","content":"go"},{"role":"assistant","content":[`+repeatJoin(`{"type":"tool_use","id":"same","name":"Bash","input":{"i":%d}}`, 3000)+`]},{"role":"user","content":[`+repeatJoin(`{"type":"tool_result","tool_use_id":"unknown_%d","content":"r"}`, 3000)+`,{"type":"tool_result","tool_use_id":"same","content":"r"},{"type":"tool_result","tool_use_id":"same","content":"again"}]}`)},
		{"wrong types everywhere", []byte(`{"model":7,"stream":"yes","tools":{"a":1},"messages":{"role":"user"},"system":[1,2,{"text":5}],"metadata":{"user_id":{"x":1}}}`)},
	}
	before := heapAlloc()
	c := newConvo(t, WithMaxSessions(4))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := wire.ParseBody(tt.body, "")
			req := &wire.Request{Method: "POST", Path: "/v1/messages", Endpoint: wire.EndpointMessages, Body: body,
				Headers: wire.Headers{SessionID: fmt.Sprintf("hostile-%d", i%3)}}
			if err != nil {
				req.ParseError = err.Error()
			}
			id := c.sendReq(req)
			// A response asking for thousands of tools, most with one id.
			uses := make([]wire.ToolUse, 3000)
			for j := range uses {
				uses[j] = tool(fmt.Sprintf("dup_%d", j%3), "Bash")
				uses[j].Input = huge[:wire.PreviewLimit]
			}
			c.reply(id, "tool_use", usage(1, 1, 0, 0), uses...)
		})
	}
	huge = ""
	tests = nil
	after := heapAlloc()
	held := after - min(before, after)
	if held > 16<<20 {
		t.Errorf("the tracker holds %d MiB after hostile input", held>>20)
	}
	c.tick(time.Hour)
	c.tr.Close(c.now)
	checkClosed(t, c)
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
