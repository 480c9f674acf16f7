package fakeapi

// Scenarios of tools that make API requests of their own, and of answers that bill more than
// tokens.

// WebSearchQuery is what the web_search scenarios search for.
const WebSearchQuery = "cctrace fake search"

// PageSummaryPrefix starts the user text of WebFetch's request about the page it fetched.
const PageSummaryPrefix = "Web page content:"

// WebFetchPrompt is what the web_fetch scenario asks WebFetch about the page.
const WebFetchPrompt = "What marker does the page carry?"

// SlowCommand is the Bash command of the slow_tool scenario: long enough to restart cctrace
// while it runs.
const SlowCommand = "sleep 6 && echo slow-tool-done"

func init() {
	for name, f := range toolScenarios {
		scenarios[name] = f
	}
}

var toolScenarios = map[string]func() Script{
	// One Bash call that takes a few seconds (a restart of cctrace fits in it), then end_turn.
	"slow_tool": func() Script {
		return withCommon("slow_tool",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The command printed slow-tool-done.", Usage: usage(83, 5027, 409, 15),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
					"command": SlowCommand, "description": "Wait, then print a marker",
				}}},
				Usage: usage(79, 0, 5027, 51),
			}}},
		)
	},
	// A plain answer whose usage bills more than tokens: fast mode, inference in the US, a web
	// fetch and a code execution run by the API, and an advisor's sub-inference on another model.
	"billing": func() Script {
		u := usage(89, 0, 5031, 41)
		u.Speed, u.InferenceGeo = "fast", "us"
		u.WebFetchRequests, u.CodeExecutionRequests = 1, 1
		return withCommon("billing",
			Rule{Name: "main", Replies: []Reply{{
				Text:  "An answer that cost more than its tokens.",
				Usage: u,
				Iterations: []Iteration{
					{Type: "message", Model: "claude-opus-5-5", InputTokens: 89, OutputTokens: 41, CacheCreationInputTokens: 5031},
					{Type: "advisor_message", Model: "claude-fable-5-2", InputTokens: 1201, OutputTokens: 307},
				},
			}}},
		)
	},
}
