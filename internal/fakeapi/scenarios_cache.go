package fakeapi

import "fmt"

// Scenarios whose input counts come from the fake's prompt cache (Script.PromptCache): a
// session that goes on with another model, one that goes on with another tool list, and a long
// session of several turns of tool calls.

func init() {
	for name, f := range cacheScenarios {
		scenarios[name] = f
	}
}

// LongSessionTurns and LongSessionCalls shape the long_session scenario: turns of that many
// Bash calls each, every call printing more lines than the one before.
const (
	LongSessionTurns = 3
	LongSessionCalls = 8
)

var cacheScenarios = map[string]func() Script{
	// Plain answers: the CLI is run again with --continue and another --model, whose first
	// request finds nothing cached for that model.
	"cache_model_change": func() Script { return cached("cache_model_change") },
	// Plain answers: the CLI is run again with --continue and fewer tools (--tools), whose first
	// request's tool definitions differ.
	"cache_tools_change": func() Script { return cached("cache_tools_change") },
	// LongSessionTurns turns (one CLI run each, then --continue) of LongSessionCalls Bash calls
	// and a final answer.
	"long_session": func() Script {
		var replies []Reply
		lines := 50
		for turn := 1; turn <= LongSessionTurns; turn++ {
			for call := 1; call <= LongSessionCalls; call++ {
				replies = append(replies, Reply{
					Text: fmt.Sprintf("Step %d of turn %d: counting to %d.", call, turn, lines),
					ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
						"command": fmt.Sprintf("seq 1 %d", lines), "description": "Count",
					}}},
					Usage: Usage{OutputTokens: 40 + call},
				})
				lines += 150
			}
			replies = append(replies, Reply{Text: fmt.Sprintf("Turn %d is done.", turn), Usage: Usage{OutputTokens: 9}})
		}
		s := withCommon("long_session", Rule{Name: "main", Replies: replies})
		s.PromptCache = true
		return s
	},
}

// cached is a script of plain answers with the prompt cache on.
func cached(name string) Script {
	s := withCommon(name, Rule{Name: "main", Replies: []Reply{{Text: "Noted.", Usage: Usage{OutputTokens: 3}}}})
	s.PromptCache = true
	return s
}
