package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestSDKThroughCctrace drives the official Go SDK (anthropic-sdk-go) through cctrace serve, as
// a client other than Claude Code: two plain conversations of three prompts each, one streamed
// and one not, then a tool loop. Each human prompt is a turn of its own, with or without tools,
// and no request is taken for a side request.
func TestSDKThroughCctrace(t *testing.T) {
	jaeger := harness.StartJaeger(t)
	api := &switchableAPI{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	defer fake.Close()
	proxyPort, metricsPort := harness.FreePort(t), harness.FreePort(t)
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(metricsPort)
	serveCctrace(t, []string{
		"--listen", "127.0.0.1:" + strconv.Itoa(proxyPort),
		"--metrics-listen", "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--upstream", "http://" + ln.Addr().String(),
		"--turn-idle-timeout", "2m"},
		"OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint(),
		"OTEL_SERVICE_NAME="+service,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)
	client := anthropic.NewClient(option.WithBaseURL("http://127.0.0.1:"+strconv.Itoa(proxyPort)),
		option.WithAPIKey(apiKey), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A plain conversation: every prompt gets a text answer.
	api.install(fakeapi.New(fakeapi.Script{Name: "sdk_chat", Rules: []fakeapi.Rule{{Name: "main", Replies: []fakeapi.Reply{{
		Text: "Noted.", Usage: fakeapi.Usage{InputTokens: 23, OutputTokens: 3},
	}}}}}))
	for _, streamed := range []bool{true, false} {
		var messages []anthropic.MessageParam
		for i, prompt := range []string{"Remember the number %d.", "Add one to it (%d).", "And once more (%d)."} {
			n := 1
			if !streamed {
				n = 2
			}
			messages = append(messages, anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf(prompt, n))))
			msg, err := sdkMessage(ctx, client, messages, streamed, nil)
			if err != nil {
				t.Fatalf("prompt %d (streamed %v): %v", i+1, streamed, err)
			}
			messages = append(messages, msg.ToParam())
		}
	}

	// A tool loop: the answer asks for get_weather, the client runs it and sends its result.
	api.use(t, "sdk_tool_loop")
	tool := anthropic.ToolParam{
		Name:        fakeapi.SDKToolName,
		Description: anthropic.String("The current weather in a city."),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}},
			Required:   []string{"city"},
		},
	}
	messages := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	for round := 1; ; round++ {
		msg, err := sdkMessage(ctx, client, messages, true, []anthropic.ToolUnionParam{{OfTool: &tool}})
		if err != nil {
			t.Fatalf("tool loop, round %d: %v", round, err)
		}
		messages = append(messages, msg.ToParam())
		var results []anthropic.ContentBlockParamUnion
		for _, block := range msg.Content {
			if b, ok := block.AsAny().(anthropic.ToolUseBlock); ok {
				var in struct{ City string }
				_ = json.Unmarshal(b.Input, &in)
				results = append(results, anthropic.NewToolResultBlock(b.ID, "Sunny in "+in.City, false))
			}
		}
		if len(results) == 0 {
			break
		}
		if round == 2 {
			t.Fatal("the tool loop asked for tools after two rounds")
		}
		messages = append(messages, anthropic.NewUserMessage(results...))
	}

	chatTurn := "invoke_agent api-client [end_turn]\n  chat claude-sonnet-5-5 [turn]\n"
	want := strings.Repeat(chatTurn, 6) + `invoke_agent api-client [end_turn]
  chat claude-sonnet-5-5 [turn]
  execute_tool get_weather
  chat claude-sonnet-5-5 [tool_results]`
	traces := jaeger.WaitSpans(t, service, 6*2+4)
	sort.Slice(traces, func(i, j int) bool {
		a, _ := traces[i].Root()
		b, _ := traces[j].Root()
		return a.StartTime.Before(b.StartTime)
	})
	if got := tree(traces); got != want {
		t.Errorf("span trees:\n%s\nwant one turn per prompt:\n%s", got, want)
	}
	harness.Eventually(t, "cctrace to count one turn per prompt", func() error {
		turns := sample(t, metricsURL, "cctrace_turns_total", nil)
		side := sample(t, metricsURL, "cctrace_requests_total", map[string]string{"kind": "auxiliary"})
		if turns != 7 || side != 0 {
			return fmt.Errorf("%v turns and %v side requests, want 7 and none", turns, side)
		}
		return nil
	})
}

// sdkMessage sends messages (with tools, if any) through client, streamed or not, and returns
// the answer.
func sdkMessage(ctx context.Context, client anthropic.Client, messages []anthropic.MessageParam, streamed bool, tools []anthropic.ToolUnionParam) (anthropic.Message, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  messages,
		Tools:     tools,
	}
	if !streamed {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			return anthropic.Message{}, err
		}
		return *msg, nil
	}
	s := client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, err
		}
	}
	return msg, s.Err()
}
