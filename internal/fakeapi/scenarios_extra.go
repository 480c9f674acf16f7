package fakeapi

import (
	"strings"
	"time"
)

// Prompts that steer the extra scenarios: a rule matches when the human text of the last user
// message contains one of them, so an interactive recording can pick the reply by what it types.
const (
	// SlowStreamPrompt asks the interrupted scenario for a stream slow enough to press Escape in.
	SlowStreamPrompt = "Tell me a slow story."
	// SlowToolPrompt asks the interrupted scenario for a Bash call that sleeps.
	SlowToolPrompt = "Run a slow command."
	// PlainPrompt asks the interrupted scenario for a plain answer. After an interrupted tool
	// call Claude Code sends it in the same user message as the tool's error result.
	PlainPrompt = "Just answer plainly."
)

// CutOffResume starts the user text Claude Code sends after a stream was cut mid-way, asking the
// model to resume from where the kept part of its answer stops.
const CutOffResume = "Your response above was cut off mid-stream."

// ParallelPromptA and ParallelPromptB are the prompts of the two subagents the
// parallel_subagents scenario starts at once.
const (
	ParallelPromptA = "Run `echo from-subagent-a` with the Bash tool and report what it printed."
	ParallelPromptB = "Read the file " + MissingFile + " with the Read tool and report what it says."
)

// OutputLimitResume starts the user text Claude Code sends after an answer ran out of output
// tokens.
const OutputLimitResume = "Output token limit hit"

// StopHookFeedback is in the user text Claude Code sends when a Stop hook blocks the end of a
// turn.
const StopHookFeedback = "Stop hook"

// SlowToolCommand is the Bash command the interrupted scenario asks for; the user interrupts it.
const SlowToolCommand = "timeout 30 tail -f /dev/null"

// nearFullUsage reports a context close to a 200k-token window, which makes Claude Code compact
// on its own before its next request.
var nearFullUsage = usage(3, 188000, 1500, 59)

// SDKToolName is the client-side tool of the sdk_tool_loop scenario.
const SDKToolName = "get_weather"

// firstUserSays matches requests whose first user message has a text block containing s: for a
// subagent, the prompt of the Agent call that started it.
func firstUserSays(s string) Matcher {
	return func(r *Request) bool {
		for _, m := range r.Messages {
			if m.Role != "user" {
				continue
			}
			for _, t := range m.Texts {
				if strings.Contains(t, s) {
					return true
				}
			}
			return false
		}
		return false
	}
}

// lastUserSays matches requests whose last user or assistant message is a user message with a
// text block containing s.
func lastUserSays(s string) Matcher {
	return func(r *Request) bool {
		m := r.Last()
		if m == nil || m.Role != "user" {
			return false
		}
		for _, t := range m.Texts {
			if strings.Contains(t, s) {
				return true
			}
		}
		return false
	}
}

func init() {
	for name, f := range extraScenarios {
		scenarios[name] = f
	}
}

var extraScenarios = map[string]func() Script{
	// The first answer calls Bash and reports a context close to the window, so Claude Code
	// compacts on its own before sending the tool result; every later answer is small.
	"auto_compaction": func() Script {
		return withCommon("auto_compaction",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{
				{Status: 400, ErrorMessage: "prompt is too long: 1012345 tokens > 1000000 maximum"},
				{Text: "The command printed auto-compaction.", Usage: usage(29, 2003, 307, 12)},
			}},
			Rule{Name: "main", Replies: []Reply{
				{
					Text: "I'll run it.",
					ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
						"command": "echo auto-compaction", "description": "Print a marker",
					}}},
					Usage: nearFullUsage,
				},
				{Text: "Still here after the compaction.", Usage: usage(31, 2011, 211, 8)},
			}},
		)
	},
	// For an interactive session the user interrupts twice: SlowStreamPrompt gets a stream that
	// takes about 8 s (12 s at 7 bytes a delta), SlowToolPrompt a Bash call that waits 30 s, PlainPrompt a plain
	// answer.
	"interrupted": func() Script {
		return withCommon("interrupted",
			Rule{Name: "slow_stream", Match: lastUserSays(SlowStreamPrompt), Replies: []Reply{{
				Text:       "Once upon a time a proxy watched every byte go by.",
				Usage:      usage(43, 0, 5011, 29),
				Pings:      4,
				PingEvery:  time.Second,
				ChunkDelay: time.Second,
			}}},
			Rule{Name: "slow_tool", Match: lastUserSays(SlowToolPrompt), Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
					"command": SlowToolCommand, "description": "Wait a while",
				}}},
				Usage: usage(47, 5011, 97, 43),
			}}},
			Rule{Name: "main", Match: lastUserSays(PlainPrompt), Replies: []Reply{{
				Text: "Fine, a plain answer then.", Usage: usage(59, 5107, 173, 9),
			}}},
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The command finished.", Usage: usage(53, 5407, 131, 7),
			}}},
		)
	},
	// A plain anthropic-sdk-go client with one tool: get_weather, then a text answer.
	"sdk_tool_loop": func() Script {
		return withCommon("sdk_tool_loop",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "It is sunny in Paris.", Usage: usage(73, 0, 0, 9),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: SDKToolName, Input: map[string]any{"city": "Paris"}}},
				Usage:     usage(61, 0, 0, 37),
			}}},
		)
	},
	// The first answer runs out of output tokens (stop_reason max_tokens); Claude Code asks the
	// model to go on, and the second answer ends the turn.
	"output_limit": func() Script {
		return withCommon("output_limit",
			Rule{Name: "resume", Match: lastUserSays(OutputLimitResume), Replies: []Reply{{
				Text: "and that is the end of it.", Usage: usage(89, 5801, 127, 9),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "Here is the first half of a long answer", StopReason: "max_tokens",
				Usage: usage(87, 0, 5801, 64),
			}}},
		)
	},
	// A Stop hook (set up by record.sh) blocks the first end of the turn; Claude Code sends its
	// feedback to the model, whose second answer ends the turn.
	"stop_hook": func() Script {
		return withCommon("stop_hook",
			Rule{Name: "hook", Match: lastUserSays(StopHookFeedback), Replies: []Reply{{
				Text: "Goodbye, as the hook asked.", Usage: usage(97, 5903, 139, 8),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "Here is a plain answer.", Usage: usage(93, 0, 5903, 7),
			}}},
		)
	},
	// One answer starts two subagents in parallel: one runs Bash, the other Reads MissingFile,
	// which fails; each reports, then the parent ends.
	"parallel_subagents": func() Script {
		agent := func(description, prompt string) ToolCall {
			return ToolCall{Name: "Agent", Input: map[string]any{
				"description": description, "prompt": prompt,
				"subagent_type": "general-purpose", "run_in_background": false,
			}}
		}
		return withCommon("parallel_subagents",
			Rule{Name: "subagent_a_result", Match: All(IsSubagent, HasToolResults, firstUserSays(ParallelPromptA)), Replies: []Reply{{
				Text: "It printed from-subagent-a.", Usage: usage(103, 3301, 117, 19),
			}}},
			Rule{Name: "subagent_b_result", Match: All(IsSubagent, HasToolResults, firstUserSays(ParallelPromptB)), Replies: []Reply{{
				Text: "The file does not exist.", Usage: usage(107, 3307, 119, 17),
			}}},
			Rule{Name: "subagent_a", Match: All(IsSubagent, firstUserSays(ParallelPromptA)), Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{
					"command": "echo from-subagent-a", "description": "Print a marker",
				}}},
				Usage: usage(101, 0, 3301, 43),
			}}},
			Rule{Name: "subagent_b", Match: All(IsSubagent, firstUserSays(ParallelPromptB)), Replies: []Reply{{
				ToolCalls: []ToolCall{{Name: "Read", Input: map[string]any{"file_path": MissingFile}}},
				Usage:     usage(109, 0, 3307, 41),
			}}},
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "Both subagents reported.", Usage: usage(113, 5903, 409, 23),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "I'll delegate both.",
				ToolCalls: []ToolCall{
					agent("Echo a marker", ParallelPromptA),
					agent("Read a file", ParallelPromptB),
				},
				Usage: usage(111, 0, 5903, 127),
			}}},
		)
	},
	// For an interactive session in plan mode: the first answer calls ExitPlanMode with a plan,
	// the user approves it, and the result gets a plain answer.
	"plan_mode": func() Script {
		return withCommon("plan_mode",
			Rule{Name: "main_result", Match: HasToolResults, Replies: []Reply{{
				Text: "The plan is approved; nothing else to do.", Usage: usage(67, 5501, 163, 11),
			}}},
			Rule{Name: "main", Replies: []Reply{{
				Text: "Here is my plan.",
				ToolCalls: []ToolCall{{Name: "ExitPlanMode", Input: map[string]any{
					"plan": "1. Create cctrace-plan.txt.\n2. Report that it exists.",
				}}},
				Usage: usage(71, 0, 5101, 61),
			}}},
		)
	},
}
