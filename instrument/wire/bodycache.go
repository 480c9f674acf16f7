package wire

import (
	"cmp"
	"container/list"
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
// conversations. A message costs what a pastMessage does (unsafe.Sizeof), so the bound is one on
// memory too.
const DefaultBodyCacheMessages = 256 << 10

// maxResumeInput bounds the buffer a BodyCache keeps for what it decodes of a resumed body.
const maxResumeInput = 1 << 20

// resumePrefix stands, in what the decoder reads of a resumed body, for the body up to the
// message it resumes at: an object whose first member is an array, of which that message is
// the first element. The decoder then reads the rest of the body as the rest of that object.
const resumePrefix = `{"":[`

// BodyCache decodes request bodies exactly as ParseBody does, faster when a body repeats the
// start of an earlier one.
//
// Claude Code resends the whole conversation with every request and only changes its end: new
// messages, and the cache_control marker moving to the newest message. So the next body of a
// conversation usually begins with the same bytes as the last one, up to one of its last
// messages. For each conversation (its key) BodyCache remembers where the last messages of the
// latest body began, a hash of the bytes before each of those points, and what ParseBody keeps
// of the messages before them (their roles, block counts and a few flags, not the tool results
// of calls answered long ago: see Message.ToolResults), about 40 bytes each, never the raw
// bytes. A new body whose start hashes the same is decoded from that point on; hashing runs at
// memory speed, decoding does not. When the members after the messages array (Claude Code's
// system prompt and tool schemas, tens of KB) hash the same as the last body's too, what they
// decoded to is reused. Anything else is decoded whole.
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
	// in holds what the decoder reads of a resumed body, digests the hash states find leaves.
	in      []byte
	digests [checkpointRing]xxh3.Hasher
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
	// past has every message before the last checkpoint, compactly; firstUser is the index of
	// the first user message among them (-1: none), firstHuman its raw first human text.
	past       []pastMessage
	firstUser  int
	firstHuman span
	// workingDirectory is Body.WorkingDirectory when a message before the last checkpoint named
	// it, the workingDirectoryAt-th.
	workingDirectory   string
	workingDirectoryAt int
	// tail is the request's fields as the members after the messages array left them (Messages
	// nil, before ParseBody's finishing touches), tailLen and tailHash those members' bytes (to
	// the body's end), tailCB the cache breakpoints they count. Claude Code sends its system
	// prompt and tool schemas there, tens of KB that are the same from one request to the next.
	tail     Body
	tailLen  int
	tailHash uint64
	tailCB   int
	// anatomy is what the body's Anatomy was made of (see anatomySnapshot).
	anatomy anatomySnapshot
}

// checkpoint is one place a later body can be resumed at: the start of message k.
type checkpoint struct {
	msgStart
	k    int
	hash uint64 // of the messages array's bytes before off
}

// pastMessage is what a BodyCache keeps of a message before the last ones of a body: what
// finish leaves of it when it comes before the last assistant message, and the marks of its
// text: a fraction of a Message, which also holds its text.
type pastMessage struct {
	blocks    BlockCounts
	role      uint8 // index in roles
	synthetic uint8 // index in syntheticKinds
	humanText bool
	marks     textMarks
}

// toPast compacts a decoded message and its text.
func toPast(m *Message, t *messageText) pastMessage {
	return pastMessage{
		blocks:    m.Blocks,
		role:      uint8(max(slices.Index(roles[:], m.Role), 0)),
		synthetic: uint8(max(slices.Index(syntheticKinds[:], m.Synthetic), 0)),
		humanText: m.HumanText,
		marks:     t.marks,
	}
}

// message returns the message as finish leaves it when it comes before the last assistant
// message and is neither the first user message nor the last one spoken.
func (pm pastMessage) message() Message {
	return Message{Role: roles[pm.role], Blocks: pm.blocks, HumanText: pm.humanText, Synthetic: syntheticKinds[pm.synthetic]}
}

// hasTools reports whether the message has what finish would make ToolResults or ToolUseIDs
// of, were it after the last assistant message.
func (pm pastMessage) hasTools() bool {
	switch roles[pm.role] {
	case RoleUser:
		return pm.blocks.Get(BlockToolResult) > 0
	case RoleAssistant:
		return pm.blocks.Get(BlockToolUse) > 0
	}
	return false
}

// span is a raw string of the body, by offsets; the zero value stands for none.
type span struct{ from, to int }

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
// request, and keeps only their count). A resumed conversation then costs a copy of its decoded
// messages into that array instead of a new array for the garbage collector each time. The rest
// of a Body is its own. Default off: every Body is its own.
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
	if elem, matched := c.find(key, b); elem != nil {
		p := c.parser(b)
		check, ok := p.resume(elem.Value.(*bodyEntry), matched, &c.digests, &c.in)
		// The cache keeps nothing of a body's bytes.
		clear(c.in)
		if cap(c.in) > maxResumeInput {
			c.in = nil
		}
		if ok {
			c.hits++
			return c.done(&p, key, elem, check), nil
		}
		// Decoded whole below, for ParseBody's error if it is not a body.
		c.release(&p)
	}
	c.misses++
	p := c.parser(b)
	if err := p.walk(); err != nil {
		c.release(&p)
		return nil, err
	}
	return c.done(&p, key, nil, checkpoint{}), nil
}

// parser returns a parser of b, for a BodyCache to remember.
func (c *BodyCache) parser(b []byte) bodyParser {
	p := c.scratch.parser(b)
	p.track = true
	if c.reuse {
		p.out.Messages = c.spare[:0]
	}
	return p
}

// done remembers the body p decoded (resumed from elem, at check, if elem is not nil) and
// returns it finished.
func (c *BodyCache) done(p *bodyParser, key string, elem *list.Element, check checkpoint) *Body {
	c.store(key, p, elem, check)
	p.finish()
	if len(p.out.Messages) == 0 {
		p.out.Messages = nil // as ParseBody leaves a body without messages, not the spare array
	}
	out := p.out
	c.release(p)
	return out
}

// release takes back the scratch p worked in and, with ReuseMessages, the array its messages
// are in: the next Body's.
func (c *BodyCache) release(p *bodyParser) {
	c.scratch.keep(p, nil)
	if m := p.out.Messages; c.reuse && m != nil && cap(m) <= maxScratchMessages {
		c.spare = m[:0]
	}
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
	// Vertex AI and Bedrock name the model in the path, and Bedrock streaming in it too.
	b.Model = cmp.Or(b.Model, req.PathModel)
	if req.PathStream {
		b.Stream = true
	}
	req.Body = b
	return nil
}

// find looks for a remembered body of key that b begins like, and returns its list element and
// how many of its checkpoints b is known to match, leaving in c.digests the hash state of b's
// messages array up to each of them. elem is nil when there is none.
func (c *BodyCache) find(key string, b []byte) (elem *list.Element, matched int) {
	for _, el := range c.byKey[key] {
		e := el.Value.(*bodyEntry)
		ms := e.messagesStart
		if len(b) <= e.checks[0].off ||
			xxh3.Hash(b[ms:ms+e.quickLen]) != e.quick || xxh3.Hash(b[:ms]) != e.headHash {
			continue
		}
		var d xxh3.Hasher
		pos := ms
		for i, ck := range e.checks {
			if ck.off >= len(b) {
				break
			}
			_, _ = d.Write(b[pos:ck.off])
			pos = ck.off
			if d.Sum64() != ck.hash {
				break
			}
			c.digests[i], matched = d, i+1
		}
		if matched > 0 {
			return el, matched
		}
	}
	return nil, 0
}

// resume decodes b as if from its start, restoring from e what its bytes up to one of the first
// matched checkpoints of e decode to and decoding the rest, and returns that checkpoint: the
// last one, unless finish needs whole some message before it (see needFrom), which is then
// decoded again from an earlier one. It returns false when b cannot be decoded so (it may not
// be JSON, or need messages before every checkpoint). digests are b's hash states at the
// checkpoints, in is the buffer the decoder reads from.
func (p *bodyParser) resume(e *bodyEntry, matched int, digests *[checkpointRing]xxh3.Hasher, in *[]byte) (checkpoint, bool) {
	k := e.checks[matched-1].k
	msgs := p.out.Messages // ReuseMessages' spare array, or nil
	if want := k + checkpointRing; cap(msgs) < want {
		// Room for the conversation to grow by a few requests before the spare array must.
		msgs = make([]Message, 0, want+want/4+16)
	}
	// Written in place, not appended one by one: this is most of a resumed body's cost.
	msgs = msgs[:k]
	p.msgs = slices.Grow(p.msgs[:0], k)[:k]
	restorePast(msgs, p.msgs, e.past)
	p.out.Messages = msgs
	if u, h := e.firstUser, e.firstHuman; u >= 0 && u < k && h != (span{}) {
		p.msgs[u].human = p.b[h.from:h.to]
	}
	for i := matched - 1; i >= 0; {
		check := e.checks[i]
		if !p.resumeAt(e, i, digests[i], in) {
			return check, false
		}
		need := p.needFrom(e)
		if need >= check.k {
			return check, true
		}
		// The messages restored before an earlier checkpoint are still this body's.
		for i >= 0 && e.checks[i].k > need {
			i--
		}
	}
	return checkpoint{}, false
}

// resumeAt decodes b from e's i-th checkpoint on, the messages before it being restored, given
// digest, b's hash state there; the members after the messages array are not decoded again when
// they are e's. It returns false when b cannot be decoded so.
func (p *bodyParser) resumeAt(e *bodyEntry, i int, digest xxh3.Hasher, in *[]byte) bool {
	check := e.checks[i]
	b := p.b
	msgs := p.out.Messages[:check.k]
	*p.out = e.head
	p.out.Tools.Names = nil // messages name no tools: set with the members after them
	p.out.Messages = msgs
	p.out.CacheBreakpoints = check.cb
	if e.workingDirectory != "" && e.workingDirectoryAt < check.k {
		p.out.WorkingDirectory, p.workingDirectoryAt = e.workingDirectory, e.workingDirectoryAt
	}
	p.msgs = p.msgs[:check.k]
	p.uses, p.pending = p.uses[:0], p.pending[:0]
	p.restored = check.k
	p.head = e.head
	p.messagesSeen = 1
	p.messagesStart = e.messagesStart
	p.startsFrom = check.k
	for _, ck := range e.checks[:i] {
		p.starts[ck.k%checkpointRing] = ck.msgStart
		p.startsFrom = min(p.startsFrom, ck.k)
	}
	p.known = e.checks[:i+1]
	p.hist, p.histPos = digest, check.off
	p.tailReused = false
	p.a.restore(&e.anatomy, check.k)

	*in = append(append((*in)[:0], resumePrefix...), b[check.off:]...)
	r := &p.r
	r.start(b, *in, check.off-len(resumePrefix))
	r.token() // {
	r.token() // ""
	r.token() // [
	if r.kind() == ']' {
		return false // "[a, ]" is not JSON: the comma before the checkpoint wants a value
	}
	p.elements()
	if r.err != nil {
		return false
	}
	if rest := b[p.tailStart:]; len(rest) == e.tailLen && xxh3.Hash(rest) == e.tailHash {
		msgs, cb, history, dir := p.out.Messages, p.out.CacheBreakpoints, p.out.HistoryHash, p.out.WorkingDirectory
		*p.out = e.tail
		p.out.Messages, p.out.CacheBreakpoints, p.out.HistoryHash, p.out.WorkingDirectory = msgs, cb+e.tailCB, history, dir
		p.out.Tools.Names = slices.Clone(e.tail.Tools.Names)
		p.tailReused = true
		p.a.restoreTail(&e.anatomy)
		return true
	}
	p.out.Tools.Names = slices.Clone(e.head.Tools.Names)
	return r.members(p.member) && r.end() == nil
}

// restorePast writes in msgs and texts the messages past keeps, as many as msgs has room for.
func restorePast(msgs []Message, texts []messageText, past []pastMessage) {
	clear(texts)
	for i := range msgs {
		msgs[i] = past[i].message()
		texts[i].marks = past[i].marks
	}
}

// needFrom returns the first message restored from e that finish needs whole, p.restored when
// there is none: e keeps neither texts nor tool results, which finish reads of the last message
// spoken, and of the messages from the last assistant message on that have tool calls or
// results.
func (p *bodyParser) needFrom(e *bodyEntry) int {
	msgs := p.out.Messages
	need := p.restored
	if last := lastOf(msgs, RoleUser, RoleAssistant); last >= 0 {
		need = min(need, last)
	}
	for i := max(lastOf(msgs, RoleAssistant), 0); i < need; i++ {
		if e.past[i].hasTools() {
			return i
		}
	}
	return need
}

// store remembers the body p decoded (before p.finish) under key, in place of the entry it was
// resumed from, if any.
func (c *BodyCache) store(key string, p *bodyParser, from *list.Element, fromCheck checkpoint) {
	n := len(p.out.Messages)
	if p.messagesSeen != 1 || n < 2 || len(p.checks) == 0 {
		return
	}
	b := p.b
	var e *bodyEntry
	keep := 0 // messages of e.past still valid
	if from != nil {
		// The old entry's state up to its checkpoint is this body's too: extend it in place.
		// Its head is this body's (the same bytes), and so is its tail when it was reused.
		e = from.Value.(*bodyEntry)
		keep = fromCheck.k
		c.messages -= len(e.past)
	} else {
		e = &bodyEntry{key: key}
	}
	e.checks = append(e.checks[:0], p.checks...)
	last := e.checks[len(e.checks)-1]
	e.past = e.past[:keep]
	for i := keep; i < last.k; i++ {
		e.past = append(e.past, toPast(&p.out.Messages[i], &p.msgs[i]))
	}
	e.workingDirectory, e.workingDirectoryAt = "", 0
	if dir := p.out.WorkingDirectory; dir != "" && p.workingDirectoryAt < last.k {
		e.workingDirectory, e.workingDirectoryAt = dir, p.workingDirectoryAt
	}
	e.firstUser, e.firstHuman = -1, span{}
	for i, m := range p.out.Messages[:last.k] {
		if m.Role == RoleUser {
			e.firstUser = i
			if raw := p.msgs[i].human; raw != nil {
				// A slice of b (restored ones too), not capped: its capacity tells where.
				from := cap(b) - cap(raw)
				e.firstHuman = span{from: from, to: from + len(raw)}
			}
			break
		}
	}
	e.quickLen = min(quickCheckLen, e.checks[0].off-p.messagesStart)
	e.quick = xxh3.Hash(b[p.messagesStart : p.messagesStart+e.quickLen])
	if from == nil {
		e.head = p.head
		e.head.Messages = nil
		e.head.Tools.Names = slices.Clone(p.head.Tools.Names)
		e.messagesStart = p.messagesStart
		e.headHash = xxh3.Hash(b[:p.messagesStart])
	}
	if !p.tailReused {
		e.tail = *p.out
		e.tail.Messages = nil
		e.tail.Tools.Names = slices.Clone(p.out.Tools.Names)
		e.tailLen = len(b) - p.tailStart
		e.tailHash = xxh3.Hash(b[p.tailStart:])
		e.tailCB = p.out.CacheBreakpoints - p.tailCB
	}
	p.a.snapshot(&e.anatomy)
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
