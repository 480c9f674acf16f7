package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cctrace/cctrace/instrument/wire"
)

// sseEvents splits a recorded stream into its events, each with its blank-line terminator.
func sseEvents(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := readTestdata(name)
	if err != nil {
		t.Fatal(err)
	}
	var events [][]byte
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			t.Fatalf("%s: trailing bytes without a blank line", name)
		}
		events = append(events, b[:i+2])
		b = b[i+2:]
	}
	return events
}

// readEvent reads one SSE event, up to and including its blank line.
func readEvent(br *bufio.Reader) ([]byte, error) {
	var ev []byte
	for {
		line, err := br.ReadBytes('\n')
		ev = append(ev, line...)
		if err != nil {
			return ev, err
		}
		if len(line) == 1 {
			return ev, nil
		}
	}
}

// wantToolUseMessage checks the decoded message of testdata/tool_use.sse.
func wantToolUseMessage(t *testing.T, resp *wire.Response) {
	t.Helper()
	m := resp.Message
	if m == nil {
		t.Fatalf("no decoded message in %+v", *resp)
	}
	if m.ID != "msg_01HkT3pQz9XwV4bLr7c2Yd8N" || m.Model != "claude-sonnet-4-6" || m.StopReason != "tool_use" {
		t.Errorf("decoded message %+v", *m)
	}
	wantUsage := wire.Usage{InputTokens: 12, OutputTokens: 87, CacheReadInputTokens: 30412, CacheCreationInputTokens: 200, CacheCreation5m: 200}
	if m.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", m.Usage, wantUsage)
	}
	if len(m.ToolUses) != 1 || m.ToolUses[0].Name != "Read" || m.ToolUses[0].ID != "toolu_01A9qLm3Rf5Zc8KxWv2N4pTe" {
		t.Errorf("tool uses %+v", m.ToolUses)
	}
	if resp.Incomplete || resp.ParseError != "" || resp.ErrorType != "" {
		t.Errorf("stream flagged: incomplete %v, parse error %q, error type %q", resp.Incomplete, resp.ParseError, resp.ErrorType)
	}
	if resp.FirstChunk.IsZero() || resp.FirstChunk.Before(resp.HeaderTime) || resp.End.Before(resp.FirstChunk) {
		t.Errorf("times: headers %v, first chunk %v, end %v", resp.HeaderTime, resp.FirstChunk, resp.End)
	}
}

// TestSSEIsNotBuffered has the upstream write one event and wait until the client has it before
// writing the next: any buffering in the proxy stalls the stream and fails the test.
func TestSSEIsNotBuffered(t *testing.T) {
	events := sseEvents(t, "tool_use.sse")
	ack := make(chan struct{})
	upstreamDone := make(chan error, 1)
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Request-Id", "req_011CSse")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i, ev := range events {
			_, _ = w.Write(ev)
			if err := rc.Flush(); err != nil {
				upstreamDone <- err
				return
			}
			select {
			case <-ack:
			case <-time.After(waitTimeout):
				upstreamDone <- fmt.Errorf("event %d of %d did not reach the client", i+1, len(events))
				return
			case <-r.Context().Done():
				upstreamDone <- fmt.Errorf("request canceled at event %d", i+1)
				return
			}
		}
		upstreamDone <- nil
	}))

	req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages?beta=true", strings.NewReader(`{"model":"claude-sonnet-4-6","stream":true,"messages":[]}`))
	req.Header.Set("Accept", "application/json")
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i, want := range events {
		got, err := readEvent(br)
		if err != nil {
			t.Fatalf("event %d: %v (got %q)", i+1, err, got)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d = %q, want %q", i+1, got, want)
		}
		select {
		case ack <- struct{}{}:
		case <-time.After(waitTimeout):
			t.Fatalf("the upstream stopped waiting at event %d", i+1)
		}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the last event: %q, %v", rest, err)
	}
	if err := <-upstreamDone; err != nil {
		t.Fatal(err)
	}

	rec := h.rec.next(t)
	resp := rec.resp
	if !resp.Streamed || resp.Status != http.StatusOK || resp.RequestID != "req_011CSse" || resp.Err != "" {
		t.Errorf("observed response %+v", *resp)
	}
	// Each event was flushed on its own, and so is one chunk, timed when it reached the client.
	if !bytes.Equal(rec.respBody, bytes.Join(events, nil)) || len(resp.Chunks) != len(events) {
		t.Errorf("observed a copy of %d bytes in %d chunks, want the %d events forwarded", len(rec.respBody), len(resp.Chunks), len(events))
	}
	if want := int64(len(bytes.Join(events, nil))); resp.BodySize != want {
		t.Errorf("BodySize %d, want %d", resp.BodySize, want)
	}
	wantToolUseMessage(t, rec.decoded())
}

func TestClientCancelMidStream(t *testing.T) {
	events := sseEvents(t, "tool_use.sse")
	upstreamCanceled := make(chan struct{})
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(events[0])
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			close(upstreamCanceled)
		case <-time.After(waitTimeout):
		}
	}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.proxyURL+"/v1/messages", strings.NewReader(`{"stream":true}`))
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readEvent(bufio.NewReader(res.Body)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = res.Body.Close()

	select {
	case <-upstreamCanceled:
	case <-time.After(waitTimeout):
		t.Fatal("the upstream request was not canceled")
	}
	rec := h.rec.next(t)
	resp := rec.decoded()
	if !resp.Canceled || !strings.HasPrefix(resp.Err, "client went away") || resp.Status != http.StatusOK {
		t.Errorf("observed response %+v", *resp)
	}
	if resp.BodySize != int64(len(events[0])) {
		t.Errorf("BodySize %d, want %d", resp.BodySize, len(events[0]))
	}
	if !resp.Incomplete {
		t.Error("a stream canceled before message_stop is not marked Incomplete")
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitForClient waits until ctx, the client request's context, has ended.
func waitForClient(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(waitTimeout):
	}
}

// closeWaitsForClient is an upstream body whose Close, which ReverseProxy calls once the body is
// copied and before the handler returns, waits until the client request's context has ended.
type closeWaitsForClient struct {
	io.ReadCloser
	ctx context.Context
}

func (b closeWaitsForClient) Close() error {
	waitForClient(b.ctx)
	return b.ReadCloser.Close()
}

// failsAfterLastByte is an upstream body of known length whose read after its last byte waits
// until the client request's context has ended and fails with that, as http.Transport's does
// once the request is canceled, instead of answering io.EOF.
type failsAfterLastByte struct {
	io.ReadCloser
	ctx  context.Context
	left int64
}

func (b *failsAfterLastByte) Read(p []byte) (int, error) {
	if b.left == 0 {
		waitForClient(b.ctx)
		return 0, b.ctx.Err()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// TestClientClosesAfterWholeAnswer has a client read a whole Content-Length answer and close its
// connection before the proxy's handler returns, which ends the request's context. The answer
// was delivered: that is not a client that went away, nor an upstream that cut its body. CI saw
// this race once in a few hundred runs: the last exchange of a recorded session counted as
// canceled, so its turn did not end.
func TestClientClosesAfterWholeAnswer(t *testing.T) {
	const answer = `{"type":"message","stop_reason":"end_turn"}`
	for name, wrap := range map[string]func(*http.Response){
		"close waits": func(res *http.Response) {
			res.Body = closeWaitsForClient{ReadCloser: res.Body, ctx: res.Request.Context()}
		},
		"read after last byte fails": func(res *http.Response) {
			res.Body = &failsAfterLastByte{ReadCloser: res.Body, ctx: res.Request.Context(), left: res.ContentLength}
		},
	} {
		t.Run(name, func(t *testing.T) {
			transport := &http.Transport{}
			t.Cleanup(transport.CloseIdleConnections)
			h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
				_, _ = io.WriteString(w, answer)
			}), WithTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				res, err := transport.RoundTrip(r)
				if err == nil {
					wrap(res)
				}
				return res, err
			})))
			res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(`{"stream":false}`))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			if err != nil || string(b) != answer {
				t.Fatalf("client read %q, %v", b, err)
			}
			_ = res.Body.Close()
			h.client.CloseIdleConnections()

			rec := h.rec.next(t)
			if rec.resp.Canceled || rec.resp.Err != "" || rec.resp.Status != http.StatusOK {
				t.Errorf("observed response %+v, want a delivered answer", *rec.resp)
			}
			if string(rec.respBody) != answer {
				t.Errorf("observed body %q", rec.respBody)
			}
		})
	}
}

func TestClientCancelBeforeHeaders(t *testing.T) {
	upstreamCanceled := make(chan struct{})
	arrived := make(chan struct{})
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		select {
		case <-r.Context().Done():
			close(upstreamCanceled)
		case <-time.After(waitTimeout):
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.proxyURL+"/v1/messages", strings.NewReader(`{"stream":false}`))
	errc := make(chan error, 1)
	go func() {
		res, err := h.client.Do(req)
		if err == nil {
			_ = res.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("the request did not reach the upstream")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	select {
	case <-upstreamCanceled:
	case <-time.After(waitTimeout):
		t.Fatal("the upstream request was not canceled")
	}
	rec := h.rec.next(t)
	if string(rec.reqBody) != `{"stream":false}` {
		t.Errorf("observed request body %q (parse error %q)", rec.reqBody, rec.req.ParseError)
	}
	if !rec.resp.Canceled || rec.resp.Status != 0 || rec.resp.Err == "" {
		t.Errorf("observed response %+v", *rec.resp)
	}
}

// TestUpstreamCutsStream has the upstream drop the connection mid-stream.
func TestUpstreamCutsStream(t *testing.T) {
	events := sseEvents(t, "tool_use.sse")
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(bytes.Join(events[:3], nil))
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		conn, _, err := rc.Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	}))
	res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err == nil {
		t.Error("the client read a cut stream to a clean end")
	}
	if want := bytes.Join(events[:3], nil); !bytes.Equal(got, want) {
		t.Errorf("client got %q before the cut, want %q", got, want)
	}
	rec := h.rec.next(t)
	resp := rec.decoded()
	if !strings.HasPrefix(resp.Err, "upstream: ") || resp.Canceled || !resp.Incomplete {
		t.Errorf("observed response %+v", *resp)
	}
	if resp.Message == nil || resp.Message.ID != "msg_01HkT3pQz9XwV4bLr7c2Yd8N" {
		t.Errorf("the events before the cut were not decoded: %+v", resp.Message)
	}
}

// TestAnthropicSDKStreaming runs the official Go SDK's streaming call through the proxy.
func TestAnthropicSDKStreaming(t *testing.T) {
	sse, err := readTestdata("tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan received, 1)
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		got <- received{method: r.Method, requestURI: r.RequestURI, header: r.Header.Clone(), body: body, err: err}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Request-Id", "req_011CSdk")
		for _, ev := range sseEvents(t, "tool_use.sse") {
			_, _ = w.Write(ev)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	apiKey := "sk-ant-api03-" + secretMarker
	client := anthropic.NewClient(
		option.WithBaseURL(h.proxyURL),
		option.WithAPIKey(apiKey),
		option.WithHTTPClient(h.client),
		option.WithMaxRetries(0),
	)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_6,
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix the config loader"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulating: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if err := stream.Close(); err != nil {
		t.Fatal(err)
	}

	up := <-got
	// SDK v2 sends WithAPIKey as a bearer token.
	if up.method != http.MethodPost || up.requestURI != "/v1/messages" || up.header.Get("Authorization") != "Bearer "+apiKey {
		t.Errorf("upstream got %s %s with Authorization %q", up.method, up.requestURI, up.header.Get("Authorization"))
	}
	var sent struct {
		Stream bool   `json:"stream"`
		Model  string `json:"model"`
	}
	if err := json.Unmarshal(up.body, &sent); err != nil || !sent.Stream || sent.Model != "claude-sonnet-4-6" {
		t.Errorf("upstream got body %s (%v)", up.body, err)
	}

	if msg.StopReason != "tool_use" || msg.ID != "msg_01HkT3pQz9XwV4bLr7c2Yd8N" {
		t.Errorf("accumulated message: id %q, stop reason %q", msg.ID, msg.StopReason)
	}
	u := msg.Usage
	if u.InputTokens != 12 || u.OutputTokens != 87 || u.CacheReadInputTokens != 30412 || u.CacheCreationInputTokens != 200 {
		t.Errorf("accumulated usage %+v", u)
	}
	var text, tool, input string
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text += block.Text
		case "tool_use":
			tool, input = block.Name, string(block.Input)
		}
	}
	if text != "I'll read `config.go` to see how the loader works." {
		t.Errorf("accumulated text %q", text)
	}
	if tool != "Read" || !strings.Contains(input, "/src/app/config.go") {
		t.Errorf("accumulated tool use %q %s", tool, input)
	}

	rec := h.rec.next(t)
	if rec.req.Endpoint != wire.EndpointMessages || !bytes.Equal(rec.reqBody, up.body) {
		t.Errorf("observed request %+v with %d body bytes", *rec.req, len(rec.reqBody))
	}
	if rec.resp.BodySize != int64(len(sse)) {
		t.Errorf("BodySize %d, want %d", rec.resp.BodySize, len(sse))
	}
	wantToolUseMessage(t, rec.decoded())
}
