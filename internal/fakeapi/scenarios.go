package fakeapi

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Usage of the shared rules. Every scenario numbers its own replies differently, so that a total
// identifies which replies were summed.
var (
	titleUsage = Usage{InputTokens: 151, OutputTokens: 11}
	sideUsage  = Usage{InputTokens: 53, OutputTokens: 3}
	// pageSummaryUsage answers WebFetch's request about the page it fetched.
	pageSummaryUsage = Usage{InputTokens: 419, OutputTokens: 23}
	compactionUsage  = Usage{InputTokens: 37, CacheReadInputTokens: 9001, OutputTokens: 401}
	defaultUsage     = Usage{InputTokens: 13, OutputTokens: 2}
	// notificationUsage answers the main chain's request that carries a background task's
	// completion notice.
	notificationUsage = Usage{InputTokens: 41, CacheReadInputTokens: 5303, OutputTokens: 7}
)

// MissingFile is the path the parallel_tools scenario asks Claude Code to Read; it must not exist,
// so that the tool_result comes back with is_error.
const MissingFile = "/tmp/cctrace-fakeapi-missing/does-not-exist.txt"

// SubagentPrompt is the prompt the subagent scenario passes to the Agent tool; the subagent's
// first request carries it as its human text.
const SubagentPrompt = "Run `echo from-subagent` with the Bash tool and report what it printed."

// CompactionSummary is the summary the compaction rule answers with.
const CompactionSummary = "<analysis>The user asked for a short check; it is done.</analysis>\n" +
	"<summary>1. Primary Request and Intent: the user asked a short question, answered in full.\n" +
	"2. Pending Tasks: none.</summary>"

// usage builds a Usage whose cache writes all have the 5-minute TTL.
func usage(in, cacheRead, cacheWrite, out int) Usage {
	return Usage{
		InputTokens: in, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite,
		CacheCreation5m: cacheWrite, OutputTokens: out,
	}
}

// withCommon adds the rules every scenario shares around its own: session titles and other
// tool-less side requests first, compaction summaries next, then the scenario's rules.
func withCommon(name string, rules ...Rule) Script {
	common := []Rule{
		{Name: "title", Match: IsTitle, Replies: []Reply{{
			Text: `{"title":"Fake ` + name + ` session"}`, Usage: titleUsage,
		}}},
		// WebFetch's own request about the page it fetched, on a small model, without tools.
		{Name: "page_summary", Match: lastUserSays(PageSummaryPrefix), Replies: []Reply{{
			Text: "The page carries the marker " + PageMarker + ".", Usage: pageSummaryUsage,
		}}},
		{Name: "side", Match: IsSide, Replies: []Reply{{Text: "OK", Usage: sideUsage}}},
		{Name: "compaction", Match: IsCompaction, Replies: []Reply{{
			Text: CompactionSummary, Usage: compactionUsage,
		}}},
		{Name: "task_notification", Match: IsTaskNotification, Replies: []Reply{{
			Text: "The background agent finished.", Usage: notificationUsage,
		}}},
	}
	return Script{
		Name:    name,
		Rules:   append(common, rules...),
		Default: Reply{Text: "OK.", Usage: defaultUsage},
	}
}

var scenarios = map[string]func() Script{
	// One Bash call, then end_turn.
	"tool_roundtrip": func() Script {
		return withCommon("tool_roundtrip",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The command printed hello-from-fakeapi.", Usage: usage(31, 5003, 211, 17),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "I'll run it.",
				ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
					"command": "echo hello-from-fakeapi", "description": "Print a greeting",
				}}},
				Usage: usage(23, 0, 4801, 41),
			}}},
		)
	},
	// Three parallel calls; the Read of MissingFile fails on the client side.
	"parallel_tools": func() Script {
		return withCommon("parallel_tools",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "Two calls worked and the Read failed.", Usage: usage(43, 5101, 307, 19),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{
					{Name: "Bash", Input: map[string]any{"command": "echo parallel-one", "description": "Print one"}},
					{Name: "Read", Input: map[string]any{"file_path": MissingFile}},
					{Name: "Bash", Input: map[string]any{"command": "echo parallel-three", "description": "Print three"}},
				},
				Usage: usage(29, 0, 4903, 97),
			}}},
		)
	},
	// The main agent calls Agent in the foreground; the subagent runs one Bash call and reports;
	// the parent ends.
	"subagent": func() Script { return subagentScript("subagent", false) },
	// As subagent, but the Agent call leaves run_in_background unset, which Claude Code 2.1.328
	// runs in the background: the parent ends its turn first, then gets a task notification.
	"subagent_background": func() Script { return subagentScript("subagent_background", true) },
	// For interactive sessions: a Bash call that changes the file system, so that auto mode's
	// permission classifier has something to judge, then end_turn.
	"interactive": func() Script {
		return withCommon("interactive",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "Created the marker file.", Usage: usage(47, 5303, 223, 13),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
					"command": "touch cctrace-fakeapi-marker.txt", "description": "Create a marker file",
				}}},
				Usage: usage(37, 0, 4909, 53),
			}}},
		)
	},
	// The turn's first two attempts get 529 overloaded_error, the third succeeds.
	"retry_529": func() Script {
		return withCommon("retry_529",
			Rule{Name: "main", Replies: []Reply{
				{Status: 529},
				{Status: 529},
				{Text: "Answered after two retries.", Usage: usage(19, 0, 4507, 13)},
			}},
		)
	},
	// Plain answers; compaction requests (/compact) get CompactionSummary.
	"compaction": func() Script {
		return withCommon("compaction",
			Rule{Name: "main", Replies: []Reply{{
				Text: "Noted: the word is pineapple.", Usage: usage(17, 4001, 203, 11),
			}}},
		)
	},
	// A plain answer; titles and other side requests are answered by the common rules.
	"side_request": func() Script {
		return withCommon("side_request",
			Rule{Name: "main", Replies: []Reply{{
				Text: "Here is a plain answer.", Usage: usage(21, 0, 4409, 9),
			}}},
		)
	},
	// A slow answer kept alive with pings: three pings one second apart, then slow deltas.
	"slow_pings": func() Script {
		return withCommon("slow_pings",
			Rule{Name: "main", Replies: []Reply{{
				Text:       "This answer took its time to arrive.",
				Usage:      usage(27, 0, 4603, 15),
				Pings:      3,
				PingEvery:  time.Second,
				ChunkDelay: 100 * time.Millisecond,
			}}},
		)
	},
	// The first answer streams a whole text block and starts a Bash call, then the stream breaks
	// with an overloaded_error event. Claude Code does not resend the request: it keeps the text,
	// drops the cut call and asks the model to resume; the resumed answer runs the call.
	"stream_cut": func() Script {
		bash := ToolCall{Name: "Bash", Input: map[string]any{
			"command": "echo resumed-after-cut", "description": "Print a marker",
		}}
		return withCommon("stream_cut",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The command printed resumed-after-cut.", Usage: usage(79, 5711, 233, 21),
			}}},
			Rule{Name: "resume", Match: lastUserSays(CutOffResume), Replies: []Reply{{
				ToolCalls: []ToolCall{bash}, Usage: usage(83, 5701, 151, 57),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text:        "Let me print a marker first.",
				ToolCalls:   []ToolCall{bash},
				StreamError: "overloaded_error",
				Usage:       usage(73, 0, 5701, 0),
			}}},
		)
	},
	// The first attempt's stream breaks with an overloaded_error event; the retry succeeds.
	"midstream_error": func() Script {
		return withCommon("midstream_error",
			Rule{Name: "main", Replies: []Reply{
				{Text: "This answer will be cut", StreamError: "overloaded_error", Usage: usage(33, 0, 4703, 0)},
				{Text: "Answered after a broken stream.", Usage: usage(35, 0, 4703, 14)},
			}},
		)
	},
}

// ScenarioNames lists the named scenarios, sorted.
func ScenarioNames() []string {
	return slices.Sorted(maps.Keys(scenarios))
}

// Scenario returns a fresh copy of the named script.
func Scenario(name string) (Script, error) {
	f, ok := scenarios[name]
	if !ok {
		return Script{}, fmt.Errorf("unknown scenario %q (known: %v)", name, ScenarioNames())
	}
	return f(), nil
}

// subagentScript is the subagent scenario; background leaves run_in_background unset.
func subagentScript(name string, background bool) Script {
	input := map[string]any{
		"description":   "Echo a marker",
		"prompt":        SubagentPrompt,
		"subagent_type": "general-purpose",
	}
	if !background {
		input["run_in_background"] = false
	}
	return withCommon(name,
		Rule{Name: "subagent_result", Match: All(IsSubagent, HasToolResults), Replies: []Reply{{
			Text: "The command printed from-subagent.", Usage: usage(61, 3203, 113, 23),
		}}},
		Rule{Name: "subagent", Match: IsSubagent, Replies: []Reply{{
			ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
				"command": "echo from-subagent", "description": "Print a marker",
			}}},
			Usage: usage(59, 0, 3109, 47),
		}}},
		Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
			Text: "The subagent reported from-subagent.", Usage: usage(67, 5209, 401, 29),
		}}},
		Rule{Name: "main", Replies: []Reply{{
			Text:      "I'll delegate this.",
			ToolCalls: []ToolCall{{Name: "Agent", Input: input}},
			Usage:     usage(71, 0, 5003, 83),
		}}},
	)
}
