// Package instrument is cctrace's turn tracker: plain Go with no network, no goroutines and no
// globals. It is fed the exchanges the proxy saw (wire.Request, then wire.Response) and turns
// them into spans: one trace per agentic turn, with a chat span per API attempt, an execute_tool
// span per tool round trip, and subagents nested under the Agent tool call that started them.
// Sinks (OpenTelemetry, Prometheus, the terminal) translate those spans; nothing here knows them.
package instrument

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// The tracker's entry points, in the order an exchange goes through them: Request places it
// (sessions.go, then turns.go, subagents.go, compaction.go, side.go or undecoded.go), Response
// completes it (totals.go, tools.go, then turns.go or subagents.go), Tick and Close end what
// waited too long.

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
	t.context(ex, msg, failed)
	for tot := range counts(ex.turn, ex.sub) {
		tot.Add(span)
	}
	if msg != nil && !failed && ex.chain != nil && ex.tool == nil {
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
// another replica may go on with the turn) and forgets all state. With WithInFlight, the turns
// in flight that the next process can go on with are kept in the store instead, and their open
// spans left to it.
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
		if ex.chain != nil {
			ex.chain.failed = true // what the client sends next repeats it, or goes on after it
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	for _, sess := range t.sortedSessions() {
		if t.cfg.inFlight != nil && suspendable(sess) && t.suspend(ctx, sess, now) {
			continue
		}
		t.evict(sess, now, outcome)
	}
	t.reportSessions()
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

func (t *Tracker) chatName(req *wire.Request) string {
	switch {
	case req.Endpoint == wire.EndpointOther:
		return req.Method + " " + req.Path
	case req.Body != nil && req.Body.Model != "":
		return t.names.join("chat ", req.Body.Model)
	}
	return "chat"
}

// exchange is one request in flight.
type exchange struct {
	span  *Span // &root
	sess  *session
	chain *chain       // nil for side requests
	turn  *turn        // the turn whose totals it counts into; nil for standalone traces
	sub   *subagentRun // set for subagent requests
	tool  *openTool    // set for the requests a running tool call makes
	hash  uint64
	// orphan: its span waits for a turn to adopt it; done: its response already ended;
	// untraced: a request outside any session (RequestNoSession), in no trace.
	orphan, done, untraced bool
	since                  time.Time
	// root, chat and body are where span, span.Chat and span.Chat.Request.Body (the request's
	// body without its messages) live: one allocation per request instead of four. Sinks do not
	// keep spans past a call, and nothing else points at them.
	root Span
	chat Chat
	body wire.Body
}
