package wire

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

// recordedExchange reads the request body and the raw response of one recorded exchange.
func recordedExchange(t *testing.T, path string) (body []byte, response string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Body     json.RawMessage `json:"body"`
		Response string          `json:"response"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Body, rec.Response
}

// TestUsageBeyondTokens decodes what recorded answers bill beside their tokens: the web search
// the API ran (usage.server_tool_use), and the fast mode, US inference, server tools and
// advisor sub-inference of the billing recording.
func TestUsageBeyondTokens(t *testing.T) {
	decode := func(path string) *MessageInfo {
		_, sse := recordedExchange(t, path)
		resp := Response{Status: 200, ContentType: "text/event-stream", End: time.Now()}
		DecodeResponse(&resp, EndpointMessages, []byte(sse))
		if resp.Message == nil {
			t.Fatalf("%s: no message", path)
		}
		return resp.Message
	}
	search := decode("../../testdata/claude-code/web_search/002.json")
	if search.Usage.ServerToolUse != (ServerToolUse{WebSearch: 1}) || search.Blocks[BlockOther] != 2 || len(search.ToolUses) != 0 {
		t.Errorf("search answer: usage %+v, blocks %v, tool uses %v", search.Usage, search.Blocks, search.ToolUses)
	}
	billed := decode("../../testdata/claude-code/billing/001.json")
	want := Usage{InputTokens: 89, OutputTokens: 41, CacheCreationInputTokens: 5031, CacheCreation5m: 5031,
		ServerToolUse: ServerToolUse{WebFetch: 1, CodeExecution: 1}, Speed: "fast", InferenceGeo: "us"}
	if billed.Usage != want {
		t.Errorf("usage %+v, want %+v", billed.Usage, want)
	}
	wantIt := []Iteration{{Type: "advisor_message", Model: "claude-fable-5-2", Usage: Usage{InputTokens: 1201, OutputTokens: 307}}}
	if !reflect.DeepEqual(billed.Iterations, wantIt) {
		t.Errorf("iterations %+v, want %+v (the answer's own sampling left out)", billed.Iterations, wantIt)
	}

	body, _ := recordedExchange(t, "../../testdata/claude-code/web_search/002.json")
	b, err := ParseBody(body, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Tools.Count != 1 || b.Tools.Server != 1 {
		t.Errorf("the search request's tools: %+v, want one, the API's own", b.Tools)
	}
}
