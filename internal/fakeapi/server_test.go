package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is a dummy credential; no recording or Served entry may contain it.
const testKey = "sk-ant-test-secret-marker"

// start serves s on a loopback test server, stopped at the end of the test.
func start(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func newClient(ts *httptest.Server) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(ts.URL),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(ts.Client()),
	)
}

func userParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-test-1"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

var (
	textReply = Reply{
		Text:  "Hello from the fake API, in several pieces.",
		Usage: Usage{InputTokens: 11, CacheReadInputTokens: 2000, CacheCreationInputTokens: 300, CacheCreation5m: 200, CacheCreation1h: 100, OutputTokens: 17},
	}
	toolReply = Reply{
		Text: "Running two tools.",
		ToolCalls: []ToolCall{
			{ID: "toolu_given", Name: "Bash", Input: map[string]any{"command": "echo hi", "description": "Say hi"}},
			{Name: "Read", Input: map[string]any{"file_path": "/etc/hostname"}},
		},
		Usage: Usage{InputTokens: 5, CacheCreationInputTokens: 700, CacheCreation5m: 700, OutputTokens: 42},
	}
)

// toolInputs returns the decoded tool inputs of a message, by tool name.
func checkMessage(t *testing.T, msg *anthropic.Message, want Reply) {
	t.Helper()
	var text strings.Builder
	var tools []anthropic.ContentBlockUnion
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			tools = append(tools, b)
		default:
			t.Errorf("unexpected block type %q", b.Type)
		}
	}
	if text.String() != want.Text {
		t.Errorf("text = %q, want %q", text.String(), want.Text)
	}
	if string(msg.StopReason) != want.stopReason() {
		t.Errorf("stop_reason = %q, want %q", msg.StopReason, want.stopReason())
	}
	if !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("id = %q, want msg_ prefix", msg.ID)
	}
	u := msg.Usage
	got := Usage{
		InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens),
		CacheReadInputTokens: int(u.CacheReadInputTokens), CacheCreationInputTokens: int(u.CacheCreationInputTokens),
		CacheCreation5m: int(u.CacheCreation.Ephemeral5mInputTokens), CacheCreation1h: int(u.CacheCreation.Ephemeral1hInputTokens),
	}
	if got != want.Usage {
		t.Errorf("usage = %+v, want %+v", got, want.Usage)
	}
	if len(tools) != len(want.ToolCalls) {
		t.Fatalf("got %d tool calls, want %d", len(tools), len(want.ToolCalls))
	}
	for i, c := range want.ToolCalls {
		if tools[i].Name != c.Name {
			t.Errorf("tool %d name = %q, want %q", i, tools[i].Name, c.Name)
		}
		if c.ID != "" && tools[i].ID != c.ID {
			t.Errorf("tool %d id = %q, want %q", i, tools[i].ID, c.ID)
		}
		if !strings.HasPrefix(tools[i].ID, "toolu_") {
			t.Errorf("tool %d id = %q, want toolu_ prefix", i, tools[i].ID)
		}
		var input map[string]any
		if err := json.Unmarshal(tools[i].Input, &input); err != nil {
			t.Fatalf("tool %d input %s: %v", i, tools[i].Input, err)
		}
		for k, v := range c.Input {
			if input[k] != v {
				t.Errorf("tool %d input[%s] = %v, want %v", i, k, input[k], v)
			}
		}
	}
}

func TestMessagesThroughSDK(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  Reply
		stream bool
	}{
		{"text streamed", textReply, true},
		{"text json", textReply, false},
		{"tools streamed", toolReply, true},
		{"tools json", toolReply, false},
		{"explicit stop reason", Reply{Text: "cut", StopReason: "max_tokens", Usage: Usage{OutputTokens: 9}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(Script{Rules: []Rule{{Name: "only", Replies: []Reply{tc.reply}}}})
			client := newClient(start(t, srv))
			var msg *anthropic.Message
			if tc.stream {
				stream := client.Messages.NewStreaming(context.Background(), userParams("hi"))
				acc := anthropic.Message{}
				for stream.Next() {
					if err := acc.Accumulate(stream.Current()); err != nil {
						t.Fatalf("accumulating: %v", err)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				if err := stream.Close(); err != nil {
					t.Fatalf("closing stream: %v", err)
				}
				msg = &acc
			} else {
				var err error
				if msg, err = client.Messages.New(context.Background(), userParams("hi")); err != nil {
					t.Fatalf("New: %v", err)
				}
			}
			checkMessage(t, msg, tc.reply)
			if string(msg.Model) != "claude-test-1" {
				t.Errorf("model = %q, want the request's", msg.Model)
			}
			served := srv.Served()
			if len(served) != 1 {
				t.Fatalf("served %d, want 1", len(served))
			}
			sv := served[0]
			if sv.Rule != "only" || sv.Status != 200 || sv.Stream != tc.stream || sv.Model != "claude-test-1" || sv.Usage != tc.reply.Usage {
				t.Errorf("served = %+v", sv)
			}
			if got := srv.TotalUsage(); got != tc.reply.Usage {
				t.Errorf("TotalUsage = %+v, want %+v", got, tc.reply.Usage)
			}
			if sv.Header.Get("X-Api-Key") != "" {
				t.Error("Served kept the x-api-key header")
			}
		})
	}
}

func TestErrorsThroughSDK(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reply      Reply
		stream     bool
		wantStatus int
		wantType   string
	}{
		{"overloaded", Reply{Status: 529}, true, 529, "overloaded_error"},
		{"rate limited", Reply{Status: 429, RetryAfter: 2 * time.Second}, false, 429, "rate_limit_error"},
		{"server error", Reply{Status: 500, ErrorMessage: "boom"}, true, 500, "api_error"},
		{"stream error on a json request", Reply{StreamError: "overloaded_error"}, false, 529, "overloaded_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(Script{Rules: []Rule{{Name: "err", Replies: []Reply{tc.reply}}}})
			client := newClient(start(t, srv))
			var err error
			if tc.stream {
				stream := client.Messages.NewStreaming(context.Background(), userParams("hi"))
				for stream.Next() {
					t.Errorf("unexpected event %s", stream.Current().Type)
				}
				err = stream.Err()
				_ = stream.Close()
			} else {
				_, err = client.Messages.New(context.Background(), userParams("hi"))
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			if apiErr.StatusCode != tc.wantStatus || string(apiErr.Type()) != tc.wantType {
				t.Errorf("status %d type %q, want %d %q", apiErr.StatusCode, apiErr.Type(), tc.wantStatus, tc.wantType)
			}
			if apiErr.RequestID != "req_fake0000000000000001" {
				t.Errorf("request id = %q", apiErr.RequestID)
			}
			if tc.reply.RetryAfter > 0 && apiErr.Response.Header.Get("retry-after") != "2" {
				t.Errorf("retry-after = %q", apiErr.Response.Header.Get("retry-after"))
			}
			sv := srv.Served()[0]
			if sv.Status != tc.wantStatus || sv.ErrorType != tc.wantType || sv.Usage != (Usage{}) {
				t.Errorf("served = %+v", sv)
			}
		})
	}
}

func TestMidStreamErrorThroughSDK(t *testing.T) {
	reply := Reply{Text: "partial answer", StreamError: "overloaded_error", Usage: Usage{InputTokens: 7, OutputTokens: 99}}
	srv := New(Script{Rules: []Rule{{Name: "broken", Replies: []Reply{reply}}}})
	client := newClient(start(t, srv))
	stream := client.Messages.NewStreaming(context.Background(), userParams("hi"))
	acc := anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulating: %v", err)
		}
	}
	if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "overloaded_error") {
		t.Errorf("stream err = %v, want an overloaded_error", stream.Err())
	}
	_ = stream.Close()
	if len(acc.Content) != 1 || acc.Content[0].Text != "partial answer" {
		t.Errorf("content before the error = %+v", acc.Content)
	}
	sv := srv.Served()[0]
	if sv.Status != 200 || sv.ErrorType != "overloaded_error" || sv.Usage != (Usage{InputTokens: 7, OutputTokens: 1}) {
		t.Errorf("served = %+v", sv)
	}
}

func TestCountTokensAndUnknownPaths(t *testing.T) {
	srv := New(Script{})
	ts := start(t, srv)
	client := newClient(ts)
	count, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    anthropic.Model("claude-test-1"),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))},
	})
	if err != nil {
		t.Fatalf("CountTokens: %v", err)
	}
	if count.InputTokens <= 0 {
		t.Errorf("input_tokens = %d, want > 0", count.InputTokens)
	}

	for _, tc := range []struct{ method, path string }{
		{http.MethodHead, "/api/hello"},
		{http.MethodGet, "/v1/models"},
		{http.MethodGet, "/v1/messages"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || resp.Header.Get("request-id") == "" {
				t.Errorf("status %d request-id %q", resp.StatusCode, resp.Header.Get("request-id"))
			}
			if tc.method == http.MethodGet && !strings.Contains(string(body), `"not_found_error"`) {
				t.Errorf("body = %s", body)
			}
		})
	}
	rules := []string{}
	for _, sv := range srv.Served() {
		rules = append(rules, sv.Rule)
	}
	if got, want := strings.Join(rules, ","), "count_tokens,not_found,not_found,not_found"; got != want {
		t.Errorf("rules = %s, want %s", got, want)
	}
}

func TestClientGoneStopsSlowStream(t *testing.T) {
	// After message_start and the first ping the handler pauses ten minutes before the next
	// ping: only noticing the client leave lets it return in time.
	reply := Reply{Text: "slow", Pings: 1, PingEvery: 10 * time.Minute}
	srv := New(Script{Rules: []Rule{{Name: "slow", Replies: []Reply{reply}}}})
	ts := start(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/messages",
		strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: ping" {
	}
	cancel()
	resp.Body.Close()
	done := make(chan struct{})
	go func() { ts.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(harness.Patience):
		t.Fatal("the handler kept streaming after the client went away")
	}
}
