package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// recordedBodies returns the request bodies of the recorded Claude Code sessions, by file.
func recordedBodies(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/claude-code/*/[0-9][0-9][0-9].json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	bodies := make(map[string][]byte)
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Path string          `json:"path"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(rec.Body) > 0 && strings.HasPrefix(rec.Path, "/v1/messages") {
			bodies[p] = rec.Body
		}
	}
	return bodies
}

// refBlock is a content block as encoding/json decodes it.
type refBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	ID           string          `json:"id"`
	ToolUseID    string          `json:"tool_use_id"`
	IsError      bool            `json:"is_error"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// refBlocks decodes content that is a string (one text block) or a list of blocks.
func refBlocks(t *testing.T, content json.RawMessage) []refBlock {
	t.Helper()
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []refBlock{{Type: "text", Text: &s}}
	}
	var blocks []refBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		t.Fatalf("content %.80s: %v", content, err)
	}
	return blocks
}

// cacheMarker reports whether a cache_control value counts: an object.
func cacheMarker(raw json.RawMessage) bool { return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) }

// refDecode decodes a request body with encoding/json into what ParseBody reports of it, for
// the fields that can be had without ParseBody's own text rules (human text, reminders, Plan
// Mode): roles, block counts, tool calls and results, system and tools, cache markers.
func refDecode(t *testing.T, body []byte) Body {
	t.Helper()
	var top struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Thinking  struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		System json.RawMessage `json:"system"`
		Tools  *[]struct {
			Name         string          `json:"name"`
			Type         string          `json:"type"`
			DeferLoading bool            `json:"defer_loading"`
			CacheControl json.RawMessage `json:"cache_control"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	want := Body{Model: top.Model, MaxTokens: top.MaxTokens, Stream: top.Stream, Thinking: top.Thinking.Type}
	if top.Tools != nil {
		want.Tools.Present = true
		for _, tool := range *top.Tools {
			want.Tools.Count++
			want.Tools.Names = append(want.Tools.Names, tool.Name)
			if tool.DeferLoading {
				want.Tools.Deferred++
			}
			for _, prefix := range []string{"web_search_", "web_fetch_", "code_execution_", "advisor_", "tool_search_tool_"} {
				if strings.HasPrefix(tool.Type, prefix) {
					want.Tools.Server++
				}
			}
			if cacheMarker(tool.CacheControl) {
				want.CacheBreakpoints++
			}
		}
	}
	if len(top.System) > 0 {
		for _, blk := range refBlocks(t, top.System) {
			if blk.Type == "text" && blk.Text != nil {
				want.System.Blocks++
				want.System.Bytes += len(*blk.Text)
			}
			if cacheMarker(blk.CacheControl) {
				want.CacheBreakpoints++
			}
		}
	}
	lastAssistant := -1
	for i, m := range top.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
	}
	for i, m := range top.Messages {
		msg := Message{Role: parseRole([]byte(m.Role))}
		for _, blk := range refBlocks(t, m.Content) {
			msg.Blocks.Add(parseBlockType([]byte(blk.Type)), 1)
			// The environment text comes on its own, or (as after a model change) in a reminder.
			if blk.Text != nil && want.WorkingDirectory == "" && strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(*blk.Text, "<system-reminder>")), "# Environment") {
				for line := range strings.Lines(*blk.Text) {
					if dir, ok := strings.CutPrefix(line, " - Primary working directory: "); ok {
						want.WorkingDirectory = strings.TrimSpace(dir)
						break
					}
				}
			}
			if cacheMarker(blk.CacheControl) {
				want.CacheBreakpoints++
			}
			var resultBlocks []refBlock
			if len(blk.Content) > 0 && blk.Content[0] == '[' {
				resultBlocks = refBlocks(t, blk.Content)
				for _, rb := range resultBlocks {
					if cacheMarker(rb.CacheControl) {
						want.CacheBreakpoints++
					}
				}
			}
			if i < lastAssistant {
				continue // ParseBody keeps tool calls and results from the last assistant message on
			}
			switch {
			case blk.Type == "tool_use" && msg.Role == RoleAssistant:
				msg.ToolUseIDs = append(msg.ToolUseIDs, blk.ID)
			case blk.Type == "tool_result" && msg.Role == RoleUser:
				size := 0
				var s string
				switch {
				case json.Unmarshal(blk.Content, &s) == nil:
					size = len(s)
				case resultBlocks != nil:
					for k, rb := range resultBlocks {
						if rb.Type == "text" && rb.Text != nil {
							size += len(*rb.Text)
						} else {
							var all []json.RawMessage
							_ = json.Unmarshal(blk.Content, &all)
							size += len(all[k])
						}
					}
				}
				msg.ToolResults = append(msg.ToolResults, ToolResult{ToolUseID: blk.ToolUseID, IsError: blk.IsError, Bytes: size})
			}
		}
		want.Messages = append(want.Messages, msg)
	}
	return want
}

// comparable keeps of a Body what refDecode decodes: AgentID, previews and texts are left out.
func comparable(b *Body) Body {
	out := Body{
		Model: b.Model, MaxTokens: b.MaxTokens, Stream: b.Stream, Thinking: b.Thinking,
		Tools: b.Tools, CacheBreakpoints: b.CacheBreakpoints, WorkingDirectory: b.WorkingDirectory,
		System: SystemInfo{Blocks: b.System.Blocks, Bytes: b.System.Bytes},
	}
	for _, m := range b.Messages {
		c := Message{Role: m.Role, Blocks: m.Blocks, ToolUseIDs: m.ToolUseIDs}
		for _, r := range m.ToolResults {
			c.ToolResults = append(c.ToolResults, ToolResult{ToolUseID: r.ToolUseID, IsError: r.IsError, Bytes: r.Bytes})
		}
		out.Messages = append(out.Messages, c)
	}
	return out
}

// TestParseBodyRecordedAgainstEncodingJSON decodes every recorded Claude Code request body and
// checks what ParseBody reports against an independent decoding with encoding/json.
func TestParseBodyRecordedAgainstEncodingJSON(t *testing.T) {
	var results, uses, dirs int
	for path, body := range recordedBodies(t) {
		got, err := ParseBody(body, "")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want := refDecode(t, body)
		if g := comparable(got); !reflect.DeepEqual(g, want) {
			gj, _ := json.MarshalIndent(g, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s: ParseBody differs from encoding/json\nParseBody:     %s\nencoding/json: %s", path, gj, wj)
		}
		if got.WorkingDirectory != "" {
			dirs++
		}
		if got.HistoryHash != rawMessagesHash(t, body) {
			t.Errorf("%s: HistoryHash is not the hash of the messages array", path)
		}
		for _, m := range got.Messages {
			results += len(m.ToolResults)
			uses += len(m.ToolUseIDs)
		}
	}
	if results == 0 || uses == 0 || dirs == 0 {
		t.Errorf("the recordings exercise %d tool results, %d tool calls and %d working directories", results, uses, dirs)
	}
}

// refStream decodes a recorded event stream with encoding/json, one data line per event as the
// fake API sends them, into what a streamDecoder reports of it; a tool call whose block stopped
// ends at stopped.
func refStream(t *testing.T, stream string, stopped time.Time) *MessageInfo {
	t.Helper()
	type usage struct {
		InputTokens              *int `json:"input_tokens"`
		OutputTokens             *int `json:"output_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheCreation            *struct {
			Ephemeral5m *int `json:"ephemeral_5m_input_tokens"`
			Ephemeral1h *int `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
		ServerToolUse *struct {
			WebSearch     *int `json:"web_search_requests"`
			WebFetch      *int `json:"web_fetch_requests"`
			CodeExecution *int `json:"code_execution_requests"`
		} `json:"server_tool_use"`
		Speed        *string `json:"speed"`
		InferenceGeo *string `json:"inference_geo"`
		Iterations   *[]struct {
			Type                     string `json:"type"`
			Model                    string `json:"model"`
			InputTokens              int    `json:"input_tokens"`
			OutputTokens             int    `json:"output_tokens"`
			CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
		} `json:"iterations"`
	}
	var info MessageInfo
	apply := func(u *usage) {
		set := func(dst *int, v *int) {
			if v != nil {
				*dst = *v
			}
		}
		if u == nil {
			return
		}
		set(&info.Usage.InputTokens, u.InputTokens)
		set(&info.Usage.OutputTokens, u.OutputTokens)
		set(&info.Usage.CacheReadInputTokens, u.CacheReadInputTokens)
		set(&info.Usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
		if u.CacheCreation != nil {
			set(&info.Usage.CacheCreation5m, u.CacheCreation.Ephemeral5m)
			set(&info.Usage.CacheCreation1h, u.CacheCreation.Ephemeral1h)
		}
		if st := u.ServerToolUse; st != nil {
			set(&info.Usage.ServerToolUse.WebSearch, st.WebSearch)
			set(&info.Usage.ServerToolUse.WebFetch, st.WebFetch)
			set(&info.Usage.ServerToolUse.CodeExecution, st.CodeExecution)
		}
		if u.Speed != nil && *u.Speed != "" {
			info.Usage.Speed = *u.Speed
		}
		if u.InferenceGeo != nil && *u.InferenceGeo != "" {
			info.Usage.InferenceGeo = *u.InferenceGeo
		}
		if u.Iterations != nil {
			info.Iterations = nil
			for _, it := range *u.Iterations {
				if it.Type == "" || it.Type == "message" || it.Type == "fallback_message" {
					continue
				}
				info.Iterations = append(info.Iterations, Iteration{Type: it.Type, Model: it.Model, Usage: Usage{
					InputTokens: it.InputTokens, OutputTokens: it.OutputTokens,
					CacheReadInputTokens: it.CacheReadInputTokens, CacheCreationInputTokens: it.CacheCreationInputTokens}})
			}
		}
	}
	info.Blocks = map[BlockType]int{}
	var text string
	inputs := map[int]*strings.Builder{}
	tools := map[int]int{} // block index to index in info.ToolUses
	for line := range strings.SplitSeq(stream, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Index   int    `json:"index"`
			Message struct {
				ID    string `json:"id"`
				Model string `json:"model"`
				Usage *usage `json:"usage"`
			} `json:"message"`
			ContentBlock struct {
				Type string `json:"type"`
				Text string `json:"text"`
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch ev.Type {
		case "message_start":
			info.ID, info.Model = ev.Message.ID, ev.Message.Model
			apply(ev.Message.Usage)
		case "content_block_start":
			bt := parseBlockType([]byte(ev.ContentBlock.Type))
			info.Blocks[bt]++
			text += ev.ContentBlock.Text
			if bt == BlockToolUse {
				tools[ev.Index] = len(info.ToolUses)
				inputs[ev.Index] = &strings.Builder{}
				info.ToolUses = append(info.ToolUses, ToolUse{ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name})
			}
		case "content_block_delta":
			text += ev.Delta.Text
			if in := inputs[ev.Index]; in != nil {
				in.WriteString(ev.Delta.PartialJSON)
			}
		case "content_block_stop":
			if k, ok := tools[ev.Index]; ok {
				info.ToolUses[k].End = stopped // a call whose block never stopped keeps a zero End
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				info.StopReason = ev.Delta.StopReason
			}
			apply(ev.Usage)
		}
	}
	for index, k := range tools {
		input := inputs[index].String()
		tu := &info.ToolUses[k]
		tu.InputBytes, tu.Input = len(input), truncate(input, PreviewLimit)
		if isAgentTool(tu.Name) {
			var call struct {
				Description     string `json:"description"`
				Prompt          string `json:"prompt"`
				SubagentType    string `json:"subagent_type"`
				RunInBackground bool   `json:"run_in_background"`
			}
			if json.Unmarshal([]byte(input), &call) == nil {
				tu.Agent = &AgentCall{Description: call.Description, SubagentType: call.SubagentType,
					RunInBackground: call.RunInBackground, PromptHash: HashText(call.Prompt)}
			}
		}
	}
	info.Text = truncate(text, PreviewLimit)
	return &info
}

// TestDecodeResponseRecordedAgainstEncodingJSON decodes every recorded Claude Code event
// stream and checks what the streamDecoder reports against an independent decoding of its
// events with encoding/json.
func TestDecodeResponseRecordedAgainstEncodingJSON(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/claude-code/*/[0-9][0-9][0-9].json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	streams, agents := 0, 0
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			ResponseHeaders map[string][]string `json:"response_headers"`
			Response        string              `json:"response"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		contentType := strings.Join(rec.ResponseHeaders["Content-Type"], "")
		if !IsEventStream(contentType) || IsAWSEventStream(contentType) {
			continue
		}
		streams++
		resp := Response{ContentType: contentType, End: t0}
		DecodeResponse(&resp, EndpointMessages, []byte(rec.Response))
		if resp.ParseError != "" || resp.Message == nil {
			t.Fatalf("%s: %q, message %v", p, resp.ParseError, resp.Message)
		}
		// Every event of a stream decoded at once arrives at its end.
		want := refStream(t, rec.Response, t0)
		if !reflect.DeepEqual(resp.Message, want) {
			gj, _ := json.MarshalIndent(resp.Message, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s: streamDecoder differs from encoding/json\nStreamDecoder: %s\nencoding/json: %s", p, gj, wj)
		}
		for _, tu := range resp.Message.ToolUses {
			if tu.Agent != nil {
				agents++
			}
		}
	}
	if streams == 0 || agents == 0 {
		t.Errorf("the recordings exercise %d streams, %d Agent calls", streams, agents)
	}
}
