package pipeline_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// spanLog is a Sink that keeps a copy of every ended span, safe to read while the pipeline runs.
type spanLog struct {
	mu      sync.Mutex
	started int
	ended   []instrument.Span
}

func (s *spanLog) SpanStarted(*instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
}

func (s *spanLog) SpanEnded(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, *sp)
}

func (s *spanLog) SessionsActive(int) {}

// find returns the ended spans of a kind.
func (s *spanLog) find(kind instrument.SpanKind) []instrument.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []instrument.Span
	for _, sp := range s.ended {
		if sp.Kind == kind {
			out = append(out, sp)
		}
	}
	return out
}

// stack is a client talking to an upstream through the real proxy, with the pipeline feeding a
// tracker, as cctrace runs them.
type stack struct {
	upstreamURL string
	proxyURL    string
	spans       *spanLog
	client      *http.Client
	stop        func() // stops the proxy and the pipeline (which ends every open span); idempotent
}

// checkLeaks fails the test if any goroutine is left once everything the test started stopped.
// Call it first: cleanups run last-registered first.
func checkLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// newStack starts the stack in front of upstream (an http or https URL), stopped when the test
// ends.
func newStack(t *testing.T, upstream string, opts ...proxy.Option) *stack {
	t.Helper()
	s := &stack{upstreamURL: upstream, spans: &spanLog{}}
	tr := instrument.New(s.spans, instrument.WithErrorTimeout(50*time.Millisecond), instrument.WithToolTimeout(50*time.Millisecond))
	pipe := pipeline.New(tr, pipeline.WithTickInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	go pipe.Run(ctx)
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(u, pipe, opts...)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	ct := &http.Transport{DisableCompression: true}
	s.client = &http.Client{Transport: ct}
	s.proxyURL = front.URL
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			ct.CloseIdleConnections()
			front.Close()
			cancel()
			<-pipe.Done()
		})
	}
	t.Cleanup(s.stop)
	return s
}

// startFaultyUpstream serves h on loopback until the test ends.
func startFaultyUpstream(t *testing.T, h http.Handler) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up.URL
}

// turnRequest is a Claude Code turn's first request.
const turnRequest = `{"model":"claude-sonnet-4-6","stream":true,"max_tokens":100,"tools":[{"name":"Bash","input_schema":{}}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"fix the bug"}]}]}`

// sseOK is a whole successful stream.
var sseOK = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-6\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: ping\ndata: {\"type\": \"ping\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// streamEvents writes events as an event stream, flushing each.
func streamEvents(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Request-Id", "req_fault")
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

// jsonError answers with an Anthropic error, gzip-compressed when gz is set.
func jsonError(status int, errType string, gz bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body := []byte(fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"fault injected"},"request_id":"req_fault"}`, errType))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_fault")
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(body)
			_ = zw.Close()
			body = b.Bytes()
			w.Header().Set("Content-Encoding", "gzip")
		}
		if status == 429 {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// exchangeResult is what a client got for one request.
type exchangeResult struct {
	status  int
	header  http.Header
	body    []byte
	readErr error
}

// do sends one request and reads the whole answer. hdr adds headers.
func do(t *testing.T, c *http.Client, base, body string, hdr map[string]string) exchangeResult {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-fault-test")
	req.Header.Set("X-Claude-Code-Session-Id", "fault-session")
	req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return exchangeResult{readErr: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return exchangeResult{status: resp.StatusCode, header: resp.Header, body: b, readErr: err}
}

// sameAnswer fails unless the client got through cctrace what it got from the upstream directly.
func sameAnswer(t *testing.T, direct, proxied exchangeResult) {
	t.Helper()
	if proxied.status != direct.status {
		t.Errorf("status through cctrace %d, direct %d", proxied.status, direct.status)
	}
	if !bytes.Equal(proxied.body, direct.body) {
		t.Errorf("body through cctrace differs:\n got %q\nwant %q", proxied.body, direct.body)
	}
	if (proxied.readErr == nil) != (direct.readErr == nil) {
		t.Errorf("read error through cctrace %v, direct %v", proxied.readErr, direct.readErr)
	}
	for _, h := range []string{"Content-Type", "Content-Encoding", "Request-Id", "Retry-After"} {
		if got, want := proxied.header.Get(h), direct.header.Get(h); got != want {
			t.Errorf("%s through cctrace %q, direct %q", h, got, want)
		}
	}
}

// chatSpan waits for the n-th ended chat span (1-based) and returns it.
func (s *stack) chatSpan(t *testing.T, n int) instrument.Span {
	t.Helper()
	deadline := time.Now().Add(harness.Patience)
	for {
		if chats := s.spans.find(instrument.KindChat); len(chats) >= n {
			return chats[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat span %d did not end", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// turnSpan waits for the first ended turn span.
func (s *stack) turnSpan(t *testing.T) instrument.Span {
	t.Helper()
	deadline := time.Now().Add(harness.Patience)
	for {
		if turns := s.spans.find(instrument.KindTurn); len(turns) > 0 {
			return turns[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stillServes checks that a normal exchange works after the fault.
func (s *stack) stillServes(t *testing.T) {
	t.Helper()
	r := do(t, s.client, s.proxyURL, turnRequest, map[string]string{"X-Fault": "none"})
	if r.readErr != nil || r.status != http.StatusOK || !bytes.Contains(r.body, []byte("message_stop")) {
		t.Errorf("cctrace stopped serving after the fault: %d %v %q", r.status, r.readErr, r.body)
	}
}

// faultyUpstream answers requests marked X-Fault: none normally and runs fault for the others.
func faultyUpstream(fault http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fault") == "none" {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, sseOK...)
			return
		}
		fault(w, r)
	}
}

// TestUpstreamFaults injects upstream failures behind the real proxy and pipeline. For each, the
// client must get exactly what it gets from the upstream directly, the chat span must end with
// the right status, the turn must end, cctrace must keep serving, and no goroutine may be left.
func TestUpstreamFaults(t *testing.T) {
	tests := []struct {
		name      string
		fault     http.HandlerFunc
		wantError string // the chat span's error.type; empty for OK
		wantTurn  string // the turn's outcome
	}{
		{"slow headers", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(300 * time.Millisecond)
			streamEvents(w, sseOK...)
		}, "", "end_turn"},
		{"429 rate limited", jsonError(429, "rate_limit_error", false), "rate_limit_error", "error"},
		{"500 api error", jsonError(500, "api_error", false), "api_error", "error"},
		{"529 overloaded", jsonError(529, "overloaded_error", false), "overloaded_error", "error"},
		{"529 gzip-compressed", jsonError(529, "overloaded_error", true), "overloaded_error", "error"},
		{"truncated stream", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, sseOK[:4]...)
		}, "incomplete_stream", "error"},
		{"mid-stream error event", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, append(sseOK[:4:4], "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")...)
		}, "overloaded_error", "error"},
		{"invalid JSON and unknown events", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			evs := append([]string{}, sseOK[:2]...)
			evs = append(evs,
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\n\n",
				"event: brand_new_event\ndata: {\"type\":\"brand_new_event\",\"what\":[1,2,{\"x\":null}]}\n\n",
				": a comment line\n\n",
				"data: not json at all\n\n")
			streamEvents(w, append(evs, sseOK[2:]...)...)
		}, "", "end_turn"},
		{"long silent stream with pings", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, sseOK[:2]...)
			for range 20 {
				time.Sleep(25 * time.Millisecond)
				_, _ = io.WriteString(w, sseOK[2])
				w.(http.Flusher).Flush()
			}
			for _, ev := range sseOK[3:] {
				_, _ = io.WriteString(w, ev)
			}
		}, "", "end_turn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			s := newStack(t, startFaultyUpstream(t, faultyUpstream(tt.fault)))
			direct := do(t, s.client, s.upstreamURL, turnRequest, nil)
			proxied := do(t, s.client, s.proxyURL, turnRequest, nil)
			sameAnswer(t, direct, proxied)
			chat := s.chatSpan(t, 1)
			if got := chat.ErrorType; got != tt.wantError || (got == "") != (chat.Status == instrument.StatusOK) {
				t.Errorf("chat span status %v %q (%s), want error type %q", chat.Status, got, chat.StatusMessage, tt.wantError)
			}
			if turn := s.turnSpan(t); string(turn.Turn.Outcome) != tt.wantTurn {
				t.Errorf("turn outcome %q, want %q", turn.Turn.Outcome, tt.wantTurn)
			}
			s.stillServes(t)
		})
	}
}

// TestPingsAreNotDelayed checks that each ping of a long silent stream reaches the client before
// the upstream sends the next one: Claude Code aborts a stream after 5 minutes without bytes.
func TestPingsAreNotDelayed(t *testing.T) {
	checkLeaks(t)
	next := make(chan struct{})
	s := newStack(t, startFaultyUpstream(t, faultyUpstream(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		streamEvents(w, sseOK[:2]...)
		for range 5 {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, sseOK[2])
			w.(http.Flusher).Flush()
		}
		for _, ev := range sseOK[3:] {
			_, _ = io.WriteString(w, ev)
		}
	})))
	req, _ := http.NewRequest(http.MethodPost, s.proxyURL+"/v1/messages", strings.NewReader(turnRequest))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent := func() string {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			ev.WriteString(line)
			if err != nil || line == "\n" {
				return ev.String()
			}
		}
	}
	readEvent()
	readEvent()
	for i := range 5 {
		next <- struct{}{}
		got := make(chan string, 1)
		go func() { got <- readEvent() }()
		select {
		case ev := <-got:
			if !strings.Contains(ev, "ping") {
				t.Fatalf("event %d: %q, want a ping", i, ev)
			}
		case <-time.After(harness.Patience):
			t.Fatalf("ping %d was held back by the proxy", i)
		}
	}
	if rest, err := io.ReadAll(br); err != nil || !strings.Contains(string(rest), "message_stop") {
		t.Errorf("end of stream %q, %v", rest, err)
	}
	if chat := s.chatSpan(t, 1); chat.Status != instrument.StatusOK {
		t.Errorf("chat span %v %s", chat.Status, chat.ErrorType)
	}
}

// TestUpstreamConnectionFaults covers an upstream that cannot be reached, fails TLS, or resets
// the connection in the middle of a stream.
func TestUpstreamConnectionFaults(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		checkLeaks(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String()
		ln.Close()
		s := newStack(t, dead)
		r := do(t, s.client, s.proxyURL, turnRequest, nil)
		if r.status != http.StatusBadGateway || !bytes.Contains(r.body, []byte(`"type":"proxy_error"`)) {
			t.Errorf("got %d %q, want a clean 502", r.status, r.body)
		}
		if chat := s.chatSpan(t, 1); chat.ErrorType != "transport_error" {
			t.Errorf("chat span error type %q, want transport_error", chat.ErrorType)
		}
		if turn := s.turnSpan(t); turn.Turn.Outcome != "error" || turn.Status != instrument.StatusError {
			t.Errorf("turn %q %v", turn.Turn.Outcome, turn.Status)
		}
	})
	t.Run("TLS failure", func(t *testing.T) {
		checkLeaks(t)
		up := httptest.NewTLSServer(faultyUpstream(func(w http.ResponseWriter, r *http.Request) {}))
		t.Cleanup(up.Close)
		s := newStack(t, up.URL)
		r := do(t, s.client, s.proxyURL, turnRequest, nil)
		if r.status != http.StatusBadGateway || !bytes.Contains(r.body, []byte("certificate")) {
			t.Errorf("got %d %q, want a clean 502 naming the certificate", r.status, r.body)
		}
		if chat := s.chatSpan(t, 1); chat.ErrorType != "transport_error" {
			t.Errorf("chat span error type %q, want transport_error", chat.ErrorType)
		}
	})
	t.Run("reset mid-stream", func(t *testing.T) {
		checkLeaks(t)
		s := newStack(t, startFaultyUpstream(t, faultyUpstream(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, sseOK[:3]...)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.(*net.TCPConn).SetLinger(0) // close with RST
			_ = conn.Close()
		})))
		direct := do(t, s.client, s.upstreamURL, turnRequest, nil)
		proxied := do(t, s.client, s.proxyURL, turnRequest, nil)
		if direct.readErr == nil || proxied.readErr == nil {
			t.Errorf("a reset stream read without error: direct %v, through cctrace %v", direct.readErr, proxied.readErr)
		}
		if !bytes.Equal(direct.body, proxied.body) || !bytes.HasPrefix(proxied.body, []byte(strings.Join(sseOK[:3], ""))) {
			t.Errorf("bytes before the reset differ:\n got %q\nwant %q", proxied.body, direct.body)
		}
		if chat := s.chatSpan(t, 1); chat.Status != instrument.StatusError || chat.ErrorType != "transport_error" {
			t.Errorf("chat span %v %q, want transport_error", chat.Status, chat.ErrorType)
		}
		if turn := s.turnSpan(t); turn.Turn.Outcome != "error" {
			t.Errorf("turn outcome %q, want error", turn.Turn.Outcome)
		}
		s.stillServes(t)
	})
}

// TestClientFaults covers clients that misbehave: gone in the middle of the request body or the
// stream, a malformed or non-JSON body, a body over the parse limit.
func TestClientFaults(t *testing.T) {
	t.Run("disconnect mid-request-body", func(t *testing.T) {
		checkLeaks(t)
		upstreamDone := make(chan error, 1)
		s := newStack(t, startFaultyUpstream(t, faultyUpstream(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.Copy(io.Discard, r.Body)
			upstreamDone <- err
		})))
		c, err := net.Dial("tcp", strings.TrimPrefix(s.proxyURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n%s", turnRequest[:50])
		time.Sleep(50 * time.Millisecond)
		c.Close()
		select {
		case err := <-upstreamDone:
			if err == nil {
				t.Error("the upstream read a whole body though the client sent a part")
			}
		case <-time.After(harness.Patience):
			t.Fatal("the upstream request was not ended")
		}
		s.stillServes(t)
		// An undecodable request waits a while for a turn to adopt it; stopping ends it.
		s.stop()
		chats := s.spans.find(instrument.KindChat)
		if len(chats) != 2 {
			t.Fatalf("%d chat spans, want 2", len(chats))
		}
		for _, chat := range chats {
			if chat.Chat.Request.BodySize == 50 && (chat.Status != instrument.StatusError || chat.ErrorType != "canceled") {
				t.Errorf("chat span of the cut request: %v %q, want canceled", chat.Status, chat.ErrorType)
			}
		}
	})
	t.Run("disconnect mid-stream", func(t *testing.T) {
		checkLeaks(t)
		canceled := make(chan struct{})
		s := newStack(t, startFaultyUpstream(t, faultyUpstream(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			streamEvents(w, sseOK[:2]...)
			<-r.Context().Done()
			close(canceled)
		})))
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.proxyURL+"/v1/messages", strings.NewReader(turnRequest))
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = bufio.NewReader(resp.Body).ReadString('\n')
		cancel()
		resp.Body.Close()
		select {
		case <-canceled:
		case <-time.After(harness.Patience):
			t.Fatal("the upstream stream went on after the client left")
		}
		if chat := s.chatSpan(t, 1); chat.ErrorType != "canceled" {
			t.Errorf("chat span error type %q, want canceled", chat.ErrorType)
		}
		if turn := s.turnSpan(t); turn.Turn.Outcome != "interrupted" {
			t.Errorf("turn outcome %q, want interrupted", turn.Turn.Outcome)
		}
		s.stillServes(t)
	})

	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || !bytes.HasPrefix(b, []byte("{")) || bytes.Count(b, []byte("{")) != bytes.Count(b, []byte("}")) {
			jsonError(400, "invalid_request_error", false)(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"bytes":%d}`, len(b))
	}
	for _, tt := range []struct {
		name, body, contentType string
		wantStatus              int
		parseLimit              int64
	}{
		{"malformed JSON", `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":`, "application/json", 400, 0},
		{"non-JSON content type", "model=claude&prompt=hi", "application/x-www-form-urlencoded", 400, 0},
		{"deeply nested JSON", `{"model":"m","messages":[` + strings.Repeat(`{"content":[`, 5000) + strings.Repeat(`]}`, 5000) + `]}`, "application/json", 200, 0},
		{"body over the parse limit", turnRequest[:len(turnRequest)-2] + `,"pad":"` + strings.Repeat("p", 4096) + `"}`, "application/json", 200, 1024},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			var opts []proxy.Option
			if tt.parseLimit > 0 {
				opts = append(opts, proxy.WithParseLimit(tt.parseLimit))
			}
			s := newStack(t, startFaultyUpstream(t, faultyUpstream(echo)), opts...)
			hdr := map[string]string{"Content-Type": tt.contentType}
			direct := do(t, s.client, s.upstreamURL, tt.body, hdr)
			proxied := do(t, s.client, s.proxyURL, tt.body, hdr)
			sameAnswer(t, direct, proxied)
			if proxied.status != tt.wantStatus {
				t.Errorf("status %d %q, want %d", proxied.status, proxied.body, tt.wantStatus)
			}
			s.stillServes(t)
			s.stop()
			var chat *instrument.Span
			for _, sp := range s.spans.find(instrument.KindChat) {
				if sp.Chat.Request.BodySize == int64(len(tt.body)) {
					chat = &sp
				}
			}
			if chat == nil {
				t.Fatal("no chat span for the request")
			}
			if (chat.Status == instrument.StatusError) != (tt.wantStatus >= 400) {
				t.Errorf("chat span %v %q for a %d", chat.Status, chat.ErrorType, tt.wantStatus)
			}
		})
	}
}
