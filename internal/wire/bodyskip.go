package wire

import (
	"github.com/cespare/xxhash/v2"
)

// BodyKey is the conversation key of a request: its session id and agent id. A BodyCache
// compares the bodies of one key with each other only. The zero Headers give the key of
// requests that carry neither id.
func BodyKey(h Headers) string { return h.SessionID + "\x00" + h.AgentID }

// Hint is what a BodyCache knows of the latest body of one conversation: where a later body can
// be resumed and how to check that it has the same bytes up to there. It is immutable and safe
// to share between goroutines. A nil or zero Hint knows nothing: nothing can be skipped.
type Hint struct {
	// bodies are the remembered bodies of the key (a session's main thread and its side requests
	// share one), most recently used first.
	bodies []hintBody
}

// hintBody is what a Hint knows of one remembered body.
type hintBody struct {
	messagesStart int    // offset of the messages array's '['
	headHash      uint64 // of the bytes before it
	// checks are the entry's checkpoints, by offset, ascending; the entry never writes to the
	// slice once stored, so the hint shares it.
	checks []checkpoint
}

// PrefixSkipper checks a request body against a Hint as its bytes pass, so that the bytes before
// the furthest checkpoint that matched need not be kept: a proxy writes each chunk to it as it
// forwards it, keeps the bytes from Skippable() on, and at the end hands those over with
// Request.BodyFrom set to Resume(), for BodyCache.DecodeRequest to decode. It reads
// identity-encoded bodies only (a compressed body never matches). It is not safe for concurrent
// use: one per request. The zero value, like NewPrefixSkipper(nil), never skips anything.
type PrefixSkipper struct {
	pos    int64 // bytes written so far
	bodies []skipBody
	best   int     // 1 + index in bodies of the furthest match; 0 while none
	resume *Resume // at best's match, made on demand
}

// skipBody checks the body being written against one remembered body.
type skipBody struct {
	hintBody
	head  xxhash.Digest // of the bytes before messagesStart
	msgs  xxhash.Digest // of the messages array from its '[' up to where bytes were written
	next  int           // index of the next checkpoint to verify
	match int           // index of the furthest checkpoint verified, -1 while none
	at    xxhash.Digest // msgs at match
	done  bool          // stopped: a mismatch, or every checkpoint verified
}

// NewPrefixSkipper returns a skipper checking a body against h (nil: nothing is skipped).
func NewPrefixSkipper(h *Hint) *PrefixSkipper {
	s := &PrefixSkipper{}
	if h == nil {
		return s
	}
	s.bodies = make([]skipBody, len(h.bodies))
	for i, hb := range h.bodies {
		s.bodies[i] = skipBody{hintBody: hb, match: -1, done: len(hb.checks) == 0}
		s.bodies[i].head.Reset()
		s.bodies[i].msgs.Reset()
	}
	return s
}

// Write feeds the next bytes of the body, in order, in chunks of any size.
func (s *PrefixSkipper) Write(p []byte) {
	at := s.pos
	s.pos += int64(len(p))
	for i := range s.bodies {
		b := &s.bodies[i]
		if b.done {
			continue
		}
		b.feed(p, int(at))
		if b.match >= 0 && b.checks[b.match].off > s.skippable() {
			s.best, s.resume = i+1, nil
		}
	}
}

// skippable is Skippable as an int, as offsets are.
func (s *PrefixSkipper) skippable() int {
	if s.best == 0 {
		return 0
	}
	b := &s.bodies[s.best-1]
	return b.checks[b.match].off
}

// feed checks p, the body's bytes from offset at on.
func (b *skipBody) feed(p []byte, at int) {
	if at < b.messagesStart {
		n := min(len(p), b.messagesStart-at)
		_, _ = b.head.Write(p[:n])
		at, p = at+n, p[n:]
		if at < b.messagesStart {
			return
		}
		if b.head.Sum64() != b.headHash {
			b.done = true
			return
		}
	}
	for b.next < len(b.checks) {
		ck := &b.checks[b.next]
		n := min(len(p), ck.off-at)
		_, _ = b.msgs.Write(p[:n])
		at, p = at+n, p[n:]
		if at < ck.off {
			return
		}
		if b.msgs.Sum64() != ck.hash {
			b.done = true
			return
		}
		b.match, b.at = b.next, b.msgs
		b.next++
	}
	b.done = true
}

// Skippable is the body offset up to which the bytes are known to match a checkpoint: the bytes
// before it need not be kept. It is 0 while none has matched, and only grows.
func (s *PrefixSkipper) Skippable() int64 { return int64(s.skippable()) }

// Resume returns what decoding needs to start at Skippable(); nil while that is 0.
func (s *PrefixSkipper) Resume() *Resume {
	if s.best == 0 {
		return nil
	}
	if s.resume == nil {
		b := &s.bodies[s.best-1]
		s.resume = &Resume{messagesStart: b.messagesStart, headHash: b.headHash, check: b.checks[b.match], digest: b.at}
	}
	return s.resume
}

// Resume says where a request body handed over without its start resumes: the checkpoint of a
// remembered body its bytes were verified against, up to which they are that body's. The zero
// value resumes at no checkpoint: DecodeRequest reports the body as not decoded.
type Resume struct {
	// messagesStart and headHash are those of the entry the hint was taken from: with the
	// checkpoint they identify the bytes the body was checked against, whatever the entry has
	// become since.
	messagesStart int
	headHash      uint64
	check         checkpoint // where the body resumes
	// digest is the hash state of the messages array from its '[' up to check.off: the history
	// hash goes on from it over the bytes handed over.
	digest xxhash.Digest
}

// Offset is where the body handed over starts in the whole body; 0 for a nil Resume.
func (r *Resume) Offset() int64 {
	if r == nil {
		return 0
	}
	return int64(r.check.off)
}
