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

// searchCall is one web search the API runs, with one result.
func searchCall() ServerToolCall {
	return ServerToolCall{
		Name:       "web_search",
		Input:      map[string]any{"query": WebSearchQuery},
		ResultType: "web_search_tool_result",
		Results: []map[string]any{{
			"type": "web_search_result", "url": "https://example.com/cctrace", "title": "cctrace",
			"encrypted_content": "ZmFrZS1zZWFyY2gtcmVzdWx0", "page_age": "1 day ago",
		}},
	}
}

func init() {
	for name, f := range toolScenarios {
		scenarios[name] = f
	}
}

var toolScenarios = map[string]func() Script{
	// WebSearch: the main agent calls it, Claude Code sends a search request of its own (only the
	// web_search server tool), the API runs one search, and the result goes back as the tool's.
	"web_search": func() Script {
		searched := usage(2111, 0, 0, 83)
		searched.WebSearchRequests = 1
		return withCommon("web_search",
			Rule{Name: "search", Match: HasTool("web_search"), Replies: []Reply{{
				ServerTools: []ServerToolCall{searchCall()},
				Text:        "cctrace is a proxy that traces Claude Code.",
				Usage:       searched,
			}}},
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The search says cctrace traces Claude Code.", Usage: usage(71, 5011, 389, 19),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "WebSearch", Input: map[string]any{"query": WebSearchQuery}}},
				Usage:     usage(67, 0, 5011, 47),
			}}},
		)
	},
	// As web_search, but the search request's first answer pauses (pause_turn) after one search,
	// and Claude Code resumes it: a second search and the text.
	"web_search_pause": func() Script {
		first := usage(2113, 0, 0, 61)
		first.WebSearchRequests = 1
		second := usage(2297, 0, 0, 79)
		second.WebSearchRequests = 1
		return withCommon("web_search_pause",
			Rule{Name: "search", Match: HasTool("web_search"), Replies: []Reply{
				{ServerTools: []ServerToolCall{searchCall()}, StopReason: "pause_turn", Usage: first},
				{ServerTools: []ServerToolCall{searchCall()}, Text: "cctrace traces Claude Code.", Usage: second},
			}},
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "Two searches say cctrace traces Claude Code.", Usage: usage(73, 5017, 397, 21),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "WebSearch", Input: map[string]any{"query": WebSearchQuery}}},
				Usage:     usage(69, 0, 5017, 49),
			}}},
		)
	},
	// WebFetch: the main agent calls it on PageURL (the page server's, WithPageURL), Claude Code
	// fetches the page and asks a small model about it (page_summary, a common rule), and the
	// answer goes back as the tool's result.
	"web_fetch": func() Script {
		return withCommon("web_fetch",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The page carries its marker.", Usage: usage(79, 5021, 401, 17),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "WebFetch", Input: map[string]any{"url": PageURL, "prompt": WebFetchPrompt}}},
				Usage:     usage(73, 0, 5021, 53),
			}}},
		)
	},
	// A foreground subagent whose answer calls WebSearch: the search request is the subagent's
	// tool's, whatever marks the CLI puts on it.
	"subagent_web_search": func() Script {
		searched := usage(2131, 0, 0, 71)
		searched.WebSearchRequests = 1
		return withCommon("subagent_web_search",
			Rule{Name: "search", Match: HasTool("web_search"), Replies: []Reply{{
				ServerTools: []ServerToolCall{searchCall()},
				Text:        "cctrace is a proxy that traces Claude Code.",
				Usage:       searched,
			}}},
			Rule{Name: "subagent_result", Match: All(IsSubagent, HasToolResults), Replies: []Reply{{
				Text: "The search says cctrace traces Claude Code.", Usage: usage(63, 3211, 117, 25),
			}}},
			Rule{Name: "subagent", Match: IsSubagent, Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "WebSearch", Input: map[string]any{"query": WebSearchQuery}}},
				Usage:     usage(61, 0, 3113, 45),
			}}},
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The subagent found that cctrace traces Claude Code.", Usage: usage(69, 5213, 409, 27),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "I'll delegate the search.",
				ToolCalls: []ToolCall{{Name: "Agent", Input: map[string]any{
					"description": "Search the web", "prompt": "Search the web for " + WebSearchQuery + " and report what you find.",
					"subagent_type": "general-purpose", "run_in_background": false,
				}}},
				Usage: usage(73, 0, 5007, 81),
			}}},
		)
	},
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
