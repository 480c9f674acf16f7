package wire

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
)

// Markers Claude Code puts in request text.
const (
	// systemReminderTag opens the reminder blocks Claude Code injects into user messages.
	systemReminderTag = "<system-reminder>"
	// billingHeaderPrefix starts the first system block of every Claude Code request.
	billingHeaderPrefix = "x-anthropic-billing-header:"
	// subagentMarker is in the billing header of a subagent's requests.
	subagentMarker = "cc_is_subagent=true"
	// compactCommand is in the user message of a manual /compact.
	compactCommand = "<command-name>/compact</command-name>"
	// planModeMarker starts the Plan Mode reminder ("Plan mode is active. The user indicated that
	// they do not want you to execute yet -- you MUST NOT make any edits, …") that Claude Code
	// attaches to the user's messages while Plan Mode is on.
	planModeMarker = "Plan mode is active"
	// planExitMarker is in the system message Claude Code adds when Plan Mode ends
	// ("## Exited Plan Mode").
	planExitMarker = "Exited Plan Mode"
	// taskNotificationMarker starts the reminder Claude Code sends when a background task, such
	// as a background subagent, has finished.
	taskNotificationMarker = "<task-notification>"
	// agentIDMarker precedes the subagent id in an Agent tool result.
	agentIDMarker = "agentId:"
)

// ParseBody decodes a Messages API (or count_tokens) request body. contentEncoding is the
// request's Content-Encoding ("" for identity); gzip, deflate, br and zstd are decoded first.
// Content strings are passed over without being decoded, except the few texts Body keeps.
func ParseBody(body []byte, contentEncoding string) (*Body, error) {
	b, err := Decompress(contentEncoding, body)
	if err != nil {
		return nil, fmt.Errorf("decoding request body: %w", err)
	}
	s := scratchPool.Get().(*scratch)
	p := s.parser(b)
	p.out.Messages = s.messages[:0]
	if err = p.walk(); err == nil {
		p.finish()
	}
	// The caller keeps the Body: its messages go into an array of their own, of their number,
	// and the scratch array they were read into, grown as they were, is the next body's.
	msgs := p.out.Messages
	p.out.Messages = nil
	if err == nil && len(msgs) > 0 {
		p.out.Messages = slices.Clone(msgs)
	}
	s.keep(&p, msgs)
	scratchPool.Put(s)
	if err != nil {
		return nil, err
	}
	return p.out, nil
}

// walk decodes the body from its start, up to what finish does.
func (p *bodyParser) walk() error {
	p.r.reset(p.b)
	isObject := p.r.object(p.member)
	if err := p.r.end(); err != nil {
		return fmt.Errorf("decoding request body: %w", err)
	}
	if !isObject {
		return errors.New("decoding request body: not a JSON object")
	}
	return nil
}

// scratch is the working memory of a decode, none of which outlives it: the parser's
// per-message texts, tool_use ids and tool_result blocks, a buffer to decode texts in, its
// checkpoints, and the array the messages are decoded into when the Body does not keep it. A BodyCache keeps one
// from one Parse to the next; ParseBody takes one from scratchPool. Growing these arrays one
// append at a time would be most of what a decode allocates.
type scratch struct {
	texts    []messageText
	uses     [][]byte
	pending  []pendingResult
	messages []Message
	buf      []byte
	checks   []checkpoint
	anatomy  anatomist
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratchMessages bounds the arrays of messages and of their texts kept from one decode to
// the next, a scratch's and ReuseMessages' (a few MB at most): a body with more messages than
// that gets arrays of its own.
const maxScratchMessages = 16 << 10

// maxScratchBuf bounds the text buffer a scratch keeps: the texts whose length is counted are
// system prompts and tool results, and an occasional huge one should not stay in memory.
const maxScratchBuf = 64 << 10

// parser returns a parser of b that works in s's arrays. s.messages is not given to it: only
// the caller knows whether the Body keeps that array.
func (s *scratch) parser(b []byte) bodyParser {
	s.anatomy.reset()
	return bodyParser{b: b, out: &Body{}, msgs: s.texts[:0], uses: s.uses[:0], pending: s.pending[:0], buf: s.buf, checks: s.checks[:0], a: &s.anatomy}
}

// keep takes back, emptied, the arrays p worked in (or grew from s's), and msgs, when it is
// not nil: an array of messages that no Body refers to any more. p's decoder goes back to its
// pool.
func (s *scratch) keep(p *bodyParser, msgs []Message) {
	p.r.release()
	clear(p.msgs)
	clear(p.uses)
	clear(p.pending)
	s.uses, s.pending, s.checks = p.uses[:0], p.pending[:0], p.checks[:0]
	s.anatomy.reset()
	if cap(p.msgs) <= maxScratchMessages {
		s.texts = p.msgs[:0]
	}
	if msgs != nil && cap(msgs) <= maxScratchMessages {
		clear(msgs)
		s.messages = msgs[:0]
	}
	if cap(p.buf) <= maxScratchBuf {
		// Texts of this body are not kept past its decode.
		clear(p.buf[:cap(p.buf)])
		s.buf = p.buf[:0]
	}
}

// bodyParser holds the state of one decode of a request body.
type bodyParser struct {
	r   tokens
	b   []byte // the body
	out *Body
	// msgs keeps, per message, raw text that is only decoded once it is known which messages
	// need it (the last one is only known at the end).
	msgs []messageText
	// uses and pending hold, as read, the tool_use ids and tool_result blocks of messages not
	// yet materialized (see materialize): most messages never are, since only those from the
	// last assistant message on keep them.
	uses    [][]byte
	pending []pendingResult
	buf     []byte // for decoding texts whose length is counted
	// a builds the Anatomy; it is the scratch's.
	a *anatomist

	// What a BodyCache needs to resume a later body of the same conversation (track set):
	track bool
	// starts remembers where each of the last messages began, by index modulo its length.
	starts [checkpointRing]msgStart
	// messagesSeen counts "messages" keys; messagesStart is where the last one's array began.
	messagesSeen  int
	messagesStart int
	// head is the request's fields as they stood when the messages array began.
	head Body
	// restored is how many messages were restored from a BodyCache entry rather than decoded.
	restored int
	// startsFrom is the first message whose entry in starts is known (when resumed, the
	// messages before the resume point were not read).
	startsFrom int
	// hist hashes the messages array from its start up to histPos: the history hash and the
	// checkpoints' hashes come from one pass.
	hist    xxh3.Hasher
	histPos int
	// checks are where a later body of the conversation can be resumed, set at the end of the
	// messages array. known are checkpoints of the entry a resumed parse started from, up to the
	// one it resumed at: their hashes hold for this body too.
	checks, known []checkpoint
	// tailStart is where the request object's members after the messages array begin, and
	// tailCB the cache breakpoints counted before them: what a BodyCache needs to reuse their
	// decoding when a later body ends with the same bytes. tailReused says a resumed decode
	// did.
	tailStart, tailCB int
	// workingDirectoryAt is the message Body.WorkingDirectory was read from.
	workingDirectoryAt int
	tailReused         bool
}

// msgStart is the decoder's position at the start of one message.
type msgStart struct {
	off int // offset of the message in the body
	cb  int // CacheBreakpoints counted before it
}

// pendingResult is a tool_result block as read, before materialize makes a ToolResult of it.
type pendingResult struct {
	toolUseID []byte // raw
	isError   bool
	content   []byte // raw, as toolResultContent returned it
}

// messageText is what is remembered of a message's text while the body is being read.
type messageText struct {
	human []byte // raw first human text block
	// usesFrom and usesTo delimit its tool_use ids in bodyParser.uses, pendingFrom and
	// pendingTo its tool_result blocks in bodyParser.pending, until materialize has made the
	// message's ToolUseIDs and ToolResults of them (then pendingTools is false).
	usesFrom, usesTo       int
	pendingFrom, pendingTo int
	pendingTools           bool
	marks                  textMarks
}

// textMarks is the set of marks a message's text blocks carry.
type textMarks uint8

const (
	markPlanMode         textMarks = 1 << iota // the Plan Mode reminder
	markCompact                                // the /compact command
	markTaskNotification                       // a <task-notification>
	markPlanExit                               // word that Plan Mode was exited
)

// textMarkers are the marks a text block carries when it contains their text, which has
// nothing JSON escapes.
var textMarkers = [...]struct {
	mark textMarks
	text []byte
}{{markPlanMode, []byte(planModeMarker)}, {markPlanExit, []byte(planExitMarker)}, {markTaskNotification, []byte(taskNotificationMarker)}}

// member reads one member of the request object.
func (p *bodyParser) member(name []byte) {
	r := &p.r
	switch string(name) {
	case "model":
		p.out.Model = r.text()
	case "max_tokens":
		p.out.MaxTokens = r.integer()
	case "stream":
		p.out.Stream = r.boolean()
	case "metadata":
		r.member("user_id", func() { p.out.UserID = r.text() })
	case "thinking":
		r.member("type", func() { p.out.Thinking = r.text() })
	case "output_config":
		p.outputConfig()
	case "context_management":
		p.out.ContextManagement = r.kind() == '{'
		r.skip()
	case "system":
		p.system()
	case "tools":
		p.out.Tools.Present = true
		p.tools()
	case "messages":
		p.messages()
	default:
		r.skip()
	}
}

// messages reads the messages array.
func (p *bodyParser) messages() {
	r := &p.r
	p.messagesSeen++
	if !r.open('[') {
		return
	}
	p.messagesStart = r.offset() - 1
	p.a.startMessages()
	if p.track {
		p.head = *p.out
		p.hist.Reset()
		p.histPos = p.messagesStart
		// A body may repeat the key: the starts remembered of an earlier array's messages are
		// not in this one, and hashTo cannot go back before its start.
		p.startsFrom = len(p.out.Messages)
	}
	p.elements()
}

// elements reads the messages array from its next element on, through its closing bracket.
func (p *bodyParser) elements() {
	if !p.r.elements(p.message) {
		return
	}
	end := p.r.offset()
	if !p.track {
		p.out.HistoryHash = xxh3.Hash(p.b[p.messagesStart:end])
		return
	}
	p.tailStart, p.tailCB = end, p.out.CacheBreakpoints
	p.checks = p.checks[:0]
	n := len(p.out.Messages)
	for k := max(1, n-(checkpointRing-1), p.startsFrom); k < n; k++ {
		st := p.starts[k%checkpointRing]
		p.checks = append(p.checks, checkpoint{msgStart: st, k: k, hash: p.hashTo(st.off)})
	}
	p.out.HistoryHash = p.hashTo(end)
}

// hashTo returns the hash of the messages array from its start to off.
func (p *bodyParser) hashTo(off int) uint64 {
	if off < p.histPos {
		// Before the resume point (a body no longer than the last): known, unless it falls
		// between checkpoints.
		for _, ck := range p.known {
			if ck.off == off {
				return ck.hash
			}
		}
		p.hist.Reset()
		p.histPos = p.messagesStart
	}
	_, _ = p.hist.Write(p.b[p.histPos:off])
	p.histPos = off
	return p.hist.Sum64()
}

func (p *bodyParser) outputConfig() {
	r := &p.r
	r.object(func(name []byte) {
		switch string(name) {
		case "effort":
			p.out.Effort = r.text()
		case "format":
			r.member("type", func() { p.out.OutputFormat = r.text() })
		default:
			r.skip()
		}
	})
}

func (p *bodyParser) system() {
	r := &p.r
	sys := &p.out.System
	a := p.a
	switch r.kind() {
	case '"':
		raw := r.value()
		sys.Blocks = 1
		sys.Bytes = len(decoded(raw, &p.buf))
		a.add(SectionSystem, Part{Kind: PartSystemPrompt}, sys.Bytes, 1)
		a.blockHash.Reset()
		hashMember(&a.blockHash, []byte("text"), raw)
		a.system = append(a.system, SystemHash{Part: PartSystemPrompt, Hash: a.blockHash.Sum64()})
	case '[':
		index := 0
		prompt := false // the prompt proper was read
		r.array(func() {
			at := Location{Section: SectionSystem, Index: index}
			index++
			a.blockHash.Reset()
			var blockType, text []byte
			marked, ttl := false, ""
			r.object(func(name []byte) {
				from := r.offset()
				switch string(name) {
				case "type":
					blockType = r.textBytes()
				case "text":
					text = r.str()
				case "cache_control":
					marked, ttl = p.cacheControl()
					return
				default:
					r.skip()
				}
				hashMember(&a.blockHash, name, r.src[from:r.offset()])
			})
			part, n := PartOther, 0
			if string(blockType) == "text" && text != nil {
				n = len(decoded(text, &p.buf))
				sys.Blocks++
				sys.Bytes += n
				part = PartAppendedPrompt
				switch {
				case bytes.HasPrefix(text[1:], []byte(billingHeaderPrefix)):
					part = PartBillingHeader
					if sys.BillingHeader == "" {
						sys.BillingHeader = unquotePrefix(text, PreviewLimit)
						sys.Subagent = strings.Contains(sys.BillingHeader, subagentMarker)
					}
				case !prompt && isIdentityLine(text):
					part = PartIdentity
				case !prompt:
					part, prompt = PartSystemPrompt, true
				}
			}
			a.add(SectionSystem, Part{Kind: part}, n, 1)
			a.system = append(a.system, SystemHash{Part: part, Hash: a.blockHash.Sum64()})
			if marked {
				a.breakpoint(SectionSystem, at, ttl)
			}
		})
	default:
		r.skip()
	}
}

// identityLimit bounds the identity line of a system prompt ("You are Claude Code, Anthropic's
// official CLI for Claude.", docs/wire.md §2).
const identityLimit = 200

// isIdentityLine reports whether a raw system text is the one line that says who the model is.
func isIdentityLine(raw []byte) bool {
	return len(raw) < identityLimit && bytes.HasPrefix(raw[1:], []byte("You are ")) && !bytes.Contains(raw, []byte(`\n`))
}

// cacheControl reads a cache_control value, counts it when it is an object and returns whether
// it was one, with its ttl ("5m" when it names none, the API's default).
func (p *bodyParser) cacheControl() (marked bool, ttl string) {
	r := &p.r
	if r.kind() != '{' {
		r.skip()
		return false, ""
	}
	p.out.CacheBreakpoints++
	r.member("ttl", func() { ttl = r.text() })
	return true, cmp.Or(ttl, "5m")
}

func (p *bodyParser) tools() {
	r := &p.r
	tools := &p.out.Tools
	a := p.a
	r.array(func() {
		at := Location{Section: SectionTools, Index: tools.Count}
		tools.Count++
		if r.kind() != '{' {
			a.add(SectionTools, Part{Kind: PartOther}, len(r.value()), 1)
			return
		}
		r.token()
		start := r.offset() - 1
		a.blockHash.Reset()
		var toolName string
		deferred, marked, ttl := false, false, ""
		r.members(func(name []byte) {
			from := r.offset()
			switch string(name) {
			case "name":
				toolName = r.text()
				if len(tools.Names) < ToolNameLimit {
					tools.Names = append(tools.Names, toolName)
				}
			case "defer_loading":
				if r.boolean() {
					tools.Deferred++
					deferred = true
				}
			case "type":
				if isServerTool(r.textBytes()) {
					tools.Server++
				}
			case "cache_control":
				marked, ttl = p.cacheControl()
				return
			default:
				r.skip()
			}
			hashMember(&a.blockHash, name, r.src[from:r.offset()])
		})
		part := Part{Kind: PartBuiltinTools}
		switch server := mcpServer(toolName); {
		case deferred:
			part = Part{Kind: PartDeferredTools, Name: server}
		case server != "":
			part = Part{Kind: PartMCPTools, Name: server}
		}
		a.add(SectionTools, part, r.offset()-start, 1)
		if len(a.tools) < ToolNameLimit {
			a.tools = append(a.tools, ToolHash{Name: toolName, Hash: a.blockHash.Sum64()})
		}
		if marked {
			a.breakpoint(SectionTools, at, ttl)
		}
	})
}

// serverToolTypes start the types of the tools the API runs itself (web_search_20250305, …):
// the client runs the others, its own and Anthropic's (bash_…, text_editor_…, computer_…).
var serverToolTypes = []string{"web_search_", "web_fetch_", "code_execution_", "advisor_", "tool_search_tool_"}

func isServerTool(typ []byte) bool {
	for _, prefix := range serverToolTypes {
		if bytes.HasPrefix(typ, []byte(prefix)) {
			return true
		}
	}
	return false
}

// message reads one element of the messages array.
func (p *bodyParser) message() {
	r := &p.r
	m := Message{Role: RoleOther}
	text := messageText{pendingFrom: len(p.pending), pendingTools: true}
	a := p.a
	a.startMessage(len(p.out.Messages))
	if r.kind() == '{' {
		r.token()
		p.messageStart(r.offset() - 1)
		r.members(func(name []byte) {
			switch string(name) {
			case "role":
				m.Role = parseRole(r.textBytes())
				a.msgRole = m.Role
			case "content":
				p.content(&m, &text)
			default:
				r.skip()
			}
		})
	} else {
		v := r.value()
		p.messageStart(r.offset() - len(v))
		a.add(SectionMessages, Part{Kind: PartOther}, len(v), 1)
		_, _ = a.msgHash.Write(v)
	}
	a.endMessage(m.Role)
	text.pendingTo = len(p.pending)
	if m.Role == RoleUser {
		m.HumanText = text.human != nil
		m.Synthetic = syntheticOf(text.human, text.marks&markTaskNotification != 0)
	}
	p.out.Messages = append(p.out.Messages, m)
	p.msgs = append(p.msgs, text)
}

// messageStart records where the next message begins, for a BodyCache.
func (p *bodyParser) messageStart(off int) {
	if p.track {
		p.starts[len(p.out.Messages)%checkpointRing] = msgStart{off: off, cb: p.out.CacheBreakpoints}
	}
}

// materialize makes m's ToolUseIDs (an assistant message) or ToolResults (a user message) of
// what the parser read of its blocks, once: the role decides which, and may have come after
// the content. preview fills the results' previews.
func (p *bodyParser) materialize(m *Message, t *messageText, preview bool) {
	if !t.pendingTools {
		return
	}
	t.pendingTools = false
	switch m.Role {
	case RoleUser:
		if t.pendingTo > t.pendingFrom {
			m.ToolResults = make([]ToolResult, 0, t.pendingTo-t.pendingFrom)
			for _, pr := range p.pending[t.pendingFrom:t.pendingTo] {
				size, first, agentID := p.resultContent(pr.content)
				tr := ToolResult{ToolUseID: unquote(pr.toolUseID), IsError: pr.isError, Bytes: size, AgentID: agentID}
				if preview && first != nil {
					tr.Preview = unquotePrefix(first, PreviewLimit)
				}
				m.ToolResults = append(m.ToolResults, tr)
			}
		}
	case RoleAssistant:
		if t.usesTo > t.usesFrom {
			m.ToolUseIDs = make([]string, 0, t.usesTo-t.usesFrom)
			for _, id := range p.uses[t.usesFrom:t.usesTo] {
				m.ToolUseIDs = append(m.ToolUseIDs, unquote(id))
			}
		}
	}
}

// parseRole maps a role name to a Role, without making a string of it.
func parseRole(b []byte) Role {
	for _, r := range roles[1:] {
		if string(b) == string(r) {
			return r
		}
	}
	return RoleOther
}

// parseBlockType maps a type name to a BlockType, without making a string of it.
func parseBlockType(b []byte) BlockType {
	for _, t := range blockTypes {
		if string(b) == string(t) {
			return t
		}
	}
	return BlockOther
}

// content reads a message's content (a string or a list of blocks) into m and text; the ids of
// its tool_use blocks and its tool_result blocks go to the parser's uses and pending, for
// materialize. The role may not be known yet (keys come in any order), so everything is
// collected and materialize keeps what the role allows.
func (p *bodyParser) content(m *Message, text *messageText) {
	r := &p.r
	a := p.a
	a.startContent()
	// A repeated content key: the last one's tool_use ids count (its tool results add up).
	text.usesFrom, text.usesTo = len(p.uses), len(p.uses)
	if r.kind() == '"' {
		m.Blocks.Add(BlockText, 1)
		raw := r.value()
		p.textBlock(raw, text)
		// Hashed as the one text block it stands for.
		hashMember(&a.msgHash, []byte("type"), []byte(`"text"`))
		hashMember(&a.msgHash, []byte("text"), raw)
		_, _ = a.msgHash.Write([]byte{1})
		return
	}
	index := 0
	r.array(func() {
		at := Location{Section: SectionMessages, Index: int(a.msg), Block: index}
		index++
		if r.kind() != '{' {
			m.Blocks.Add(BlockOther, 1)
			v := r.value()
			a.add(SectionMessages, Part{Kind: PartOther}, len(v), 1)
			_, _ = a.msgHash.Write(v)
			return
		}
		r.token()
		start := r.offset() - 1
		var blk contentBlock
		r.members(func(name []byte) { p.blockMember(name, &blk) })
		_, _ = a.msgHash.Write([]byte{1})
		bt := parseBlockType(blk.typ)
		m.Blocks.Add(bt, 1)
		switch bt {
		case BlockText:
			if blk.text != nil {
				p.textBlock(blk.text, text)
			} else {
				a.add(SectionMessages, Part{Kind: PartOther}, 0, 1)
			}
		case BlockToolUse:
			p.uses = append(p.uses, blk.id)
			text.usesTo = len(p.uses)
			tool := a.toolName(blk.name)
			a.useName(blk.id, tool)
			a.add(SectionMessages, Part{Kind: PartToolUse, Name: tool}, blk.size, 1)
		case BlockToolResult:
			p.pending = append(p.pending, pendingResult{toolUseID: blk.toolUseID, isError: blk.isError, content: blk.content})
			res := &blk.result
			a.add(SectionMessages, Part{Kind: PartToolResult, Name: a.toolOf(blk.toolUseID)}, res.text, 1)
			if res.images > 0 {
				a.add(SectionMessages, Part{Kind: PartImage}, res.imageBytes, res.images)
			}
			if res.documents > 0 {
				a.add(SectionMessages, Part{Kind: PartDocument}, res.documentBytes, res.documents)
			}
			blk.marked = blk.marked || res.marked
		case BlockThinking, BlockRedactedThinking:
			a.add(SectionMessages, Part{Kind: PartThinking}, blk.size, 1)
		case BlockImage:
			a.add(SectionMessages, Part{Kind: PartImage}, blk.size, 1)
		case BlockDocument:
			a.add(SectionMessages, Part{Kind: PartDocument}, blk.size, 1)
		default:
			a.add(SectionMessages, Part{Kind: PartOther}, r.offset()-start, 1)
		}
		if blk.marked {
			a.breakpoint(SectionMessages, at, blk.ttl)
		}
	})
}

// contentBlock is what one content block of a request carries, strings raw; which of it
// matters depends on its type, which may come after the other members.
type contentBlock struct {
	typ       []byte // decoded
	text      []byte
	id        []byte
	name      []byte // a tool_use's tool, raw
	toolUseID []byte
	isError   bool
	content   []byte
	// size is what the block's content counts in its part: a tool_use's input (raw JSON), a
	// thinking block's text, a redacted one's data, an image's or a document's source (raw).
	size   int
	result resultSizes
	// marked: the block carries a cache_control marker, of ttl.
	marked bool
	ttl    string
}

// resultSizes is what a tool_result's content counts, by part: its text (and blocks that are
// neither images nor documents, raw), its images and its documents. marked says a block of it
// carries a cache_control marker.
type resultSizes struct {
	text                     int
	images, imageBytes       int
	documents, documentBytes int
	marked                   bool
}

func (p *bodyParser) blockMember(name []byte, blk *contentBlock) {
	r := &p.r
	from := r.offset()
	switch string(name) {
	case "type":
		blk.typ = r.textBytes()
	case "text":
		blk.text = r.str()
	case "id":
		blk.id = r.str()
	case "name":
		blk.name = r.str()
	case "tool_use_id":
		blk.toolUseID = r.str()
	case "is_error":
		blk.isError = r.boolean()
	case "content":
		blk.content = p.toolResultContent(&blk.result)
	case "thinking":
		blk.size = textLen(r.str())
	case "input", "data", "source":
		blk.size = len(r.value())
	case "cache_control":
		blk.marked, blk.ttl = p.cacheControl()
		return
	default:
		r.skip()
	}
	hashMember(&p.a.msgHash, name, r.src[from:r.offset()])
}

// toolResultContent reads a tool_result's content, counting its sizes by part into sizes and
// the cache_control markers of its blocks, and returns it raw: only the results of the messages
// a Body keeps whole are read again (resultContent), and most results are one long string
// passed over at the decoder's speed.
func (p *bodyParser) toolResultContent(sizes *resultSizes) []byte {
	r := &p.r
	if r.kind() != '[' {
		v := r.value()
		if len(v) > 0 && v[0] == '"' {
			sizes.text += textLen(v)
		}
		return v
	}
	r.token()
	start := r.offset() - 1
	if !r.elements(func() { p.resultBlock(sizes) }) {
		return nil
	}
	return r.src[start:r.offset()]
}

// resultBlock reads one block of a tool_result's content into sizes.
func (p *bodyParser) resultBlock(sizes *resultSizes) {
	r := &p.r
	if r.kind() != '{' {
		sizes.text += len(r.value())
		return
	}
	r.token()
	start := r.offset() - 1
	var typ, text []byte
	source := 0
	r.members(func(name []byte) {
		switch string(name) {
		case "type":
			typ = r.textBytes()
		case "text":
			text = r.str()
		case "source":
			source = len(r.value())
		case "cache_control":
			if marked, _ := p.cacheControl(); marked {
				sizes.marked = true
			}
		default:
			r.skip()
		}
	})
	switch string(typ) {
	case "text":
		if text != nil {
			sizes.text += textLen(text)
			return
		}
	case "image":
		sizes.images++
		sizes.imageBytes += source
		return
	case "document":
		sizes.documents++
		sizes.documentBytes += source
		return
	}
	sizes.text += r.offset() - start
}

// resultContent reads a tool_result's content as toolResultContent returned it, a string or a
// list of blocks of which text blocks count their text bytes and the others their raw JSON
// bytes, and returns its size, its first text (raw) and the agent id its texts carry. It is
// called once the body has been read, when the parser's decoder is free.
func (p *bodyParser) resultContent(content []byte) (size int, first []byte, agentID string) {
	add := func(raw []byte) {
		size += len(decoded(raw, &p.buf))
		if first == nil {
			first = raw
		}
		if agentID == "" {
			agentID = findAgentID(raw)
		}
	}
	r := &p.r
	r.reset(content)
	switch r.kind() {
	case '"':
		add(r.value())
	case '[':
		r.token()
		r.elements(func() {
			if r.kind() != '{' {
				size += len(r.value())
				return
			}
			r.token()
			start := r.offset() - 1
			var typ, text []byte
			r.members(func(name []byte) {
				switch string(name) {
				case "type":
					typ = r.textBytes()
				case "text":
					text = r.str()
				default:
					r.skip()
				}
			})
			if string(typ) == "text" && text != nil {
				add(text)
				return
			}
			size += r.offset() - start
		})
	}
	return size, first, agentID
}

// findAgentID returns the id after "agentId:" in a raw tool result text, or "".
func findAgentID(raw []byte) string {
	k := bytes.Index(raw, []byte(agentIDMarker))
	if k < 0 {
		return ""
	}
	rest := bytes.TrimLeft(raw[k+len(agentIDMarker):], " ")
	n := 0
	for n < len(rest) && n < 128 && isIDByte(rest[n]) {
		n++
	}
	return string(rest[:n])
}

func isIDByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
}

// textBlock records a raw text block of a message, and its part of the anatomy: the first one
// that is not blank nor a system reminder is the message's human text. The markers it looks for have nothing
// JSON escapes.
func (p *bodyParser) textBlock(raw []byte, text *messageText) {
	c := classifyText(raw)
	p.a.add(SectionMessages, p.a.textPart(c), textLen(raw), 1)
	if p.out.WorkingDirectory == "" && c.kind == ClientEnvironment {
		p.out.WorkingDirectory, p.workingDirectoryAt = workingDirectory(raw), len(p.out.Messages)
	}
	if text.human == nil && c.human() {
		text.human = raw
	}
	for _, m := range textMarkers {
		if text.marks&m.mark == 0 && bytes.Contains(raw, m.text) {
			text.marks |= m.mark
		}
	}
	if text.marks&markCompact == 0 && bytes.Contains(raw, []byte("/compact")) &&
		strings.Contains(unquote(raw), compactCommand) {
		text.marks |= markCompact
	}
}

// finish decodes the texts that are kept, now that the first and last messages are known, and
// makes the tool results and tool_use ids of the messages from the last assistant message on
// (see Message.ToolResults).
func (p *bodyParser) finish() {
	msgs := p.out.Messages
	last := lastOf(msgs, RoleUser, RoleAssistant)
	for i := max(lastOf(msgs, RoleAssistant), 0); i < len(msgs); i++ {
		p.materialize(&msgs[i], &p.msgs[i], i == last)
	}
	firstUser := -1
	for i, m := range msgs {
		marks := p.msgs[i].marks
		if m.Role == RoleUser {
			if firstUser < 0 {
				firstUser = i
			}
			p.out.CompactCommand = p.out.CompactCommand || marks&markCompact != 0
		}
		// Claude Code announces Plan Mode in a system-role message (or a reminder in a user
		// message) that stays in the history, and its end in a later one: the last of them
		// decides.
		if m.Role != RoleAssistant && marks&(markPlanMode|markPlanExit) != 0 {
			p.out.PlanMode = marks&markPlanExit == 0
		}
	}
	if firstUser >= 0 {
		if raw := p.msgs[firstUser].human; raw != nil {
			full := unquote(raw)
			p.out.FirstHumanTextHash = HashText(full)
			p.out.FirstHumanText = truncate(full, HumanTextLimit)
			msgs[firstUser].Text = p.out.FirstHumanText
		}
	}
	if last >= 0 {
		if raw := p.msgs[last].human; raw != nil && msgs[last].Text == "" {
			msgs[last].Text = unquotePrefix(raw, HumanTextLimit)
		}
	}
	p.out.TurnOpener = turnOpener(msgs)
	p.out.Anatomy = p.a.finish()
	p.out.MetadataSessionID, p.out.AccountUUID = p.metadataIDs(p.out.UserID)
}

// turnOpener returns Body.TurnOpener of msgs.
func turnOpener(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		switch {
		case m.Role != RoleUser || !opensTurns(m.Synthetic):
		case m.Blocks.Get(BlockToolResult) > 0 && m.Synthetic != SyntheticInterrupt:
			// Tool results, with any text the user queued while the tools ran.
		case m.HumanText || m.Synthetic != "":
			return i
		}
	}
	return -1
}

// lastOf returns the index of the last message of one of the roles in, -1 when there is none.
func lastOf(msgs []Message, in ...Role) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if slices.Contains(in, msgs[i].Role) {
			return i
		}
	}
	return -1
}

// metadataIDs finds the session id and the account uuid in metadata.user_id: a JSON object
// string {"device_id":…,"account_uuid":…,"session_id":…} in current Claude Code, or
// user_<hash>_account_<uuid>_session_<uuid> in older versions. It is called once the body has
// been read, when the parser's decoder is free.
func (p *bodyParser) metadataIDs(userID string) (session, account string) {
	if strings.HasPrefix(strings.TrimSpace(userID), "{") {
		r := &p.r
		r.reset([]byte(userID))
		r.object(func(name []byte) {
			switch string(name) {
			case "session_id":
				session = r.text()
			case "account_uuid":
				account = r.text()
			default:
				r.skip()
			}
		})
		if r.end() != nil {
			return "", ""
		}
		return session, account
	}
	const sessionMarker, accountMarker = "_session_", "_account_"
	if !strings.HasPrefix(userID, "user_") {
		return "", ""
	}
	k := strings.LastIndex(userID, sessionMarker)
	if k < 0 {
		return "", ""
	}
	session = userID[k+len(sessionMarker):]
	if a := strings.Index(userID[:k], accountMarker); a >= 0 {
		account = userID[a+len(accountMarker) : k]
	}
	return session, account
}
