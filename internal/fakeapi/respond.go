package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// plan is the answer chosen for one request.
type plan struct {
	rule        string
	reply       Reply
	stream      bool
	model       string
	countTokens int // > 0: answer a count_tokens request
	requestID   string
	messageID   string
	// bedrock: stream in AWS event-stream frames and answer errors in AWS's shape.
	bedrock bool
	// authFailure says why the request's credential was refused: answer as the provider would,
	// with authStatus.
	authFailure string
	authStatus  int
	// cut is set when the client went away before the stream's end; started says whether
	// message_start, and with it the input usage, had been written by then.
	cut, started bool
}

// streamErrorStatus is the HTTP status a non-streamed request gets for a StreamError reply.
func streamErrorStatus(errType string) int {
	switch errType {
	case "overloaded_error":
		return 529
	case "rate_limit_error":
		return http.StatusTooManyRequests
	default:
		return http.StatusInternalServerError
	}
}

// describe fills the outcome fields of sv.
func (p *plan) describe(sv *Served) {
	r := p.reply
	switch {
	case p.authFailure != "":
		sv.Status = p.authStatus
		sv.ErrorType = "authentication_error"
	case p.rule == "inference_profiles":
		sv.Status = http.StatusOK
	case p.countTokens > 0:
		sv.Status = http.StatusOK
	case r.Status != 0:
		sv.Status = r.Status
		sv.ErrorType = r.errorType()
	case r.StreamError != "" && !p.stream:
		sv.Status = streamErrorStatus(r.StreamError)
		sv.ErrorType = r.StreamError
	case r.StreamError != "":
		sv.Status = http.StatusOK
		sv.ErrorType = r.StreamError
		sv.Usage = r.Usage
		sv.Usage.OutputTokens = 1
	default:
		sv.Status = http.StatusOK
		sv.Usage = r.Usage
		sv.Iterations = r.Iterations
		sv.StopReason = r.stopReason()
		for _, c := range r.ToolCalls {
			sv.ToolCalls = append(sv.ToolCalls, c.Name)
			sv.ToolIDs = append(sv.ToolIDs, c.ID)
		}
	}
}

// respond writes the planned answer.
func (s *Server) respond(w *teeWriter, hr *http.Request, p *plan) {
	h := w.Header()
	h.Set("request-id", p.requestID)
	r := p.reply
	switch {
	case p.authFailure != "":
		h.Del("request-id")
		s.writeAuthFailure(w, p.authFailure)
	case p.rule == "inference_profiles":
		region := s.cfg.auth.AWSRegion
		if region == "" {
			region = "us-east-1"
		}
		writeInferenceProfiles(w, region)
	case p.countTokens > 0:
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": p.countTokens})
	case r.Status != 0:
		if r.RetryAfter > 0 {
			h.Set("retry-after", strconv.Itoa(int(r.RetryAfter.Round(time.Second)/time.Second)))
			h.Set("retry-after-ms", strconv.FormatInt(r.RetryAfter.Milliseconds(), 10))
		}
		p.writeError(w, r.Status, r.errorType(), r.ErrorMessage)
	case r.StreamError != "" && !p.stream:
		p.writeError(w, streamErrorStatus(r.StreamError), r.StreamError, r.ErrorMessage)
	case p.stream:
		s.stream(w, hr, p)
	default:
		writeJSON(w, http.StatusOK, p.message())
	}
}

// writeError answers an HTTP error: Anthropic's JSON error shape, or AWS's for Bedrock.
func (p *plan) writeError(w http.ResponseWriter, status int, errType, msg string) {
	if !p.bedrock {
		writeJSON(w, status, errorBody(errType, msg, p.requestID))
		return
	}
	if msg == "" {
		msg = defaultErrorMessage(errType)
	}
	w.Header().Set("X-Amzn-Errortype", "ServiceUnavailableException")
	writeJSON(w, status, map[string]string{"message": msg})
}

// errorBody is the Anthropic JSON error shape.
func errorBody(errType, msg, requestID string) map[string]any {
	if msg == "" {
		msg = defaultErrorMessage(errType)
	}
	return map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": errType, "message": msg},
		"request_id": requestID,
	}
}

func defaultErrorMessage(errType string) string {
	switch errType {
	case "overloaded_error":
		return "Overloaded"
	case "rate_limit_error":
		return "Rate limited"
	case "not_found_error":
		return "Not found"
	default:
		return "Internal server error"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built from plain maps and strings.
		panic(fmt.Sprintf("fakeapi: marshalling response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// usageJSON is the usage object of message_start and of JSON messages.
func usageJSON(u Usage, iterations []Iteration, output int) map[string]any {
	m := map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"cache_creation": map[string]int{
			"ephemeral_5m_input_tokens": u.CacheCreation5m,
			"ephemeral_1h_input_tokens": u.CacheCreation1h,
		},
		"output_tokens": output,
		"service_tier":  "standard",
	}
	addBilling(m, u, iterations)
	return m
}

// addBilling adds what else the usage bills, when the reply has it: the server tools run, the
// speed, where inference ran, and the iterations.
func addBilling(m map[string]any, u Usage, iterations []Iteration) {
	if u.WebSearchRequests+u.WebFetchRequests+u.CodeExecutionRequests > 0 {
		m["server_tool_use"] = map[string]int{
			"web_search_requests":     u.WebSearchRequests,
			"web_fetch_requests":      u.WebFetchRequests,
			"code_execution_requests": u.CodeExecutionRequests,
		}
	}
	if u.Speed != "" {
		m["speed"] = u.Speed
	}
	if u.InferenceGeo != "" {
		m["inference_geo"] = u.InferenceGeo
	}
	if len(iterations) > 0 {
		m["iterations"] = iterations
	}
}

// toolInput is the input JSON of a tool call.
func toolInput(c ToolCall) []byte {
	if c.Input == nil {
		return []byte("{}")
	}
	b, err := json.Marshal(c.Input)
	if err != nil {
		panic(fmt.Sprintf("fakeapi: marshalling input of tool %s: %v", c.Name, err))
	}
	return b
}

// message is the non-streamed answer.
func (p *plan) message() map[string]any {
	content := []any{}
	for i, c := range p.reply.ServerTools {
		id := serverToolID(p.messageID, i)
		content = append(content,
			map[string]any{"type": "server_tool_use", "id": id, "name": c.Name, "input": c.Input},
			map[string]any{"type": c.ResultType, "tool_use_id": id, "content": c.Results})
	}
	if p.reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": p.reply.Text})
	}
	for _, c := range p.reply.ToolCalls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(toolInput(c)),
		})
	}
	return map[string]any{
		"id":            p.messageID,
		"type":          "message",
		"role":          "assistant",
		"model":         p.model,
		"content":       content,
		"stop_reason":   p.reply.stopReason(),
		"stop_sequence": nil,
		"usage":         usageJSON(p.reply.Usage, p.reply.Iterations, p.reply.Usage.OutputTokens),
	}
}

// sseWriter writes events and flushes each one; it stops writing once the client is gone.
// For Bedrock it writes each event as an event-stream frame, and an error as an exception.
type sseWriter struct {
	w       *teeWriter
	req     *http.Request
	bedrock bool
	err     error
}

func (e *sseWriter) event(name string, data any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("fakeapi: marshalling %s event: %v", name, err))
	}
	switch {
	case e.bedrock && name == "error":
		var body struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(b, &body)
		err = bedrockException(e.w, body.Error.Type, body.Error.Message)
	case e.bedrock:
		err = bedrockFrame(e.w, b)
	default:
		_, err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	}
	if err != nil {
		e.err = fmt.Errorf("writing %s event: %w", name, err)
		return
	}
	e.w.Flush()
}

// pause waits d unless the client goes away first.
func (e *sseWriter) pause(d time.Duration) {
	if d <= 0 || e.err != nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.req.Context().Done():
		e.err = fmt.Errorf("waiting: %w", e.req.Context().Err())
	}
}

func (e *sseWriter) pings(r Reply) {
	for range r.Pings {
		e.pause(r.PingEvery)
		e.event("ping", map[string]string{"type": "ping"})
	}
}

// stream writes the planned answer as server-sent events, like the real API: message_start,
// ping, content blocks split over several deltas, message_delta, message_stop.
func (s *Server) stream(w *teeWriter, hr *http.Request, p *plan) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	if p.bedrock {
		h.Set("Content-Type", "application/vnd.amazon.eventstream")
	}
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.Flush()

	r := p.reply
	e := &sseWriter{w: w, req: hr, bedrock: p.bedrock}
	e.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": p.messageID, "type": "message", "role": "assistant", "model": p.model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": usageJSON(startUsage(r.Usage), r.Iterations, 1),
		},
	})
	p.started = e.err == nil
	e.event("ping", map[string]string{"type": "ping"})
	e.pings(r)

	index := 0
	for i, c := range r.ServerTools {
		id := serverToolID(p.messageID, i)
		e.event("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "server_tool_use", "id": id, "name": c.Name, "input": map[string]any{}},
		})
		input, err := json.Marshal(c.Input)
		if err != nil {
			panic(fmt.Sprintf("fakeapi: marshalling input of server tool %s: %v", c.Name, err))
		}
		for _, part := range splitText(string(input), s.cfg.chunk) {
			e.event("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": part},
			})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
		// The API sends a server tool's result whole, in its content_block_start.
		e.event("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": c.ResultType, "tool_use_id": id, "content": c.Results},
		})
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	// cutInTool: the error comes inside the first tool call, after a whole text block.
	cutInTool := r.StreamError != "" && len(r.ToolCalls) > 0
	if r.Text != "" || r.StreamError != "" {
		if index > 0 {
			e.pings(r)
		}
		e.event("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": map[string]string{"type": "text", "text": ""},
		})
		for _, part := range splitText(r.Text, s.cfg.chunk) {
			e.pause(r.ChunkDelay)
			e.event("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index,
				"delta": map[string]string{"type": "text_delta", "text": part},
			})
		}
		if r.StreamError != "" && !cutInTool {
			e.event("error", errorBody(r.StreamError, r.ErrorMessage, p.requestID))
			s.logStreamErr(p, e)
			return
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, c := range r.ToolCalls {
		if index > 0 {
			e.pings(r)
		}
		e.event("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}},
		})
		// The real API opens every tool input with an empty partial_json.
		parts := append([]string{""}, splitText(string(toolInput(c)), s.cfg.chunk)...)
		if cutInTool {
			parts = parts[:1+(len(parts)-1)/2]
		}
		for _, part := range parts {
			e.pause(r.ChunkDelay)
			e.event("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": part},
			})
		}
		if cutInTool {
			e.event("error", errorBody(r.StreamError, r.ErrorMessage, p.requestID))
			s.logStreamErr(p, e)
			return
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": r.stopReason(), "stop_sequence": nil},
		"usage": deltaUsage(r.Usage, r.Iterations),
	})
	e.event("message_stop", map[string]string{"type": "message_stop"})
	s.logStreamErr(p, e)
}

func (s *Server) logStreamErr(p *plan, e *sseWriter) {
	if e.err != nil {
		p.cut = true
		s.cfg.logger.Info("stream ended early", "request_id", p.requestID, "err", e.err)
	}
}

// splitText cuts s into pieces of at most size bytes on rune boundaries; text of two bytes or
// more always gives at least two pieces, so every stream exercises delta accumulation.
func splitText(s string, size int) []string {
	if len(s) < 2 {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	size = max(1, min(size, len(s)/2))
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// deltaUsage is the usage of message_delta: the counts again, with the final output and what
// else the answer bills.
func deltaUsage(u Usage, iterations []Iteration) map[string]any {
	m := map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens":               u.OutputTokens,
	}
	addBilling(m, u, iterations)
	return m
}

// serverToolID is the id of the i-th server tool call of a message.
func serverToolID(messageID string, i int) string {
	return fmt.Sprintf("srvtoolu_%s_%02d", strings.TrimPrefix(messageID, "msg_"), i+1)
}

// startUsage is the usage message_start reports: the input counts, and no server tool run yet.
func startUsage(u Usage) Usage {
	u.WebSearchRequests, u.WebFetchRequests, u.CodeExecutionRequests = 0, 0, 0
	return u
}
