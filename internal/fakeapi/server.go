// Package fakeapi is a scripted fake of the Anthropic Messages API, faithful enough for the real
// Claude Code CLI to run whole sessions against it: streamed (SSE) and JSON messages with text
// and tool_use blocks, usage with cache counts, count_tokens, HTTP errors, mid-stream error
// events and slow streams kept alive with pings.
//
// A Script picks each reply from the request itself, because Claude Code interleaves side
// requests (titles, subagents) in an order tests cannot rely on. Usage is fixed per reply, and
// Served lists what was answered, so tests can compute exact token totals. With WithRecordDir
// every exchange is written to disk, credentials removed.
package fakeapi

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// maxBody bounds the request bodies the fake reads (Claude Code's are a few hundred KiB).
const maxBody = 64 << 20

// Served is what the server answered to one request. Header never holds credentials.
type Served struct {
	Seq    int // 1-based, in arrival order
	Time   time.Time
	Method string
	Path   string
	Header http.Header
	Model  string
	Stream bool
	// Rule is the Name of the rule that answered, "default" when none matched, "count_tokens"
	// for /v1/messages/count_tokens and "not_found" for unknown paths.
	Rule   string
	Status int
	// Usage is the usage the reply reported; zero for HTTP errors. A mid-stream error reply
	// reports the usage of its message_start only (OutputTokens 1).
	Usage      Usage
	StopReason string   // empty for errors
	ErrorType  string   // HTTP or mid-stream error type
	ToolCalls  []string // names of the tool_use blocks served
	ToolIDs    []string // their ids
	// Cut is true when the client went away before the stream's end. Usage is then what the
	// stream had reported by that point: message_start's (OutputTokens 1), or nothing.
	Cut bool
	// ErrorResults counts the tool results with is_error set that the request carries after
	// its last assistant message: the failed calls of the answer before it.
	ErrorResults int
	// Iterations are the usage.iterations the reply reported.
	Iterations []Iteration
	// Messages is how many messages the request carried: a request sent again carries as many
	// as the one before it, one that goes on from an answer more.
	Messages int
}

// Server is the fake API, an http.Handler. Create it with New; it is safe for concurrent use.
type Server struct {
	script Script
	cfg    config

	mu     sync.Mutex
	seq    int
	tools  int
	next   []int // per rule: index of its next reply
	served []Served
	limits limitState
	cache  promptCache
}

var _ http.Handler = (*Server)(nil)

type config struct {
	recordDir string
	logger    *slog.Logger
	chunk     int
	provider  wire.Provider
	auth      Auth
	pageURL   string
}

// Option configures a Server.
type Option func(*config)

// WithRecordDir writes every exchange to dir as NNN.json (see testdata/claude-code/README.md
// for the format). The default is not to record. dir is created if needed.
func WithRecordDir(dir string) Option { return func(c *config) { c.recordDir = dir } }

// WithLogger sets the logger for requests and recording failures. The default discards logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithChunkSize sets the most bytes of text or tool input JSON per SSE delta. The default is 16;
// text of at least two bytes is always split over at least two deltas.
func WithChunkSize(n int) Option { return func(c *config) { c.chunk = n } }

// WithPageURL sets the URL that stands for PageURL in the input of the tool calls the server
// answers with: the page a WebFetch call fetches (see NewPageServer). The default leaves PageURL.
func WithPageURL(url string) Option { return func(c *config) { c.pageURL = url } }

// New returns a Server answering with script.
func New(script Script, opts ...Option) *Server {
	cfg := config{logger: slog.New(slog.DiscardHandler), chunk: 16}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.chunk < 1 {
		cfg.chunk = 1
	}
	return &Server{script: script, cfg: cfg, next: make([]int, len(script.Rules))}
}

// Served returns a copy of what was answered so far, in arrival order.
func (s *Server) Served() []Served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Served(nil), s.served...)
}

// TotalUsage sums the usage of every reply served so far.
func (s *Server) TotalUsage() Usage {
	var u Usage
	for _, sv := range s.Served() {
		u = u.Add(sv.Usage)
	}
	return u
}

// ServeHTTP answers one request per the script.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	start := time.Now()
	raw, err := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	if err != nil {
		s.cfg.logger.Warn("reading request body", "path", hr.URL.Path, "err", err)
	}
	req := &Request{Method: hr.Method, Path: hr.URL.Path, Header: stripSecrets(hr.Header)}
	req.Body, err = decodeContent(raw, hr.Header.Get("Content-Encoding"))
	if err != nil {
		s.cfg.logger.Warn("decoding request body", "path", hr.URL.Path, "err", err)
		req.Body = raw
	}

	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()

	var p plan
	route, profiles, known := s.providerRoute(hr)
	switch {
	case known && s.authFailure(hr, raw) != "":
		p = plan{rule: "unauthorized", authFailure: s.authFailure(hr, raw), authStatus: s.authStatus()}
	case profiles:
		p = plan{rule: "inference_profiles"}
	case known && route.Endpoint == wire.EndpointMessages:
		if err := req.decodeBody(); err != nil {
			s.cfg.logger.Warn("decoding messages body", "seq", seq, "err", err)
		}
		// Vertex AI and Bedrock name the model (and Bedrock streaming) in the path.
		if req.Model == "" {
			req.Model = route.Model
		}
		req.Stream = req.Stream || route.Stream
		p = s.planMessage(req, seq)
	case known && route.Endpoint == wire.EndpointCountTokens:
		p = plan{rule: "count_tokens", countTokens: len(req.Body)/4 + 1}
	default:
		p = plan{rule: "not_found", reply: Reply{
			Status:       http.StatusNotFound,
			ErrorMessage: fmt.Sprintf("fakeapi: no route for %s %s", hr.Method, hr.URL.Path),
		}}
	}
	p.requestID = fmt.Sprintf("req_fake%016d", seq)
	p.messageID = fmt.Sprintf("msg_fake%016d", seq)

	sv := Served{
		Seq: seq, Time: start, Method: req.Method, Path: req.Path, Header: req.Header,
		Model: req.Model, Stream: req.Stream, Rule: p.rule, ErrorResults: req.errorResults(), Messages: len(req.Messages),
	}
	p.describe(&sv)
	s.mu.Lock()
	idx := len(s.served)
	s.served = append(s.served, sv)
	s.mu.Unlock()
	s.cfg.logger.Info("request", "seq", seq, "method", req.Method, "path", req.Path,
		"model", req.Model, "rule", p.rule, "status", sv.Status, "agent_id", req.AgentID())

	var buf bytes.Buffer
	tw := &teeWriter{w: w, buf: &buf}
	s.rateLimitHeaders(w.Header(), hr, p.reply.Status == http.StatusTooManyRequests)
	s.respond(tw, hr, &p)
	s.serveLimits(hr, sv.Usage)
	if p.cut {
		s.mu.Lock()
		cut := &s.served[idx]
		cut.Cut, cut.StopReason, cut.ToolCalls, cut.ToolIDs = true, "", nil, nil
		cut.Usage = Usage{}
		if p.started {
			cut.Usage = p.reply.Usage
			cut.Usage.OutputTokens = 1
		}
		s.mu.Unlock()
	}

	if s.cfg.recordDir != "" {
		rec := record{
			seq: seq, start: start, end: time.Now(), req: req, query: hr.URL.RawQuery,
			contentEncoding: hr.Header.Get("Content-Encoding"),
			rule:            p.rule, status: tw.status(), respHeader: w.Header(), response: buf.Bytes(),
			provider: s.cfg.provider,
		}
		if err := rec.write(s.cfg.recordDir); err != nil {
			s.cfg.logger.Error("recording exchange", "seq", seq, "err", err)
		}
	}
}

// planMessage picks the reply for a Messages API request and fixes its tool ids.
func (s *Server) planMessage(req *Request, seq int) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := plan{rule: "default", reply: s.script.Default}
	for i, rule := range s.script.Rules {
		if rule.Match != nil && !rule.Match(req) {
			continue
		}
		p.rule = rule.Name
		p.reply = Reply{}
		if n := len(rule.Replies); n > 0 {
			p.reply = rule.Replies[min(s.next[i], n-1)]
		}
		s.next[i]++
		break
	}
	calls := make([]ToolCall, len(p.reply.ToolCalls))
	for i, c := range p.reply.ToolCalls {
		if c.ID == "" {
			s.tools++
			c.ID = fmt.Sprintf("toolu_fake%04d_%02d", seq, s.tools)
		}
		if s.cfg.pageURL != "" && c.Input["url"] == PageURL {
			c.Input = maps.Clone(c.Input)
			c.Input["url"] = s.cfg.pageURL
		}
		calls[i] = c
	}
	p.reply.ToolCalls = calls
	if s.script.PromptCache && p.reply.Status == 0 {
		if read, write, uncached, ok := s.cache.usage(req.Body, req.Model, time.Now()); ok {
			u := &p.reply.Usage
			u.CacheReadInputTokens, u.CacheCreationInputTokens, u.InputTokens = read, write, uncached
			u.CacheCreation5m, u.CacheCreation1h = write, 0
		}
	}
	p.stream = req.Stream
	p.bedrock = s.cfg.provider == wire.ProviderBedrock
	p.model = req.Model
	if p.model == "" {
		p.model = "claude-fake"
	}
	return p
}

// teeWriter keeps a copy of the response body and the status, and keeps http.Flusher.
type teeWriter struct {
	w    http.ResponseWriter
	buf  *bytes.Buffer
	code int
}

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.code == 0 {
		t.code = code
	}
	t.w.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.code == 0 {
		t.code = http.StatusOK
	}
	t.buf.Write(p)
	return t.w.Write(p)
}

// Flush sends buffered bytes to the client at once.
func (t *teeWriter) Flush() {
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *teeWriter) status() int {
	if t.code == 0 {
		return http.StatusOK
	}
	return t.code
}
