package wire

import (
	"container/list"
	"errors"
	"fmt"
	"slices"

	"github.com/zeebo/xxh3"
)

// checkpointRing is how many of the last messages of a body a BodyCache can resume at, plus one:
// the last message itself is never a checkpoint, since the next request changes it (Claude Code
// moves its cache_control marker to the newest message).
const checkpointRing = 4

// quickCheckLen bounds the prefix hashed first, to tell apart at once the conversations that
// share a cache key (a session's main thread and its side requests).
const quickCheckLen = 4 << 10

// DefaultBodyCacheMessages is the default bound of NewBodyCache: decoded messages kept over all
// conversations. A message costs about 40 bytes (see pastMessage), so the default stays under
// about 10 MB: some 200 conversations of 1 MB (1,100 messages each).
const DefaultBodyCacheMessages = 256 << 10

// BodyCache decodes request bodies exactly as ParseBody does, faster when a body repeats the
// start of an earlier one.
//
// Claude Code resends the whole conversation with every request and only changes its end: new
// messages, and the cache_control marker moving to the newest message. So the next body of a
// conversation usually begins with the same bytes as the last one, up to one of its last
// messages. For each conversation (its key) BodyCache remembers where the last messages of the
// latest body began, a hash of the bytes before each of those points, and what the decoder had
// decoded at each of them: decoded messages and offsets, never the raw bytes. Of the messages
// before those last ones it keeps only what ParseBody leaves of them (their roles and block
// counts, not the tool results of calls answered long ago: see Message.ToolResults), about 40
// bytes each. A new body whose start hashes the same is decoded from that point on; hashing
// runs at memory speed, decoding does not. When the members after the messages array (Claude
// Code's system prompt and tool schemas, tens of KB) hash the same as the last body's too, what
// they decoded to is reused. Anything else is decoded whole.
//
// Memory is bounded by the number of decoded messages kept over all conversations; the least
// recently used are dropped first. A BodyCache is not safe for concurrent use.
type BodyCache struct {
	maxMessages int
	messages    int // decoded messages kept over all entries
	byKey       map[string][]*list.Element
	lru         *list.List // of *bodyEntry, most recently used first

	hits, misses int

	// reuse (ReuseMessages) makes every Body's Messages one array, spare between Parses.
	reuse bool
	spare []Message

	// scratch is reused from one Parse to the next; its messages array is not (spare is).
	scratch scratch
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
	// past, window, firstUser and firstHuman are the decoder's state at the last checkpoint;
	// the state at an earlier one is a prefix of it. past has every message before the last
	// checkpoint, compactly; window has those from the first checkpoint on (checks[0].k) in
	// full, as decoded, before ParseBody's finishing touches (the texts and previews it keeps
	// of the first and last messages), with their texts, and windowResults the raw first texts
	// of their tool results (from index checks[0].results of the parser's results). A body
	// whose last assistant message comes before the window is only resumed when the messages
	// between have no tool results or tool calls (see restorable). firstUser is the index of
	// the first user message, -1 when past has none, and firstHuman its raw first human text.
	past          []pastMessage
	window        []Message
	windowTexts   []textSpans
	windowResults []span
	firstUser     int
	firstHuman    span
	// tail is the request's fields as the members after the messages array left them (Messages
	// nil, before ParseBody's finishing touches), tailLen and tailHash those members' bytes (to
	// the body's end), tailCB the cache breakpoints they count. Claude Code sends its system
	// prompt and tool schemas there, tens of KB that are the same from one request to the next.
	tail     Body
	tailLen  int
	tailHash uint64
	tailCB   int
}

// checkpoint is one place a later body can be resumed at: the start of message k.
type checkpoint struct {
	msgStart
	k    int
	hash uint64 // of the messages array's bytes before off
}

// pastMessage is what a BodyCache keeps of a message before the last ones of a body: what
// finish leaves of it when it comes before the last assistant message, and the flags of its
// text. 36 bytes, against the 120 of a Message and the 72 of its text.
type pastMessage struct {
	blocks BlockCounts
	role   uint8 // index in pastRoles
	flags  uint8 // pastHumanText, pastPlanMode, …
}

// pastRoles are the roles parseRole returns.
var pastRoles = [...]Role{RoleOther, RoleUser, RoleAssistant, RoleSystem}

const (
	pastHumanText = 1 << iota
	pastPlanMode
	pastCompact
	pastTaskNotification
	pastPlanExit
)

// toPast compacts a decoded message and its text.
func toPast(m *Message, t *messageText) pastMessage {
	pm := pastMessage{blocks: m.Blocks}
	for i, r := range pastRoles {
		if m.Role == r {
			pm.role = uint8(i)
		}
	}
	set := func(on bool, flag uint8) {
		if on {
			pm.flags |= flag
		}
	}
	set(m.HumanText, pastHumanText)
	set(t.planMode, pastPlanMode)
	set(t.compact, pastCompact)
	set(t.taskNotification, pastTaskNotification)
	set(t.planExit, pastPlanExit)
	return pm
}

// text returns its text's flags, without raw text. (The message itself is what resume makes of
// its role, blocks and pastHumanText: no tool results, tool_use ids or text.)
func (pm pastMessage) text() messageText {
	return messageText{
		planMode:         pm.flags&pastPlanMode != 0,
		compact:          pm.flags&pastCompact != 0,
		taskNotification: pm.flags&pastTaskNotification != 0,
		planExit:         pm.flags&pastPlanExit != 0,
	}
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
func NewBodyCache(maxMessages int, opts ...BodyCacheOption) *BodyCache {
	if maxMessages <= 0 {
		maxMessages = DefaultBodyCacheMessages
	}
	c := &BodyCache{maxMessages: maxMessages, byKey: make(map[string][]*list.Element), lru: list.New()}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BodyCacheOption configures a BodyCache.
type BodyCacheOption func(*BodyCache)

// ReuseMessages makes the Messages of the Bodies a BodyCache returns share one array, which the
// next Parse or DecodeRequest overwrites: for a caller that is done with a body's messages
// before it decodes the next one, as the pipeline is (the tracker reads them while it takes the
// request, and keeps only their count). A resumed 1 MB conversation then costs a copy of its
// ~1,000 decoded messages into that array instead of a new ~130 KB array for the garbage
// collector each time. The rest of a Body is its own. Default off: every Body is its own.
func ReuseMessages() BodyCacheOption { return func(c *BodyCache) { c.reuse = true } }

// Stats reports how many bodies were resumed from a remembered one, and how many were decoded
// whole.
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
	p := c.scratch.parser(b)
	p.track = true
	if c.reuse {
		p.out.Messages = c.spare[:0]
	}
	defer func() {
		// Keep the scratch, without references into this body.
		c.scratch.keep(&p, nil)
		if c.reuse {
			// The array this Body's messages are in (or the one a failed decode left) is the
			// next one's.
			if m := p.out.Messages; m != nil && cap(m) <= maxScratchMessages {
				c.spare = m[:0]
			}
		}
	}()
	elem, check, digest := c.find(key, b)
	var ok bool
	if elem != nil {
		c.hits++
		e := elem.Value.(*bodyEntry)
		p.resume(e, check, digest)
		ok = p.resumeParse(e) && e.restorable(lastAssistant(p.out.Messages))
	} else {
		c.misses++
		ok = p.parse()
	}
	if !ok || p.r.end() != nil {
		if elem != nil {
			// Decode it whole, for the same error as ParseBody's (or the fields the entry
			// did not keep).
			c.hits--
			c.misses++
			return ParseBody(body, contentEncoding)
		}
		if p.r.err == nil {
			return nil, errors.New("decoding request body: not a JSON object")
		}
		return nil, fmt.Errorf("decoding request body: %w", p.r.err)
	}
	c.store(key, &p, elem, check)
	p.finish()
	if len(p.out.Messages) == 0 {
		p.out.Messages = nil // as ParseBody leaves a body without messages, not the spare array
	}
	return p.out, nil
}

// DecodeRequest decodes the body of a Messages API or count_tokens request into req.Body, keyed
// by the request's session and agent ids, and records in req.ParseError why it could not (the
// error is also returned). Other endpoints' bodies, and empty ones, are left alone.
func (c *BodyCache) DecodeRequest(req *Request, body []byte) error {
	if len(body) == 0 || req.Endpoint == EndpointOther {
		return nil
	}
	b, err := c.Parse(req.Headers.SessionID+"\x00"+req.Headers.AgentID, body, req.ContentEncoding)
	if err != nil {
		req.ParseError = err.Error()
		return err
	}
	req.Body = b
	return nil
}

// find looks for a remembered body of key that b begins like, and returns its list element, the
// furthest checkpoint at which b is known to be the same, and the hash state of b's messages
// array up to it. elem is nil when there is none.
func (c *BodyCache) find(key string, b []byte) (elem *list.Element, check checkpoint, digest xxh3.Hasher) {
	for _, el := range c.byKey[key] {
		e := el.Value.(*bodyEntry)
		ms := e.messagesStart
		if len(b) <= e.checks[0].off || xxh3.Hash(b[ms:ms+e.quickLen]) != e.quick || xxh3.Hash(b[:ms]) != e.headHash {
			continue
		}
		d := xxh3.New()
		pos, found := ms, false
		for _, ck := range e.checks {
			if ck.off >= len(b) {
				break
			}
			_, _ = d.Write(b[pos:ck.off])
			pos = ck.off
			if d.Sum64() != ck.hash {
				break
			}
			elem, check, digest, found = el, ck, *d, true
		}
		if found {
			return elem, check, digest
		}
	}
	return nil, checkpoint{}, digest
}

// restorable reports whether the messages a resumed body takes from e.past (those before the
// window) are what ParseBody decodes them to, given the index of the body's last assistant
// message (-1: none). past keeps no tool results and no tool_use ids, which ParseBody keeps
// from that message on: only messages that have none can come from it.
func (e *bodyEntry) restorable(lastAssistant int) bool {
	from := e.checks[0].k
	for _, pm := range e.past[min(max(lastAssistant, 0), from):from] {
		switch pastRoles[pm.role] {
		case RoleUser:
			if pm.blocks.Get(BlockToolResult) > 0 {
				return false
			}
		case RoleAssistant:
			if pm.blocks.Get(BlockToolUse) > 0 {
				return false
			}
		}
	}
	return true
}

// resume sets the parser to the state it would have at check after decoding b from its start.
func (p *bodyParser) resume(e *bodyEntry, check checkpoint, digest xxh3.Hasher) {
	b := p.r.b
	rebase := func(s span) []byte {
		if !s.ok {
			return nil
		}
		// Not capped: store finds a raw string's offset from its capacity (see spanOf).
		return b[s.from:s.to]
	}
	msgs := p.out.Messages // ReuseMessages' spare array, or nil
	*p.out = e.head
	p.out.Tools.Names = slices.Clone(e.head.Tools.Names)
	if need := check.k + checkpointRing; cap(msgs) < need {
		// Room for the conversation to grow by a few requests before the spare array must.
		msgs = make([]Message, 0, need+need/4+16)
	}
	from := e.checks[0]
	// Written in place, not appended one by one: this is most of a resumed body's cost.
	msgs = slices.Grow(msgs[:0], from.k)[:from.k]
	p.msgs = slices.Grow(p.msgs[:0], from.k)[:from.k]
	clear(p.msgs)
	for i, pm := range e.past[:from.k] {
		msgs[i] = Message{Role: pastRoles[pm.role], Blocks: pm.blocks, HumanText: pm.flags&pastHumanText != 0}
		if pm.flags&^pastHumanText != 0 {
			p.msgs[i] = pm.text()
		}
	}
	p.fromPast = from.k
	p.out.Messages = append(msgs, e.window[:check.k-from.k]...)
	p.out.CacheBreakpoints = check.cb
	for _, t := range e.windowTexts[:check.k-from.k] {
		mt := t.messageText
		mt.human = rebase(t.human)
		p.msgs = append(p.msgs, mt)
	}
	if u := e.firstUser; u >= 0 && u < from.k {
		p.msgs[u].human = rebase(e.firstHuman)
	}
	// The results before the window's are only ever read for the last message's previews.
	p.results = slices.Grow(p.results[:0], check.results)[:from.results]
	clear(p.results)
	for _, s := range e.windowResults[:check.results-from.results] {
		p.results = append(p.results, rebase(s))
	}
	p.head = e.head
	p.messagesSeen = 1
	p.messagesStart = e.messagesStart
	p.shared = check.k
	p.startsFrom = check.k
	for _, ck := range e.checks {
		if ck.k < check.k {
			p.starts[ck.k%checkpointRing] = ck.msgStart
			p.startsFrom = min(p.startsFrom, ck.k)
		}
	}
	p.hist, p.histPos = digest, check.off
	for i, ck := range e.checks {
		if ck.k == check.k {
			p.known = e.checks[:i+1]
		}
	}
	p.r.i = check.off
	p.r.depth = 2 // in the request object, in its messages array
}

// resumeParse decodes the rest of the body after resume: the remaining messages, then the
// remaining members of the request object, unless their bytes are e's (then so is what they
// decode to).
func (p *bodyParser) resumeParse(e *bodyEntry) bool {
	if !p.r.elements(p.message) {
		return false
	}
	p.messagesEnd(true)
	b := p.r.b
	if rest := b[p.r.i:]; len(rest) != e.tailLen || xxh3.Hash(rest) != e.tailHash {
		return p.r.objectRest(p.member)
	}
	msgs, cb, history := p.out.Messages, p.out.CacheBreakpoints, p.out.HistoryHash
	*p.out = e.tail
	p.out.Messages, p.out.CacheBreakpoints, p.out.HistoryHash = msgs, cb+e.tailCB, history
	p.out.Tools.Names = slices.Clone(e.tail.Tools.Names)
	// The request object's closing brace and what follows it were among those bytes.
	p.r.i = len(b)
	p.r.depth--
	return true
}

// store remembers the body p decoded (before p.finish) under key, in place of the entry it was
// resumed from, if any.
func (c *BodyCache) store(key string, p *bodyParser, from *list.Element, fromCheck checkpoint) {
	n := len(p.out.Messages)
	if p.messagesSeen != 1 || n < 2 || len(p.checks) == 0 {
		return
	}
	b := p.r.b
	checks := slices.Clone(p.checks)
	first, last := checks[0], checks[len(checks)-1]

	var e *bodyEntry
	keep := 0 // messages of e.past still valid
	if from != nil {
		// The old entry's state up to its checkpoint is this body's too: extend it in place.
		e = from.Value.(*bodyEntry)
		keep = fromCheck.k
		c.messages -= len(e.past)
	} else {
		e = &bodyEntry{key: key}
	}
	e.past = e.past[:keep]
	for i := keep; i < last.k; i++ {
		e.past = append(e.past, toPast(&p.out.Messages[i], &p.msgs[i]))
	}
	spanOf := func(raw []byte) span {
		if raw == nil {
			return span{}
		}
		from := cap(b) - cap(raw)
		return span{from: from, to: from + len(raw), ok: true}
	}
	// The window's messages and texts were all decoded from this body or restored in full from
	// the old entry's window: a resumed body's first checkpoint is not before the old one's. The
	// window keeps them in full, tool results and tool_use ids made now.
	for i := first.k; i < last.k; i++ {
		p.materialize(&p.out.Messages[i], &p.msgs[i])
	}
	e.window = append(e.window[:0], p.out.Messages[first.k:last.k]...)
	e.windowTexts = e.windowTexts[:0]
	for _, t := range p.msgs[first.k:last.k] {
		e.windowTexts = append(e.windowTexts, textSpans{human: spanOf(t.human), messageText: t})
		e.windowTexts[len(e.windowTexts)-1].messageText.human = nil
	}
	e.windowResults = e.windowResults[:0]
	for _, raw := range p.results[first.results:last.results] {
		e.windowResults = append(e.windowResults, spanOf(raw))
	}
	e.firstUser, e.firstHuman = -1, span{}
	for i, m := range p.out.Messages[:last.k] {
		if m.Role == RoleUser {
			e.firstUser, e.firstHuman = i, spanOf(p.msgs[i].human)
			break
		}
	}
	// finish writes the previews of the last user or assistant message into its tool results:
	// when that message is in the window, keep its own copy of them.
	for i := n - 1; i >= 0; i-- {
		if r := p.out.Messages[i].Role; r == RoleUser || r == RoleAssistant {
			if i >= first.k && i < last.k {
				w := &e.window[i-first.k]
				w.ToolResults = slices.Clone(w.ToolResults)
			}
			break
		}
	}
	e.head = p.head
	e.head.Messages = nil
	e.head.Tools.Names = slices.Clone(p.head.Tools.Names)
	e.messagesStart = p.messagesStart
	e.headHash = xxh3.Hash(b[:p.messagesStart])
	e.checks = checks
	e.quickLen = min(quickCheckLen, checks[0].off-p.messagesStart)
	e.quick = xxh3.Hash(b[p.messagesStart : p.messagesStart+e.quickLen])
	e.tail = *p.out
	e.tail.Messages = nil
	e.tail.Tools.Names = slices.Clone(p.out.Tools.Names)
	e.tailLen = len(b) - p.tailStart
	e.tailHash = xxh3.Hash(b[p.tailStart:])
	e.tailCB = p.out.CacheBreakpoints - p.tailCB
	c.messages += len(e.past)

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
	c.messages -= len(e.past)
	c.lru.Remove(el)
}
