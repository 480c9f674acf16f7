package wire

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// checkpointRing is how many of the last messages of a body a BodyCache can resume at, plus one:
// the last message itself is never a checkpoint, since the next request changes it (Claude Code
// moves its cache_control marker to the newest message).
const checkpointRing = 4

// denseCheckpointGap is how far apart, in bytes of the messages array, a BodyCache keeps
// checkpoints besides those of the last messages: a body handed over from a Resume (see
// PrefixSkipper) can start at most about this far before where it stops repeating the last one,
// whatever a request changes of its last messages.
const denseCheckpointGap = 64 << 10

// maxDenseCheckpoints bounds the dense checkpoints of one body (a 32 MiB body, the most the
// Messages API takes, has 512 of them).
const maxDenseCheckpoints = 1024

// quickCheckLen bounds the prefix hashed first, to tell apart at once the conversations that
// share a cache key (a session's main thread and its side requests).
const quickCheckLen = 4 << 10

// DefaultBodyCacheMessages is the default bound of NewBodyCache: decoded messages kept over all
// conversations. A message costs a few hundred bytes, so the default stays under about 16 MB.
const DefaultBodyCacheMessages = 32 << 10

// BodyCache decodes request bodies exactly as ParseBody does, faster when a body repeats the
// start of an earlier one.
//
// Claude Code resends the whole conversation with every request and only changes its end: new
// messages, and the cache_control marker moving to the newest message. So the next body of a
// conversation usually begins with the same bytes as the last one, up to one of its last
// messages. For each conversation (its key) BodyCache remembers where the last messages of the
// latest body began, a hash of the bytes before each of those points, and what the decoder had
// decoded at each of them: decoded messages and offsets, never the raw bytes. A new body whose
// start hashes the same is decoded from that point on; hashing runs at memory speed, decoding
// does not. Anything else is decoded whole.
//
// Memory is bounded by the number of decoded messages kept over all conversations; the least
// recently used are dropped first. A BodyCache is not safe for concurrent use, except for Hint.
type BodyCache struct {
	maxMessages int
	messages    int // decoded messages kept over all entries
	byKey       map[string][]*list.Element
	lru         *list.List // of *bodyEntry, most recently used first

	hits, misses int

	// Scratch reused from one Parse to the next: the parser's per-message texts, tool result
	// texts and dense checkpoints, which never outlive a Parse.
	texts   []messageText
	results [][]byte
	dense   []checkpoint

	// hints holds a Hint per key with entries, replaced whenever they change, for Hint
	// callers on other goroutines.
	mu    sync.RWMutex
	hints map[string]*Hint
}

// bodyEntry is what a BodyCache remembers of the latest body of one conversation.
type bodyEntry struct {
	key string
	// head is the request's fields before its messages array, with Messages nil;
	// headHash hashes the bytes before the array.
	head          Body
	headHash      uint64
	messagesStart int
	// quick hashes the first quickLen bytes of the messages array.
	quickLen int
	quick    uint64
	checks   []checkpoint // by offset, ascending
	// messages, texts and results are the decoder's state at the last checkpoint; the state at
	// an earlier one is a prefix of each. Messages are as decoded, before ParseBody's finishing
	// touches (the texts and previews it keeps of the first and last messages).
	messages []Message
	texts    []textSpans
	results  []span
	// first is the first user message's human text among messages, and lasts the texts of the
	// last user or assistant message before each checkpoint of the last messages, decoded when
	// their bytes were there: a body handed over from a Resume may not include them.
	first firstHuman
	lasts []lastText
}

// checkpoint is one place a later body can be resumed at: the start of message k.
type checkpoint struct {
	msgStart
	k     int
	hash  uint64 // of the messages array's bytes before off
	dense bool   // one of the checkpoints every denseCheckpointGap bytes
}

// span is a raw string of the body, by offsets; ok false stands for a nil slice.
type span struct {
	from, to int
	ok       bool
}

// textSpans is a messageText by offsets.
type textSpans struct {
	human span
	messageText
}

// NewBodyCache returns a cache keeping at most maxMessages decoded messages (at least one
// conversation's worth is always kept); maxMessages <= 0 means DefaultBodyCacheMessages.
func NewBodyCache(maxMessages int) *BodyCache {
	if maxMessages <= 0 {
		maxMessages = DefaultBodyCacheMessages
	}
	return &BodyCache{maxMessages: maxMessages, byKey: make(map[string][]*list.Element), lru: list.New(), hints: make(map[string]*Hint)}
}

// Stats reports how many bodies were resumed from a remembered one (handed over whole or from a
// Resume), and how many were decoded whole.
func (c *BodyCache) Stats() (resumed, whole int) { return c.hits, c.misses }

// maxEntriesPerKey is how many bodies of one key a BodyCache remembers: a session's main thread
// and its side requests (titles, summaries) come with the same session id.
const maxEntriesPerKey = 2

// Parse decodes body as ParseBody(body, contentEncoding) does. key names the conversation the
// body belongs to (for Claude Code: the session id and the agent id); bodies of one key are
// compared with each other only.
func (c *BodyCache) Parse(key string, body []byte, contentEncoding string) (*Body, error) {
	b, err := Decompress(contentEncoding, body)
	if err != nil {
		return nil, fmt.Errorf("decoding request body: %w", err)
	}
	p := c.parser(b, 0)
	defer c.keepScratch(p)
	elem, check, digest := c.find(key, b)
	var ok bool
	if elem != nil {
		c.hits++
		p.resume(elem.Value.(*bodyEntry), check, digest)
		ok = p.resumeParse()
	} else {
		c.misses++
		ok = p.parse()
	}
	if !ok || p.r.end() != nil {
		if elem != nil {
			// Decode it whole, for the same error as ParseBody's.
			return ParseBody(body, contentEncoding)
		}
		if p.r.err == nil {
			return nil, errors.New("decoding request body: not a JSON object")
		}
		return nil, fmt.Errorf("decoding request body: %w", p.r.err)
	}
	c.store(key, p, elem, check)
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.out, nil
}

// parser returns a parser of b, the bytes of a body from offset base on, using the cache's
// scratch.
func (c *BodyCache) parser(b []byte, base int) *bodyParser {
	return &bodyParser{r: jsonReader{b: b, base: base}, out: &Body{}, track: true, msgs: c.texts[:0], results: c.results[:0], dense: c.dense[:0]}
}

// keepScratch takes back the scratch of a parser, without references into its body.
func (c *BodyCache) keepScratch(p *bodyParser) {
	clear(p.msgs)
	clear(p.results)
	c.texts, c.results, c.dense = p.msgs[:0], p.results[:0], p.dense[:0]
}

// DecodeRequest decodes the body of a Messages API or count_tokens request into req.Body, keyed
// by BodyKey(req.Headers), and records in req.ParseError why it could not (the error is also
// returned). Other endpoints' bodies, and empty ones, are left alone.
//
// When req.BodyFrom is set, body holds the bytes from req.BodyFrom.Offset() on only, the earlier
// ones having been verified by a PrefixSkipper against a Hint of this cache. The result is then
// exactly what ParseBody of the whole body gives, or, when the cache can no longer resume there
// (its entry was replaced, changed or dropped since the hint was taken, or decoding needs the
// bytes that were skipped), an error starting "not decoded: ". Never a wrong Body.
func (c *BodyCache) DecodeRequest(req *Request, body []byte) error {
	if req.Endpoint == EndpointOther || len(body) == 0 && req.BodyFrom == nil {
		return nil
	}
	var b *Body
	var err error
	if req.BodyFrom != nil {
		b, err = c.parseFrom(BodyKey(req.Headers), body, req.ContentEncoding, req.BodyFrom)
	} else {
		b, err = c.Parse(BodyKey(req.Headers), body, req.ContentEncoding)
	}
	if err != nil {
		req.ParseError = err.Error()
		return err
	}
	req.Body = b
	return nil
}

// Hint returns what the cache knows of the latest bodies of key (see BodyKey), for a
// PrefixSkipper; nil when it knows none. It is safe for concurrent use with Parse,
// DecodeRequest and itself.
func (c *BodyCache) Hint(key string) *Hint {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.hints[key]
}

// publish replaces the Hint of key after its entries changed.
func (c *BodyCache) publish(key string) {
	var h *Hint
	if els := c.byKey[key]; len(els) > 0 {
		h = &Hint{bodies: make([]hintBody, len(els))}
		for i, el := range els {
			e := el.Value.(*bodyEntry)
			h.bodies[i] = hintBody{messagesStart: e.messagesStart, headHash: e.headHash, checks: e.checks}
		}
	}
	c.mu.Lock()
	if h == nil {
		delete(c.hints, key)
	} else {
		c.hints[key] = h
	}
	c.mu.Unlock()
}

// parseFrom decodes a body handed over from r.Offset() on (tail), its earlier bytes having been
// verified against the entry r was taken from.
func (c *BodyCache) parseFrom(key string, tail []byte, contentEncoding string, r *Resume) (*Body, error) {
	if enc := strings.TrimSpace(contentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, fmt.Errorf("not decoded: a body with Content-Encoding %q was handed over without its start", enc)
	}
	elem, check := c.entryAt(key, r)
	if elem == nil {
		return nil, fmt.Errorf("not decoded: the body was handed over from offset %d on, and the conversation's body it was checked against has since changed or been dropped", r.Offset())
	}
	c.hits++
	p := c.parser(tail, r.check.off)
	defer c.keepScratch(p)
	p.resume(elem.Value.(*bodyEntry), check, r.digest)
	ok := p.resumeParse()
	if err := p.r.end(); !ok || err != nil {
		// The bytes before the resume point are those of a body that was decoded: the first
		// error is past it, where ParseBody of the whole body would meet it too.
		if err == nil {
			return nil, errors.New("not decoded: the body handed over ended its messages array without an error, yet not the request object")
		}
		return nil, fmt.Errorf("decoding request body: %w", err)
	}
	if p.lost {
		return nil, fmt.Errorf("not decoded: the body's history hash needs bytes before offset %d, which were not handed over", r.Offset())
	}
	c.store(key, p, elem, check)
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.out, nil
}

// entryAt finds an entry of key that can resume r, and the index of r's checkpoint in it; nil
// when there is none. The decoder's state at a checkpoint depends only on the bytes before it, so
// any entry with the same head and a checkpoint at the same offset with the same hash will do:
// the one r was taken from, even if it was stored into since (the pipeline decoding the previous
// request after this one's hint was taken), as long as it still has that checkpoint.
func (c *BodyCache) entryAt(key string, r *Resume) (*list.Element, int) {
	for _, el := range c.byKey[key] {
		e := el.Value.(*bodyEntry)
		if e.messagesStart != r.messagesStart || e.headHash != r.headHash {
			continue
		}
		i, ok := slices.BinarySearchFunc(e.checks, r.check.off, func(ck checkpoint, off int) int { return cmp.Compare(ck.off, off) })
		if ok && e.checks[i].msgStart == r.check.msgStart && e.checks[i].k == r.check.k && e.checks[i].hash == r.check.hash {
			return el, i
		}
	}
	return nil, 0
}

// find looks for a remembered body of key that b begins like, and returns its list element, the
// index of the furthest checkpoint at which b is known to be the same, and the hash state of b's
// messages array up to it. elem is nil when there is none.
func (c *BodyCache) find(key string, b []byte) (elem *list.Element, check int, digest xxhash.Digest) {
	for _, el := range c.byKey[key] {
		e := el.Value.(*bodyEntry)
		ms := e.messagesStart
		if len(b) <= e.checks[0].off || xxhash.Sum64(b[ms:ms+e.quickLen]) != e.quick || xxhash.Sum64(b[:ms]) != e.headHash {
			continue
		}
		d := xxhash.New()
		pos, found := ms, false
		for i, ck := range e.checks {
			if ck.off >= len(b) {
				break
			}
			_, _ = d.Write(b[pos:ck.off])
			pos = ck.off
			if d.Sum64() != ck.hash {
				break
			}
			elem, check, digest, found = el, i, *d, true
		}
		if found {
			return elem, check, digest
		}
	}
	return nil, 0, digest
}

// resume sets the parser to the state it would have at e's checkpoint idx after decoding the
// body from its start; digest is the hash state of the messages array up to there. The parser's
// bytes are the whole body (r.base 0), or the body from that checkpoint on: the raw texts before
// it are then not there, and finish uses what e decoded of them.
func (p *bodyParser) resume(e *bodyEntry, idx int, digest xxhash.Digest) {
	check := e.checks[idx]
	b, base := p.r.b, p.r.base
	rebase := func(s span) []byte {
		if !s.ok || s.from < base {
			return nil
		}
		return b[s.from-base : s.to-base : s.to-base]
	}
	*p.out = e.head
	p.out.Tools.Names = slices.Clone(e.head.Tools.Names)
	p.out.Messages = append(make([]Message, 0, check.k+checkpointRing), e.messages[:check.k]...)
	p.out.CacheBreakpoints = check.cb
	for _, t := range e.texts[:check.k] {
		mt := t.messageText
		mt.human = rebase(t.human)
		p.msgs = append(p.msgs, mt)
	}
	for _, s := range e.results[:check.results] {
		p.results = append(p.results, rebase(s))
	}
	p.head = e.head
	p.messagesSeen = 1
	p.messagesStart = e.messagesStart
	p.shared = check.k
	// The starts of the messages just before check, as far back as they are checkpoints one
	// after the other: the last messages of a body shorter than e's are among them.
	p.startsFrom = check.k
	for i := idx - 1; i >= 0 && e.checks[i].k == p.startsFrom-1 && check.k-e.checks[i].k < checkpointRing; i-- {
		p.starts[e.checks[i].k%checkpointRing] = e.checks[i].msgStart
		p.startsFrom--
	}
	p.lastDense = e.messagesStart
	for _, ck := range e.checks[:idx] {
		if ck.dense {
			p.dense = append(p.dense, ck)
			p.lastDense = ck.off
		}
	}
	p.cands, p.candAt = e.checks[idx+1:], 0
	p.hist, p.histPos = digest, check.off
	p.known = e.checks[:idx+1]
	if base > 0 {
		p.gone, p.first, p.lasts = check.k, e.first, e.lasts
	}
	p.r.i = check.off - base
	p.r.depth = 2 // in the request object, in its messages array
}

// resumeParse decodes the rest of the body after resume: the remaining messages, then the
// remaining members of the request object.
func (p *bodyParser) resumeParse() bool {
	p.messagesEnd(p.r.elements(p.message))
	return p.r.objectRest(p.member)
}

// store remembers the body p decoded (before p.finish) under key, in place of the entry it was
// resumed from (at its checkpoint fromCheck), if any.
func (c *BodyCache) store(key string, p *bodyParser, from *list.Element, fromCheck int) {
	n := len(p.out.Messages)
	if p.messagesSeen != 1 || n < 2 || len(p.checks) == 0 || p.lost {
		return
	}
	b, base := p.r.b, p.r.base
	checks := slices.Clone(p.checks)
	if from != nil {
		checks = carryChecks(from.Value.(*bodyEntry).checks[:fromCheck+1], checks)
	}
	last := checks[len(checks)-1]

	var e *bodyEntry
	keep := 0 // messages (and texts, results) of e still valid
	if from != nil {
		// The old entry's state up to its checkpoint is this body's too: extend it in place.
		e = from.Value.(*bodyEntry)
		keep = e.checks[fromCheck].k
		c.messages -= len(e.messages)
		e.results = e.results[:e.checks[fromCheck].results]
	} else {
		e = &bodyEntry{key: key}
		e.results = nil
	}
	e.messages = append(e.messages[:keep], p.out.Messages[keep:last.k]...)
	e.texts = e.texts[:keep]
	spanOf := func(raw []byte) span {
		if raw == nil {
			return span{}
		}
		from := base + cap(b) - cap(raw)
		return span{from: from, to: from + len(raw), ok: true}
	}
	for _, t := range p.msgs[keep:last.k] {
		e.texts = append(e.texts, textSpans{human: spanOf(t.human), messageText: t})
		e.texts[len(e.texts)-1].messageText.human = nil
	}
	for _, raw := range p.results[len(e.results):last.results] {
		e.results = append(e.results, spanOf(raw))
	}
	// finish writes the previews of the last user or assistant message into its tool results:
	// when that message is among those kept, keep its own copy of them.
	for i := n - 1; i >= 0; i-- {
		if r := p.out.Messages[i].Role; r == RoleUser || r == RoleAssistant {
			if i < last.k {
				e.messages[i].ToolResults = slices.Clone(e.messages[i].ToolResults)
			}
			break
		}
	}
	fu := slices.IndexFunc(e.messages, func(m Message) bool { return m.Role == RoleUser })
	switch {
	case fu < 0:
		e.first = firstHuman{at: -1}
	case fu >= keep:
		// Among the messages new to e, whose raw bytes are there.
		e.first = firstHumanOf(fu, p.msgs[fu].human)
	}
	e.lasts = p.lastTexts(checks, e.lasts, keep)
	e.head = p.head
	e.head.Messages = nil
	e.head.Tools.Names = slices.Clone(p.head.Tools.Names)
	e.messagesStart = p.messagesStart
	if base == 0 {
		// (When resumed, the bytes before the array are the old entry's: its hashes hold.)
		e.headHash = xxhash.Sum64(b[:p.messagesStart])
		e.quickLen = min(quickCheckLen, checks[0].off-p.messagesStart)
		e.quick = xxhash.Sum64(b[p.messagesStart : p.messagesStart+e.quickLen])
	}
	e.checks = checks
	c.messages += len(e.messages)

	if from != nil {
		c.lru.MoveToFront(from)
		c.touch(key, from)
	} else {
		els := append([]*list.Element{c.lru.PushFront(e)}, c.byKey[key]...)
		c.byKey[key] = els
		if len(els) > maxEntriesPerKey {
			c.evict(els[len(els)-1])
		}
	}
	for c.messages > c.maxMessages && c.lru.Len() > 1 {
		c.evict(c.lru.Back())
	}
	c.publish(key)
}

// lastTexts returns, for each checkpoint of the last messages among checks, the last texts of
// the last user or assistant message before it: what finish needs when a body handed over from
// there holds no such message (Claude Code's bodies often end in a system-role message). They are
// taken from old, the entry's (valid for its first keep messages), or decoded.
func (p *bodyParser) lastTexts(checks []checkpoint, old []lastText, keep int) []lastText {
	var lasts []lastText
	n := len(p.out.Messages)
	for _, ck := range checks {
		if ck.k < n-(checkpointRing-1) {
			continue
		}
		j := ck.k - 1
		for j >= 0 && p.out.Messages[j].Role != RoleUser && p.out.Messages[j].Role != RoleAssistant {
			j--
		}
		if j < 0 || len(lasts) > 0 && lasts[len(lasts)-1].at == j {
			continue
		}
		if i := slices.IndexFunc(old, func(t lastText) bool { return t.at == j }); i >= 0 && j < keep {
			lasts = append(lasts, old[i])
		} else if j >= p.gone {
			lasts = append(lasts, p.lastTextOf(j))
		}
	}
	return lasts
}

// maxCarriedChecks bounds the checkpoints an entry carries over from the bodies before it.
const maxCarriedChecks = 8

// carryChecks returns the checkpoints of a body resumed at the last of old: its own (checks),
// plus those of old that are not among them. Every checkpoint of old up to the resume point holds
// for this body too (the bytes before it are the same), and keeping the last few matters when
// the pipeline is behind: a request whose hint was taken before the previous request of its
// conversation was decoded resumes at a checkpoint of the body before, which the previous one
// may not have among its own (it grew past it by more than its last messages). Dense
// checkpoints are there anyway; at most maxCarriedChecks others are carried.
func carryChecks(old, checks []checkpoint) []checkpoint {
	var carried []checkpoint
	for i := len(old) - 1; i >= 0 && len(carried) < maxCarriedChecks; i-- {
		ck := old[i]
		if ck.dense {
			continue
		}
		if _, found := slices.BinarySearchFunc(checks, ck.off, func(c checkpoint, off int) int { return cmp.Compare(c.off, off) }); !found {
			carried = append(carried, ck)
		}
	}
	if len(carried) == 0 {
		return checks
	}
	checks = append(checks, carried...)
	slices.SortFunc(checks, func(a, b checkpoint) int { return cmp.Compare(a.off, b.off) })
	return checks
}

// touch moves el to the front of key's entries.
func (c *BodyCache) touch(key string, el *list.Element) {
	els := c.byKey[key]
	i := slices.Index(els, el)
	if i > 0 {
		copy(els[1:i+1], els[:i])
		els[0] = el
	}
}

// evict forgets an entry.
func (c *BodyCache) evict(el *list.Element) {
	e := el.Value.(*bodyEntry)
	els := slices.DeleteFunc(c.byKey[e.key], func(x *list.Element) bool { return x == el })
	if len(els) == 0 {
		delete(c.byKey, e.key)
	} else {
		c.byKey[e.key] = els
	}
	c.messages -= len(e.messages)
	c.lru.Remove(el)
	c.publish(e.key)
}
