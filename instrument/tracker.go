// Package instrument is cctrace's turn tracker: plain Go with no network, no goroutines and no
// globals. It is fed the exchanges the proxy saw (wire.Request, then wire.Response) and turns
// them into spans: one trace per agentic turn, with a chat span per API attempt, an execute_tool
// span per tool round trip, and subagents nested under the Agent tool call that started them.
// Sinks (OpenTelemetry, Prometheus, the terminal) translate those spans; nothing here knows them.
package instrument

import (
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Markers Claude Code puts in requests, from captured traffic (docs/wire.md).
const (
	continuationPrefix = "This session is being continued from a previous conversation"
	asyncAgentMarker   = "Async agent launched"
	mainAgentName      = "claude-code"
	// otherClientName names the main agent of sessions that show no sign of Claude Code (other
	// Messages API clients): their turns are traced the same way.
	otherClientName = "api-client"
	defaultSubagent = "general-purpose"
	// stopMaxTokens is the stop reason of an answer that ran out of output tokens.
	stopMaxTokens = "max_tokens"
)

// recoveryWindow is how long a turn whose answer ran out of output tokens waits for Claude
// Code's own request to go on with it before it ends with that answer. Claude Code sends that
// request within milliseconds.
const recoveryWindow = 10 * time.Second

// Tracker turns a stream of exchanges into turns and spans. It is not safe for concurrent use:
// feed it from one goroutine. The zero value is not usable; call New.
type Tracker struct {
	cfg      config
	sink     Sink
	sessions map[string]*session
	open     map[uint64]*exchange
	reported int // last session count reported to the sink
	names    spanNames
	traces   traceSet // the trace ids turns went into
	hashBuf  []byte   // turnTraceID's scratch
}

// New returns a tracker that hands its spans to sink.
func New(sink Sink, opts ...Option) *Tracker {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return &Tracker{
		cfg:      cfg,
		sink:     sink,
		sessions: make(map[string]*session),
		open:     make(map[uint64]*exchange),
		names:    newSpanNames(),
	}
}

// Sessions returns how many sessions the tracker holds.
func (t *Tracker) Sessions() int { return len(t.sessions) }

// Request tracks a request whose body has been read. req.Body must already be decoded (or nil).
// The tracker keeps req; callers must not modify it afterwards.
func (t *Tracker) Request(req *wire.Request) {
	now := req.Time
	if req.Endpoint == wire.EndpointOther && req.Headers.SessionID == "" {
		// A probe (a load balancer's health check, a person's curl) is no conversation: it is
		// counted, and makes no trace of its own.
		ex := &exchange{since: now, untraced: true}
		ex.chat = Chat{Request: *req, Kind: RequestNoSession}
		ex.root = Span{Kind: KindChat, Name: t.chatName(req), Start: now, Chat: &ex.chat}
		ex.span = &ex.root
		t.open[req.ExchangeID] = ex
		return
	}
	sess := t.sessionFor(req)
	sess.lastSeen = now
	ex := &exchange{sess: sess, since: now}
	ex.chat = Chat{Request: *req, Kind: RequestOther}
	chat := &ex.chat
	ex.root = Span{
		Kind:      KindChat,
		Name:      t.chatName(req),
		Start:     now,
		SessionID: sess.id,
		Agent:     sess.agent,
		User:      req.Identity.User,
		Team:      req.Identity.Team,
		Link:      parseTraceparent(req.Headers.Traceparent),
		Chat:      chat,
	}
	ex.span = &ex.root
	body := req.Body
	if body != nil {
		ex.hash = body.HistoryHash
		chat.Messages = len(body.Messages)
		chat.PlanMode = body.PlanMode
	}
	t.open[req.ExchangeID] = ex

	switch {
	case req.Endpoint == wire.EndpointCountTokens:
		chat.Kind = RequestCountTokens
		t.startSide(ex)
	case req.Endpoint == wire.EndpointMessages && body == nil && wire.IsNotDecoded(req.ParseError):
		t.startUndecoded(ex)
	case req.Endpoint != wire.EndpointMessages || body == nil:
		t.startSide(ex)
	case isCompactionSummary(body):
		chat.Kind = RequestCompaction
		t.startCompaction(ex)
	default:
		t.startConversational(ex)
	}
	if chat.Request.Body != nil {
		// The tracker is done with the history: keep the request's shape, not its messages.
		ex.body = *chat.Request.Body
		ex.body.Messages = nil
		chat.Request.Body = &ex.body
	}
	t.reportSessions()
}

// Response completes the exchange that resp answers. Responses to unknown exchanges are ignored.
func (t *Tracker) Response(resp *wire.Response) {
	ex := t.open[resp.ExchangeID]
	if ex == nil {
		return
	}
	delete(t.open, resp.ExchangeID)
	span, chat := ex.span, ex.span.Chat
	chat.Response = resp
	span.End = endTime(resp, span.Start)
	failed := setChatStatus(span, resp)
	msg := resp.Message
	if ex.untraced {
		t.sink.SpanEnded(span)
		return
	}
	t.price(chat)
	if ex.sess.evicted {
		// The session was evicted while this request was in flight: its turn and tools have
		// ended, and tool calls opened now would belong to nothing and never end.
		if !ex.orphan {
			t.sink.SpanEnded(span)
		}
		return
	}
	if ex.sess.lastSeen.Before(span.End) {
		ex.sess.lastSeen = span.End
	}

	if ch := ex.chain; ch != nil {
		ch.failed = failed
		// An answer that began and never stopped: Claude Code either sends the request again or
		// goes on from what arrived (see startConversational).
		ch.cut = msg != nil && msg.StopReason == ""
		if msg != nil && !failed {
			ch.context = msg.Usage.TotalInput()
			for typ, n := range msg.Blocks {
				if n > 0 {
					if chat.ResponseBlocks == nil {
						chat.ResponseBlocks = make(map[wire.BlockType]int, len(msg.Blocks))
					}
					chat.ResponseBlocks[typ] += n
				}
			}
		}
	}
	t.addTotals(ex, resp)
	if msg != nil && !failed && ex.chain != nil {
		t.openTools(ex, msg)
	}
	if ex.orphan {
		ex.done = true // the span is emitted when a turn adopts it, or by Tick
	} else {
		t.sink.SpanEnded(span)
	}
	t.afterResponse(ex, resp, failed)
}

// Tick ends what has been idle for too long: turns waiting for a next request, side requests
// waiting for a turn, and whole sessions. Call it periodically with the current time.
func (t *Tracker) Tick(now time.Time) {
	for _, sess := range t.sessions {
		if tr := sess.turn; tr != nil && !tr.deadline.IsZero() && now.After(tr.deadline) {
			outcome := OutcomeIdleTimeout
			switch {
			case t.cfg.replica:
				// Whatever it waited for (tool results, a retry, the next prompt after an
				// interruption) may have gone to another replica.
				outcome = OutcomeHandedOff
			case tr.canceled:
				outcome = OutcomeInterrupted
			case tr.failed:
				outcome = OutcomeError
			}
			t.endTurn(sess, tr.lastSeen, outcome, "")
		}
		t.flushOrphans(sess, now, false)
		if now.Sub(sess.lastSeen) > t.cfg.sessionTimeout {
			t.evict(sess, now, OutcomeEvicted)
		}
	}
	t.reportSessions()
}

// Close ends every open span as of now (outcome "shutdown", or "handed_off" with WithReplica:
// another replica may go on with the turn) and forgets all state.
func (t *Tracker) Close(now time.Time) {
	ids := make([]uint64, 0, len(t.open))
	for id := range t.open {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ex := t.open[id]
		delete(t.open, id)
		ex.span.End = now
		ex.span.Status, ex.span.ErrorType, ex.span.StatusMessage = StatusError, "shutdown", "cctrace stopped before the response ended"
		if !ex.orphan {
			t.sink.SpanEnded(ex.span)
		} else {
			ex.done = true
		}
	}
	outcome := OutcomeShutdown
	if t.cfg.replica {
		outcome = OutcomeHandedOff
	}
	for _, sess := range t.sortedSessions() {
		t.evict(sess, now, outcome)
	}
	t.reportSessions()
}

// sessionFor finds or creates the session a request belongs to: Claude Code's session header,
// else the session inside metadata.user_id, else a fingerprint of the conversation.
func (t *Tracker) sessionFor(req *wire.Request) *session {
	id := req.Headers.SessionID
	if id == "" && req.Body != nil {
		id = req.Body.MetadataSessionID
		if id == "" && req.Body.FirstHumanTextHash != 0 {
			// Built on the stack: the string is only allocated for a new session.
			var buf [len("fp-") + 16]byte
			key := appendHash(append(buf[:0], "fp-"...), req.Body.FirstHumanTextHash)
			if s := t.sessions[string(key)]; s != nil {
				return s
			}
			id = string(key)
		}
	}
	if id == "" {
		id = "unknown"
	}
	if s := t.sessions[id]; s != nil {
		return s
	}
	if len(t.sessions) >= t.cfg.maxSessions {
		var oldest *session
		for _, s := range t.sessions {
			if oldest == nil || s.lastSeen.Before(oldest.lastSeen) {
				oldest = s
			}
		}
		t.evict(oldest, req.Time, OutcomeEvicted)
	}
	s := &session{
		id:       id,
		agent:    otherClientName,
		clientID: req.Headers.SessionID != "" || (req.Body != nil && req.Body.MetadataSessionID != ""),
		agents:   make(map[string]*chain),
		tools:    make(map[string]*openTool),
	}
	if req.Headers.SessionID != "" || strings.HasPrefix(req.Headers.UserAgent, "claude-cli/") ||
		(req.Body != nil && req.Body.System.BillingHeader != "") {
		s.agent = mainAgentName
	}
	t.sessions[id] = s
	return s
}

// evict ends everything open in sess, with outcome (OutcomeEvicted, OutcomeShutdown or
// OutcomeHandedOff), and forgets it.
func (t *Tracker) evict(sess *session, now time.Time, outcome Outcome) {
	t.flushOrphans(sess, now, true)
	if sess.turn != nil {
		end := now
		if outcome == OutcomeEvicted {
			end = sess.turn.lastSeen
		}
		t.endTurn(sess, end, outcome, "")
	}
	for _, id := range sortedToolIDs(sess.tools) {
		t.endTool(sess, id, sess.tools[id], now, toolOutcomeOf(outcome), nil)
	}
	keys := make([]string, 0, len(sess.agents))
	for k := range sess.agents {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if sub := sess.agents[k].sub; sub != nil && !sub.ended {
			sub.ended = true
			sub.span.End = now
			if sub.span.End.Before(sub.span.Start) {
				sub.span.End = sub.span.Start
			}
			sub.span.Status, sub.span.ErrorType = StatusError, string(outcome)
			t.sink.SpanEnded(sub.span)
		}
	}
	sess.evicted = true
	delete(t.sessions, sess.id)
}

func (t *Tracker) reportSessions() {
	if n := len(t.sessions); n != t.reported {
		t.reported = n
		t.sink.SessionsActive(n)
	}
}

func (t *Tracker) sortedSessions() []*session {
	out := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (t *Tracker) traceID() TraceID {
	var id TraceID
	for !id.IsValid() {
		putUint64(id[:8], t.cfg.idSource())
		putUint64(id[8:], t.cfg.idSource())
	}
	return id
}

func (t *Tracker) spanID() SpanID {
	var id SpanID
	for !id.IsValid() {
		putUint64(id[:], t.cfg.idSource())
	}
	return id
}

// appendHash appends h as 16 lower-case hex digits, as fmt's %016x does.
func appendHash(dst []byte, h uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[h>>shift&0xf])
	}
	return dst
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// setChatStatus sets a chat span's status from its response and reports whether it failed.
func setChatStatus(span *Span, resp *wire.Response) bool {
	set := func(errType, msg string) bool {
		span.Status, span.ErrorType, span.StatusMessage = StatusError, errType, msg
		return true
	}
	switch {
	case resp.Canceled:
		return set("canceled", "the client went away before the response ended")
	case resp.Status == 0 || (resp.Err != "" && resp.Status >= 500 && resp.BodySize == 0 && resp.Message == nil):
		return set("transport_error", resp.Err)
	case resp.Status >= 400:
		errType := resp.ErrorType
		if errType == "" {
			errType = strconv.Itoa(resp.Status)
		}
		return set(errType, resp.ErrorMessage)
	case resp.ErrorType != "":
		return set(resp.ErrorType, resp.ErrorMessage)
	case resp.Err != "":
		return set("transport_error", resp.Err)
	case resp.Streamed && resp.Incomplete:
		return set("incomplete_stream", "the event stream ended without message_stop")
	}
	span.Status = StatusOK
	return false
}

func endTime(resp *wire.Response, start time.Time) time.Time {
	end := resp.End
	if end.IsZero() {
		end = resp.HeaderTime
	}
	if end.Before(start) {
		end = start
	}
	return end
}

func isCompactionSummary(b *wire.Body) bool {
	last := lastConversational(b)
	return last != nil && last.Role == wire.RoleUser && last.Synthetic == wire.SyntheticCompaction
}

func (t *Tracker) chatName(req *wire.Request) string {
	switch {
	case req.Endpoint == wire.EndpointOther:
		return req.Method + " " + req.Path
	case req.Body != nil && req.Body.Model != "":
		return t.names.join("chat ", req.Body.Model)
	}
	return "chat"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// parseTraceparent decodes a W3C traceparent header ("00-<trace>-<span>-<flags>").
func parseTraceparent(h string) *LinkedSpan {
	h = strings.TrimSpace(h)
	if h == "" || strings.Count(h, "-") != 3 {
		return nil
	}
	_, rest, _ := strings.Cut(h, "-")
	trace, rest, _ := strings.Cut(rest, "-")
	span, flagsHex, _ := strings.Cut(rest, "-")
	if len(trace) != 32 || len(span) != 16 || len(flagsHex) != 2 {
		return nil
	}
	var l LinkedSpan
	if _, err := hex.Decode(l.TraceID[:], []byte(trace)); err != nil || !l.TraceID.IsValid() {
		return nil
	}
	if _, err := hex.Decode(l.SpanID[:], []byte(span)); err != nil || !l.SpanID.IsValid() {
		return nil
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(flagsHex)); err != nil {
		return nil
	}
	l.Sampled = flags[0]&1 == 1
	return &l
}
