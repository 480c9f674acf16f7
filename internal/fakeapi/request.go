package fakeapi

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// secretHeaders are never copied out of a request: not into Served, not into recordings.
var secretHeaders = []string{"X-Api-Key", "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie"}

// Request is one request as a Script sees it: the raw exchange plus the few decoded facts that
// rules match on. Header never holds credentials. The zero value is an empty request that only
// matches rules that accept anything.
type Request struct {
	Method string
	Path   string // URL path without the query
	Header http.Header
	// Body is the request body after removing any Content-Encoding.
	Body []byte

	// The fields below are decoded from a Messages API body; they stay empty for other bodies.
	Model        string
	Stream       bool
	ToolsPresent bool     // the body had a "tools" key (an empty list counts)
	ToolNames    []string // tool names, in order
	System       string   // every system text block, joined with newlines
	// OutputFormat is output_config.format.type, e.g. "json_schema" on title requests.
	OutputFormat string
	Messages     []Message
}

// Message is one message of a request body, reduced to what rules match on.
type Message struct {
	Role        string
	Texts       []string // text blocks (a string content is one text)
	ToolUses    []ToolUse
	ToolResults []ToolResult
}

// ToolUse is a tool_use block of an assistant message in a request's history.
type ToolUse struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// ToolResult is a tool_result block of a user message.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Text      string // text of its content, joined
}

// AgentID is the x-claude-code-agent-id header: set only on a subagent's requests.
func (r *Request) AgentID() string { return r.Header.Get("X-Claude-Code-Agent-Id") }

// Subagent reports whether the request comes from a subagent: it carries an agent id header or
// its billing header says cc_is_subagent=true.
func (r *Request) Subagent() bool {
	return r.AgentID() != "" || strings.Contains(r.System, "cc_is_subagent=true")
}

// Last returns the last user or assistant message (Claude Code may append system messages
// after it), or nil when there is none.
func (r *Request) Last() *Message {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if role := r.Messages[i].Role; role == "user" || role == "assistant" {
			return &r.Messages[i]
		}
	}
	return nil
}

// LastText returns the last text block of the last user or assistant message, or "".
func (r *Request) LastText() string {
	m := r.Last()
	if m == nil || len(m.Texts) == 0 {
		return ""
	}
	return m.Texts[len(m.Texts)-1]
}

// HasToolResults reports whether the last user or assistant message carries tool results.
func (r *Request) HasToolResults() bool {
	m := r.Last()
	return m != nil && len(m.ToolResults) > 0
}

// errorResults counts the tool results with is_error set after the last assistant message.
func (r *Request) errorResults() int {
	n := 0
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "assistant"; i-- {
		for _, tr := range r.Messages[i].ToolResults {
			if tr.IsError {
				n++
			}
		}
	}
	return n
}

// stripSecrets returns a copy of h without credentials.
func stripSecrets(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, k := range secretHeaders {
		out.Del(k)
	}
	return out
}

// decodeContent removes a Content-Encoding from a request body.
func decodeContent(body []byte, encoding string) ([]byte, error) {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("opening gzip body: %w", err)
		}
		defer zr.Close()
		r = zr
	case "deflate":
		fr := flate.NewReader(bytes.NewReader(body))
		defer fr.Close()
		r = fr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("opening zstd body: %w", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("decoding body: unsupported content encoding %q", encoding)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decoding %s body: %w", encoding, err)
	}
	return out, nil
}

// rawBody is the part of a Messages API body that decodeBody reads.
type rawBody struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	System       json.RawMessage `json:"system"`
	Tools        *[]rawTool      `json:"tools"`
	Messages     []rawMessage    `json:"messages"`
	OutputConfig *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"output_config"`
}

type rawTool struct {
	Name string `json:"name"`
}

type rawMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type rawBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// decodeBody fills the decoded fields of r from r.Body. Bodies that are not Messages API JSON
// leave them empty and return an error, which the server only logs.
func (r *Request) decodeBody() error {
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return nil
	}
	var b rawBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		return fmt.Errorf("decoding request body: %w", err)
	}
	r.Model = b.Model
	r.Stream = b.Stream
	if b.Tools != nil {
		r.ToolsPresent = true
		for _, t := range *b.Tools {
			r.ToolNames = append(r.ToolNames, t.Name)
		}
	}
	r.System = strings.Join(texts(b.System), "\n")
	if b.OutputConfig != nil && b.OutputConfig.Format != nil {
		r.OutputFormat = b.OutputConfig.Format.Type
	}
	for _, rm := range b.Messages {
		m := Message{Role: rm.Role}
		var s string
		if json.Unmarshal(rm.Content, &s) == nil {
			m.Texts = []string{s}
			r.Messages = append(r.Messages, m)
			continue
		}
		var blocks []rawBlock
		if err := json.Unmarshal(rm.Content, &blocks); err != nil {
			return fmt.Errorf("decoding %s message content: %w", rm.Role, err)
		}
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				m.Texts = append(m.Texts, bl.Text)
			case "tool_use":
				m.ToolUses = append(m.ToolUses, ToolUse{ID: bl.ID, Name: bl.Name, Input: bl.Input})
			case "tool_result":
				m.ToolResults = append(m.ToolResults, ToolResult{
					ToolUseID: bl.ToolUseID,
					IsError:   bl.IsError,
					Text:      strings.Join(texts(bl.Content), "\n"),
				})
			}
		}
		r.Messages = append(r.Messages, m)
	}
	return nil
}

// texts returns the text of a content value that is either a string or a list of blocks.
func texts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var blocks []rawBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}
