package instrument

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Span identity: trace and span ids, the trace a turn goes into (its own, or the client's with
// WithJoinClientTrace), and span names.

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

// turnTraceID returns the trace id of a turn that body (the first request of it the tracker
// sees) goes on with: a hash of the session, the conversation's first human text and the index
// of the message that opened the turn (wire.Body.TurnOpener). Every request of a turn carries
// them, so a cctrace that picks a session up mid-turn (another replica, or this one after a
// restart) puts its part of the turn in the same trace (up to a limit wire.Body.TurnOpener
// names). Without them (a body not decoded, no message that opens a turn) the id is random, and
// so it is in a session the client did not name (a fingerprint of its first text, or
// "unknown"): people whose conversations begin alike share such a session id, and must not
// share trace ids.
//
// Two turns of one session can open at the same message: the user rewinds the conversation and
// prompts again, or sends a prompt again that Claude Code put back after an interruption before
// any answer. The second one seen here hashes in how many came before it, so no trace holds two
// turns (of the last maxTurnTraces); another replica that picks such a turn up mid-way cannot
// tell, and joins the first. (And a part of such a turn that was handed off and comes back
// here starts a trace of its own.)
func (t *Tracker) turnTraceID(sess *session, body *wire.Body) TraceID {
	if body == nil || body.TurnOpener < 0 || !sess.clientID {
		return t.traceID()
	}
	b := append(t.hashBuf[:0], sess.id...)
	b = binary.BigEndian.AppendUint64(b, body.FirstHumanTextHash)
	b = binary.BigEndian.AppendUint64(b, uint64(body.TurnOpener))
	var id TraceID
	sum := sha256.Sum256(b)
	copy(id[:], sum[:])
	if !t.traces.claim(id) {
		b = binary.BigEndian.AppendUint64(append(b[:0], id[:]...), t.traces.again(id))
		sum = sha256.Sum256(b)
		copy(id[:], sum[:])
		t.traces.claim(id)
	}
	t.hashBuf = b[:0]
	if !id.IsValid() {
		return t.traceID()
	}
	return id
}

// maxTurnTraces is how many trace ids of turns the tracker remembers: far more turns than a sink
// such as summary.Store keeps, at a few dozen bytes each.
const maxTurnTraces = 8192

// traceSet is a bounded set of trace ids, forgetting the oldest first. The zero value is empty
// and ready to use. The tracker keeps the trace ids its turns went into in one: a trace takes one
// turn, since sinks key turns by trace id (/api/turns, the turns page).
type traceSet struct {
	ids   map[TraceID]uint64 // how many times each was asked for again (see again)
	order []TraceID          // in the order claimed, a ring once full
	next  int                // the oldest entry of a full ring
}

// claim adds id to the set, and reports whether it was not there yet.
func (s *traceSet) claim(id TraceID) bool {
	if _, taken := s.ids[id]; taken {
		return false
	}
	if s.ids == nil {
		s.ids = make(map[TraceID]uint64)
	}
	if len(s.order) < maxTurnTraces {
		s.order = append(s.order, id)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxTurnTraces
	}
	s.ids[id] = 0
	return true
}

// again counts one more turn that would have gone into id, which the set holds, and returns
// that count, from 1: a number to tell that turn's trace id from id's.
func (s *traceSet) again(id TraceID) uint64 {
	s.ids[id]++
	return s.ids[id]
}

// release takes id out of the set, so that a turn may go into it again. (Its place in the ring
// stays: claimed again, it may be forgotten before its turn.)
func (s *traceSet) release(id TraceID) { delete(s.ids, id) }

// Joining the client's traces (WithJoinClientTrace): a turn goes into the trace that Claude
// Code's own tracing propagated with its first request, and chat spans run under the client's
// span that sent them.

// underClient makes a chat span just placed in a trace a child of the client's span that sent
// its request, when that request's traceparent is in the same trace and the tracker joins the
// client's traces. Its link would name its parent again: it goes.
func (t *Tracker) underClient(s *Span) {
	if l := s.Link; t.cfg.joinClient && l != nil && l.TraceID == s.TraceID {
		s.Parent, s.ClientParent, s.Link = l.SpanID, true, nil
	}
}

// spanNameSlots is the size of a spanNames table.
const spanNameSlots = 64

// maxCachedName bounds the values a spanNames table keeps; longer ones are joined every time.
const maxCachedName = 128

// spanNames joins span name prefixes with values from the traffic ("chat " and a model,
// "execute_tool " and a tool name) and remembers the results in a fixed table, so that the few
// models and tools a session uses get their span names built once rather than once per span.
// A value that collides with another only costs a new string; the table never grows.
type spanNames struct {
	seed  maphash.Seed
	slots [spanNameSlots]string // prefix+value, by hash of value
}

func newSpanNames() spanNames { return spanNames{seed: maphash.MakeSeed()} }

// join returns prefix+value.
func (n *spanNames) join(prefix, value string) string {
	if len(value) > maxCachedName {
		return prefix + value
	}
	slot := &n.slots[maphash.String(n.seed, value)%spanNameSlots]
	if s := *slot; len(s) == len(prefix)+len(value) && s[:len(prefix)] == prefix && s[len(prefix):] == value {
		return s
	}
	*slot = prefix + value
	return *slot
}
