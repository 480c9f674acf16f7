package wire

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

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
	err = p.parseWhole()
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

// parseWhole decodes the body from its start, as ParseBody does.
func (p *bodyParser) parseWhole() error {
	if !p.parse() && p.r.err == nil {
		return errors.New("decoding request body: not a JSON object")
	}
	if err := p.r.end(); err != nil {
		return fmt.Errorf("decoding request body: %w", err)
	}
	p.finish()
	return nil
}

// scratch is the working memory of a decode, none of which outlives it: the parser's
// per-message texts, tool result texts, tool_use ids and tool_result blocks, and the array the
// messages are decoded into when the Body does not keep it. A BodyCache keeps one from one
// Parse to the next; ParseBody takes one from scratchPool. Growing these arrays one append at a
// time was most of what ParseBody allocated (900 KB for a 1 MB body).
type scratch struct {
	texts    []messageText
	results  [][]byte
	uses     [][]byte
	pending  []pendingResult
	messages []Message
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratchMessages bounds the arrays of messages and of their texts kept from one decode to
// the next, a scratch's and ReuseMessages' (a few MB at most): a body with more messages than
// that gets arrays of its own.
const maxScratchMessages = 16 << 10

// parser returns a parser of b that works in s's arrays. s.messages is not given to it: only
// the caller knows whether the Body keeps that array.
func (s *scratch) parser(b []byte) bodyParser {
	return bodyParser{r: jsonReader{b: b}, out: &Body{}, msgs: s.texts[:0], results: s.results[:0], uses: s.uses[:0], pending: s.pending[:0]}
}

// keep takes back, emptied, the arrays p worked in (or grew from s's), and msgs, when it is
// not nil: an array of messages that no Body refers to any more.
func (s *scratch) keep(p *bodyParser, msgs []Message) {
	clear(p.msgs)
	clear(p.results)
	clear(p.uses)
	clear(p.pending)
	s.results, s.uses, s.pending = p.results[:0], p.uses[:0], p.pending[:0]
	if cap(p.msgs) <= maxScratchMessages {
		s.texts = p.msgs[:0]
	}
	if msgs != nil && cap(msgs) <= maxScratchMessages {
		clear(msgs)
		s.messages = msgs[:0]
	}
}

// bodyParser holds the state of one ParseBody call.
type bodyParser struct {
	r   jsonReader
	out *Body
	// msgs keeps, per message, raw text that is only decoded once it is known which messages
	// need it (the last one is only known at the end).
	msgs []messageText
	// results holds the raw first text of every tool_result, for the previews of the last
	// message (one slice for the whole body rather than one per message).
	results [][]byte
	// uses and pending hold, as read, the tool_use ids and tool_result blocks of messages not
	// yet materialized (see materialize): most messages never are, since only those from the
	// last assistant message on keep them.
	uses    [][]byte
	pending []pendingResult

	// What a BodyCache needs to resume a later body of the same conversation (track set):
	track bool
	// starts remembers where each of the last messages began, by index modulo its length.
	starts [checkpointRing]msgStart
	// messagesSeen counts "messages" keys; messagesStart is where the last one's array began.
	messagesSeen  int
	messagesStart int
	// head is the request's fields as they stood when the messages array began.
	head Body
	// shared is how many messages were copied from a cache entry: their slices are shared with
	// it and must not be written to. fromPast is how many of those came from its compact past,
	// without tool results or tool_use ids.
	shared, fromPast int
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
	// decoding when a later body ends with the same bytes.
	tailStart, tailCB int
}

// msgStart is the decoder's position at the start of one message.
type msgStart struct {
	off     int // offset of the message in the body
	cb      int // CacheBreakpoints counted before it
	results int // len(bodyParser.results) before it
}

// pendingResult is a tool_result block as read, before materialize makes a ToolResult of it.
type pendingResult struct {
	toolUseID []byte // raw
	isError   bool
	bytes     int
	agentID   string
}

// messageText is what is remembered of a message's text while the body is being read.
type messageText struct {
	human []byte // raw first human text block
	// resultsFrom and resultsTo delimit, in bodyParser.results, the raw first text of each of
	// its tool_result blocks.
	resultsFrom, resultsTo int
	// usesFrom and usesTo delimit its tool_use ids in bodyParser.uses, pendingFrom and
	// pendingTo its tool_result blocks in bodyParser.pending, until materialize has made the
	// message's ToolUseIDs and ToolResults of them (then pendingTools is false).
	usesFrom, usesTo       int
	pendingFrom, pendingTo int
	pendingTools           bool
	planMode               bool // a text block carries the Plan Mode reminder
	compact                bool // a text block carries the /compact command
	taskNotification       bool // a text block carries a <task-notification>
	planExit               bool // a text block says Plan Mode was exited
}

func (p *bodyParser) parse() bool {
	return p.r.object(p.member)
}

// member reads one member of the request object.
func (p *bodyParser) member(key []byte) {
	r := &p.r
	switch string(key) {
	case "model":
		p.out.Model = r.text()
	case "max_tokens":
		p.out.MaxTokens = r.integer()
	case "stream":
		p.out.Stream = r.boolean()
	case "metadata":
		r.object(func(key []byte) {
			if string(key) != "user_id" {
				r.skip()
				return
			}
			p.out.UserID = r.text()
			p.out.MetadataSessionID = metadataSessionID(p.out.UserID)
		})
	case "thinking":
		r.object(func(key []byte) {
			if string(key) == "type" {
				p.out.Thinking = r.text()
				return
			}
			r.skip()
		})
	case "output_config":
		p.outputConfig()
	case "context_management":
		p.out.ContextManagement = r.peek() == '{'
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
	r.peek()
	p.messagesSeen++
	if p.track {
		p.head = *p.out
	}
	p.messagesStart = r.i
	if p.track {
		p.hist.Reset()
		p.histPos = r.i
		// A body may repeat the key: the starts remembered of an earlier array's messages are
		// not in this one, and hashTo cannot go back before its start.
		p.startsFrom = len(p.out.Messages)
	}
	p.messagesEnd(r.array(p.message))
}

// messagesEnd completes the messages array once it has been read (ok: to its closing bracket).
func (p *bodyParser) messagesEnd(ok bool) {
	if !ok {
		return
	}
	if !p.track {
		p.out.HistoryHash = xxh3.Hash(p.r.b[p.messagesStart:p.r.i])
		return
	}
	p.tailStart, p.tailCB = p.r.i, p.out.CacheBreakpoints
	p.checks = p.checks[:0]
	n := len(p.out.Messages)
	for k := max(1, n-(checkpointRing-1), p.startsFrom); k < n; k++ {
		st := p.starts[k%checkpointRing]
		p.checks = append(p.checks, checkpoint{msgStart: st, k: k, hash: p.hashTo(st.off)})
	}
	p.out.HistoryHash = p.hashTo(p.r.i)
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
	_, _ = p.hist.Write(p.r.b[p.histPos:off])
	p.histPos = off
	return p.hist.Sum64()
}

func (p *bodyParser) outputConfig() {
	r := &p.r
	r.object(func(key []byte) {
		switch string(key) {
		case "effort":
			p.out.Effort = r.text()
		case "format":
			r.object(func(key []byte) {
				if string(key) == "type" {
					p.out.OutputFormat = r.text()
					return
				}
				r.skip()
			})
		default:
			r.skip()
		}
	})
}

func (p *bodyParser) system() {
	r := &p.r
	sys := &p.out.System
	switch r.peek() {
	case '"':
		_, n, _ := r.strN()
		sys.Blocks = 1
		sys.Bytes = n
	case '[':
		r.array(func() {
			blockType, text, textLen, hasText := p.typedTextBlock()
			if string(blockType) != "text" || !hasText {
				return
			}
			sys.Blocks++
			sys.Bytes += textLen
			if sys.BillingHeader == "" && bytes.HasPrefix(text, []byte(billingHeaderPrefix)) {
				sys.BillingHeader = unquotePrefix(text, PreviewLimit)
				sys.Subagent = strings.Contains(sys.BillingHeader, subagentMarker)
			}
		})
	default:
		r.skip()
	}
}

// cacheControl reads a cache_control value and counts it when it is an object.
// typedTextBlock reads a block object keeping only its type and text (raw, with the decoded
// length), counting its cache_control marker; the caller decides what a non-text block means.
func (p *bodyParser) typedTextBlock() (typ, text []byte, textLen int, hasText bool) {
	r := &p.r
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			typ, _ = r.str()
		case "text":
			text, textLen, hasText = r.strN()
		case "cache_control":
			p.cacheControl()
		default:
			r.skip()
		}
	})
	return typ, text, textLen, hasText
}

func (p *bodyParser) cacheControl() {
	if p.r.peek() == '{' {
		p.out.CacheBreakpoints++
	}
	p.r.skip()
}

func (p *bodyParser) tools() {
	r := &p.r
	tools := &p.out.Tools
	r.array(func() {
		tools.Count++
		r.object(func(key []byte) {
			switch string(key) {
			case "name":
				if name := r.text(); len(tools.Names) < ToolNameLimit {
					tools.Names = append(tools.Names, name)
				}
			case "defer_loading":
				if r.boolean() {
					tools.Deferred++
				}
			case "cache_control":
				p.cacheControl()
			default:
				r.skip()
			}
		})
	})
}

// message reads one element of the messages array.
func (p *bodyParser) message() {
	r := &p.r
	if p.track {
		p.starts[len(p.out.Messages)%checkpointRing] = msgStart{off: r.i, cb: p.out.CacheBreakpoints, results: len(p.results)}
	}
	m := Message{Role: RoleOther}
	text := messageText{pendingFrom: len(p.pending), pendingTools: true}
	r.object(func(key []byte) {
		switch string(key) {
		case "role":
			m.Role = parseRole(r.text())
		case "content":
			p.content(&m, &text)
		default:
			r.skip()
		}
	})
	text.pendingTo = len(p.pending)
	if m.Role == RoleUser {
		m.HumanText = text.human != nil
	}
	p.out.Messages = append(p.out.Messages, m)
	p.msgs = append(p.msgs, text)
}

// materialize makes m's ToolUseIDs (an assistant message) or ToolResults (a user message) of
// what the parser read of its blocks, once: the role decides which, and may have come after
// the content.
func (p *bodyParser) materialize(m *Message, t *messageText) {
	if !t.pendingTools {
		return
	}
	t.pendingTools = false
	switch m.Role {
	case RoleUser:
		if t.pendingTo > t.pendingFrom {
			m.ToolResults = make([]ToolResult, 0, t.pendingTo-t.pendingFrom)
			for _, r := range p.pending[t.pendingFrom:t.pendingTo] {
				m.ToolResults = append(m.ToolResults, ToolResult{ToolUseID: unquote(r.toolUseID), IsError: r.isError, Bytes: r.bytes, AgentID: r.agentID})
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

func parseRole(s string) Role {
	switch r := Role(s); r {
	case RoleUser, RoleAssistant, RoleSystem:
		return r
	default:
		return RoleOther
	}
}

// parseBlockType maps a raw type name to a BlockType. It switches on string(b) so that the
// comparison does not allocate.
func parseBlockType(b []byte) BlockType {
	switch string(b) {
	case "text":
		return BlockText
	case "tool_use":
		return BlockToolUse
	case "tool_result":
		return BlockToolResult
	case "thinking":
		return BlockThinking
	case "redacted_thinking":
		return BlockRedactedThinking
	case "image":
		return BlockImage
	case "document":
		return BlockDocument
	default:
		return BlockOther
	}
}

// content reads a message's content (a string or a list of blocks) into m and text; the ids of
// its tool_use blocks and its tool_result blocks go to the parser's uses and pending, for
// materialize. The role may not be known yet (keys come in any order), so everything is
// collected and materialize keeps what the role allows.
func (p *bodyParser) content(m *Message, text *messageText) {
	r := &p.r
	// A repeated content key: the last one's tool_use ids count (its tool results add up).
	text.usesFrom, text.usesTo = len(p.uses), len(p.uses)
	if r.peek() == '"' {
		raw, _ := r.str()
		m.Blocks.Add(BlockText, 1)
		p.textBlock(raw, text)
		return
	}
	text.resultsFrom, text.resultsTo = len(p.results), len(p.results)
	r.array(func() {
		var blk contentBlock
		r.object(func(key []byte) { p.blockMember(key, &blk) })
		bt := parseBlockType(blk.typ)
		m.Blocks.Add(bt, 1)
		switch bt {
		case BlockText:
			if blk.hasText {
				p.textBlock(blk.text, text)
			}
		case BlockToolUse:
			p.uses = append(p.uses, blk.id)
			text.usesTo = len(p.uses)
		case BlockToolResult:
			p.pending = append(p.pending, pendingResult{
				toolUseID: blk.toolUseID,
				isError:   blk.isError,
				bytes:     blk.result.bytes,
				agentID:   blk.result.agentID,
			})
			p.results = append(p.results, blk.result.first)
			text.resultsTo = len(p.results)
		}
	})
}

// contentBlock is what one content block of a request carries, as raw bytes; which of it
// matters depends on its type, which may come after the other members.
type contentBlock struct {
	typ       []byte
	text      []byte
	hasText   bool
	id        []byte
	toolUseID []byte
	isError   bool
	result    resultContent
}

// resultContent summarises the content of a tool_result block.
type resultContent struct {
	bytes   int
	first   []byte // raw first text
	agentID string
}

func (p *bodyParser) blockMember(key []byte, blk *contentBlock) {
	r := &p.r
	switch string(key) {
	case "type":
		blk.typ, _ = r.str()
	case "text":
		blk.text, blk.hasText = r.str()
	case "id":
		blk.id, _ = r.str()
	case "tool_use_id":
		blk.toolUseID, _ = r.str()
	case "is_error":
		blk.isError = r.boolean()
	case "content":
		p.resultContent(&blk.result)
	case "cache_control":
		p.cacheControl()
	default:
		r.skip()
	}
}

// resultContent reads a tool_result's content: a string, or a list of blocks of which text
// blocks count their text bytes and the others their raw JSON bytes.
func (p *bodyParser) resultContent(rc *resultContent) {
	r := &p.r
	addText := func(raw []byte, n int) {
		rc.bytes += n
		if rc.first == nil {
			rc.first = raw
		}
		if rc.agentID == "" {
			rc.agentID = findAgentID(raw)
		}
	}
	if r.peek() == '"' {
		raw, n, _ := r.strN()
		addText(raw, n)
		return
	}
	r.array(func() {
		start := r.i
		typ, text, textLen, hasText := p.typedTextBlock()
		if string(typ) == "text" && hasText {
			addText(text, textLen)
			return
		}
		rc.bytes += len(bytes.TrimSpace(r.b[start:r.i]))
	})
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

// textBlock records a text block of a message: the first one that is not a system reminder is
// the message's human text.
func (p *bodyParser) textBlock(raw []byte, text *messageText) {
	if text.human == nil && isHumanText(raw) {
		text.human = raw
	}
	if !text.planMode && bytes.Contains(raw, []byte(planModeMarker)) {
		text.planMode = true
	}
	if !text.planExit && bytes.Contains(raw, []byte(planExitMarker)) {
		text.planExit = true
	}
	if !text.taskNotification && bytes.Contains(raw, []byte(taskNotificationMarker)) {
		text.taskNotification = true
	}
	if !text.compact && bytes.Contains(raw, []byte("/compact")) &&
		strings.Contains(unquote(raw), compactCommand) {
		text.compact = true
	}
}

// isHumanText reports whether a raw text block holds human text: not blank, and not a
// <system-reminder> once leading space is trimmed.
func isHumanText(raw []byte) bool {
	i := 0
	for i < len(raw) {
		c := raw[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		if c == '\\' && i+1 < len(raw) && (raw[i+1] == 'n' || raw[i+1] == 't' || raw[i+1] == 'r') {
			i += 2
			continue
		}
		break
	}
	if i == len(raw) {
		return false
	}
	if rest := raw[i:]; len(rest) >= len(systemReminderTag) &&
		bytes.IndexByte(rest[:len(systemReminderTag)], '\\') < 0 {
		// Nothing escaped in the first bytes: compare them as they are, without decoding.
		return !bytes.HasPrefix(rest, []byte(systemReminderTag))
	}
	head := unquotePrefix(raw[i:], len(systemReminderTag)+utf8.UTFMax)
	return !strings.HasPrefix(strings.TrimLeft(head, " \t\r\n"), systemReminderTag)
}

// finish decodes the texts that are kept, now that the first and last messages are known, and
// drops the tool results and ids of the messages before the last assistant message (see
// Message.ToolResults).
func (p *bodyParser) finish() {
	msgs := p.out.Messages
	la := lastAssistant(msgs)
	for i := p.fromPast; i < la; i++ {
		// Messages shared with a BodyCache entry are copies: this leaves the entry's alone.
		// Those decoded from this body never had any (see materialize).
		msgs[i].ToolResults, msgs[i].ToolUseIDs = nil, nil
	}
	for i := max(la, 0); i < len(msgs); i++ {
		p.materialize(&msgs[i], &p.msgs[i])
	}
	firstUser, lastUser, last := -1, -1, -1
	for i, m := range msgs {
		switch m.Role {
		case RoleUser:
			if firstUser < 0 {
				firstUser = i
			}
			lastUser = i
			last = i
		case RoleAssistant:
			last = i
		}
		if p.msgs[i].compact && m.Role == RoleUser {
			p.out.CompactCommand = true
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
	if lastUser >= 0 {
		p.out.TaskNotification = p.msgs[lastUser].taskNotification
	}
	// Claude Code announces Plan Mode in a system-role message (or a reminder in a user message)
	// that stays in the history, and its end in a later one: the last of them decides.
	for i, m := range msgs {
		if m.Role == RoleAssistant {
			continue
		}
		if p.msgs[i].planMode {
			p.out.PlanMode = true
		}
		if p.msgs[i].planExit {
			p.out.PlanMode = false
		}
	}
	if last >= 0 {
		if raw := p.msgs[last].human; raw != nil && msgs[last].Text == "" {
			msgs[last].Text = unquotePrefix(raw, HumanTextLimit)
		}
		results := msgs[last].ToolResults
		if last < p.shared && len(results) > 0 {
			// Shared with a BodyCache entry, which keeps them as decoded, without previews.
			results = slices.Clone(results)
			msgs[last].ToolResults = results
		}
		for i, raw := range p.results[p.msgs[last].resultsFrom:p.msgs[last].resultsTo] {
			if raw != nil && i < len(results) {
				results[i].Preview = unquotePrefix(raw, PreviewLimit)
			}
		}
	}
}

// lastAssistant returns the index of the last assistant message, -1 when there is none.
func lastAssistant(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			return i
		}
	}
	return -1
}

// metadataSessionID finds the session id in metadata.user_id: a JSON object string
// {"device_id":…,"account_uuid":…,"session_id":…} in current Claude Code, or
// user_<hash>_account_<uuid>_session_<uuid> in older versions.
func metadataSessionID(userID string) string {
	if strings.HasPrefix(strings.TrimSpace(userID), "{") {
		r := jsonReader{b: []byte(userID)}
		var id string
		r.object(func(key []byte) {
			if string(key) == "session_id" {
				id = r.text()
				return
			}
			r.skip()
		})
		if r.end() != nil {
			return ""
		}
		return id
	}
	const marker = "_session_"
	if k := strings.LastIndex(userID, marker); k >= 0 && strings.HasPrefix(userID, "user_") {
		return userID[k+len(marker):]
	}
	return ""
}
