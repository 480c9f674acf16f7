// Command sdk-client is a plain anthropic-sdk-go client with one tool, used to record what a
// non-Claude-Code client sends through cctrace (testdata/claude-code/sdk_tool_loop):
//
//	ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-dummy-… go run ./testdata/sdk-client
//
// It streams one request, runs the get_weather tool the answer asks for, streams the tool result
// back and prints the final text. It sends no Claude Code headers or system prompt.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sdk-client:", err)
		os.Exit(1)
	}
}

// weatherTool is the one client-side tool.
var weatherTool = anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("The current weather in a city."),
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	},
}

func run(ctx context.Context) error {
	if os.Getenv("ANTHROPIC_BASE_URL") == "" {
		return errors.New("ANTHROPIC_BASE_URL is not set: point it at cctrace-fakeapi --scenario sdk_tool_loop")
	}
	client := anthropic.NewClient()
	messages := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?")),
	}
	for round := 1; round <= 2; round++ {
		msg, err := stream(ctx, client, messages)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		messages = append(messages, msg.ToParam())
		var results []anthropic.ContentBlockParamUnion
		for _, block := range msg.Content {
			switch b := block.AsAny().(type) {
			case anthropic.TextBlock:
				fmt.Println(b.Text)
			case anthropic.ToolUseBlock:
				results = append(results, anthropic.NewToolResultBlock(b.ID, weather(b.Input), false))
			}
		}
		if len(results) == 0 {
			return nil
		}
		messages = append(messages, anthropic.NewUserMessage(results...))
	}
	return errors.New("the model still asked for tools after two rounds")
}

// stream sends one streaming request and accumulates the answer.
func stream(ctx context.Context, client anthropic.Client, messages []anthropic.MessageParam) (anthropic.Message, error) {
	s := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  messages,
		Tools:     []anthropic.ToolUnionParam{{OfTool: &weatherTool}},
	})
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, fmt.Errorf("accumulating stream: %w", err)
		}
	}
	if err := s.Err(); err != nil {
		return msg, fmt.Errorf("streaming: %w", err)
	}
	return msg, nil
}

// weather is the get_weather tool: it answers from its input alone.
func weather(input json.RawMessage) string {
	var in struct {
		City string `json:"city"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.City == "" {
		return "unknown city"
	}
	return "Sunny, 21 °C in " + strings.TrimSpace(in.City)
}
