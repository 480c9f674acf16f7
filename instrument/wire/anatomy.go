package wire

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/zeebo/xxh3"
)

// Context anatomy: what fills a request's input, part by part, in the order the API reads it
// (tools, system, messages), and where its cache breakpoints lie. docs/wire.md §2 describes the
// parts Claude Code sends and §6 the texts it writes into user turns itself.

// PartKind says what a part of a request's input is. Unknown content counts as PartOther.
type PartKind string

// The kinds of parts. A Part's Name refines some of them (see Part).
const (
	PartBillingHeader  PartKind = "billing_header"  // system: x-anthropic-billing-header
	PartIdentity       PartKind = "identity"        // system: "You are Claude Code, …"
	PartSystemPrompt   PartKind = "system_prompt"   // system: the prompt proper
	PartAppendedPrompt PartKind = "appended_prompt" // system: blocks after the prompt proper
	PartBuiltinTools   PartKind = "builtin_tools"   // tool definitions of the client's own tools
	PartMCPTools       PartKind = "mcp_tools"       // tool definitions mcp__<server>__…; Name: the server
	PartDeferredTools  PartKind = "deferred_tools"  // definitions with defer_loading: true
	PartHuman          PartKind = "human"           // user text a person typed
	PartClient         PartKind = "client"          // user text the client wrote; Name: its ClientText kind
	PartAssistantText  PartKind = "assistant_text"  // earlier answers' text
	PartThinking       PartKind = "thinking"        // earlier answers' thinking, redacted or not
	PartToolUse        PartKind = "tool_use"        // tool call inputs; Name: the tool
	PartToolResult     PartKind = "tool_result"     // tool results; Name: the tool
	PartImage          PartKind = "image"           // images, in messages or tool results
	PartDocument       PartKind = "document"        // documents (PDF, text sources)
	PartSystemMessage  PartKind = "system_message"  // system-role messages; Name: their kind
	PartOther          PartKind = "other"           // blocks and roles cctrace does not know
)

// Part is one part of a request's input: a kind and, for some kinds, a name: the tool of a
// PartToolUse or PartToolResult, the MCP server of PartMCPTools, the kind of text of a PartClient
// or PartSystemMessage. Names beyond maxParts distinct parts of a request become "other". The
// zero value is not a part.
type Part struct {
	Kind PartKind
	Name string
}

// PartSize is how much of a request's input one part takes.
type PartSize struct {
	Part
	// Bytes counts the part's content: the UTF-8 bytes of its texts (JSON escapes decoded), the
	// raw JSON of tool inputs and tool definitions, and the raw JSON of images', documents' and
	// unknown blocks' sources. Markup around them (roles, block types, cache markers) is not
	// counted.
	Bytes int
	// Blocks counts its content blocks (a tool definition and a system block count as one).
	Blocks int
}

// Section is where in a request a block is: its tools, its system prompt or its messages.
type Section uint8

// The sections, in the order the API reads a prompt (and caches its prefixes).
const (
	SectionTools Section = iota
	SectionSystem
	SectionMessages
)

// String returns the request key of the section.
func (s Section) String() string {
	switch s {
	case SectionTools:
		return "tools"
	case SectionSystem:
		return "system"
	}
	return "messages"
}

// Location is one block of a request: tools[Index], system[Index], or block Block of
// messages[Index].
type Location struct {
	Section Section
	Index   int
	Block   int
}

// String writes the location as a JSON path would: "system[2]", "messages[14].content[1]".
func (l Location) String() string {
	s := l.Section.String() + "[" + strconv.Itoa(l.Index) + "]"
	if l.Section == SectionMessages {
		s += ".content[" + strconv.Itoa(l.Block) + "]"
	}
	return s
}

// Breakpoint is a cache_control marker: the API caches the prompt up to the end of its block.
type Breakpoint struct {
	At Location
	// Offset is where the cached prefix ends: the bytes (as PartSize counts them) of the prompt
	// up to the end of the marked block, in the API's order (tools, system, messages).
	Offset int
	// TTL is the marker's ttl ("5m" when it names none, as the API defaults).
	TTL string
}

// Run is a stretch of the prompt: consecutive blocks of one part within one message (or within
// the tools or the system prompt). A cache breakpoint always ends a run.
type Run struct {
	Part    int32 // index in Anatomy.Parts
	Message int32 // index of the message; -1 in the tools and the system prompt
	Bytes   int32
	Blocks  int32
}

// Anatomy is what a request's input is made of. The zero value is an empty request.
type Anatomy struct {
	// Parts lists each part once, in the order it first appears in the prompt.
	Parts []PartSize
	// Runs is the whole prompt in the API's order, tools first: what the cache read and write
	// of the answer's usage are apportioned along (Apportion). It grows with the conversation:
	// a holder keeps what Apportion makes of it, not Runs.
	Runs []Run
	// Breakpoints are the request's cache_control markers, in prompt order.
	Breakpoints []Breakpoint
	// System has a hash of each system block (cache markers left out), Tools one of each tool
	// definition, Messages one of each message's content (cache markers left out, a string
	// content hashed as the one text block it stands for): what tells what changed from one
	// request to the next.
	System   []SystemHash
	Tools    []ToolHash
	Messages []uint64
}

// SystemHash identifies one system block, of kind Part (PartOther for a block that is not
// text).
type SystemHash struct {
	Part PartKind
	Hash uint64
}

// ToolHash identifies one tool definition.
type ToolHash struct {
	Name string
	Hash uint64
}

// Bytes returns the bytes of the whole prompt, as PartSize counts them.
func (a *Anatomy) Bytes() int {
	n := 0
	for _, p := range a.Parts {
		n += p.Bytes
	}
	return n
}

// maxParts bounds the distinct parts of a request: tool names beyond it count as "other".
const maxParts = 64

// ClientText kinds: the Name of a PartClient (what Claude Code writes into user turns) and of a
// PartSystemMessage. The Synthetic kinds are ClientText kinds too.
const (
	ClientReminder         = "reminder"           // a <system-reminder> of no kind listed here
	ClientClaudeMd         = "claude_md"          // CLAUDE.md and memory instructions
	ClientContext          = "context"            // other session context (account, git state)
	ClientAttribution      = "attribution"        // how to attribute commits
	ClientEnvironment      = "environment"        // "# Environment"
	ClientDeferredTools    = "deferred_tools"     // the deferred tools ToolSearch can load
	ClientAgentTypes       = "agent_types"        // the Agent tool's subagent types
	ClientSkills           = "skills"             // the skills the Skill tool can load
	ClientDate             = "date"               // today's date
	ClientPlanMode         = "plan_mode"          // Plan Mode on or off
	ClientHook             = "hook"               // what hooks added (context, blocking errors)
	ClientQueuedMessage    = "queued_message"     // a message the user typed while tools ran
	ClientCompactedSummary = "compaction_summary" // the tools used before a compaction
	ClientTokenBudget      = "token_budget"       // the tokens left
	ClientModel            = "model"              // which model is answering
	ClientCommand          = "command"            // a local slash command or ! command and its output
	ClientContinuation     = "continuation"       // "This session is being continued …"
	ClientTitle            = "title"              // the session-title side request's prompt
	ClientOther            = "other"              // a system-role message of no kind listed here
)

// clientPrefixes tells texts apart by how they begin (after a <system-reminder> tag and white
// space), as Claude Code 2.1.328 writes them (docs/wire.md §6).
var clientPrefixes = []struct {
	prefix string
	kind   string
}{
	{"As you answer the user's questions, you can use the following context:", ClientContext},
	{"The session context was re-read", ClientContext},
	{"The session context has changed", ClientContext},
	{"Attribution for git commits", ClientAttribution},
	{"# Environment", ClientEnvironment},
	{"The following deferred tools are now available", ClientDeferredTools},
	{"Available agent types for the Agent tool", ClientAgentTypes},
	{"The following skills are available", ClientSkills},
	{"Today's date is", ClientDate},
	{"The date has changed", ClientDate},
	{"The UTC date", ClientDate},
	{"Plan mode is active", ClientPlanMode},
	{"## Exited Plan Mode", ClientPlanMode},
	{"<tools-used-before-summary>", ClientCompactedSummary},
	{"<total_tokens>", ClientTokenBudget},
	{"You are powered by the model", ClientModel},
	{"[SYSTEM NOTIFICATION", string(SyntheticTaskNotification)},
	{"<task-notification>", string(SyntheticTaskNotification)},
	{"The user sent a new message while you were working", ClientQueuedMessage},
	{"<local-command-caveat>", ClientCommand},
	{"<command-name>", ClientCommand},
	{"<command-message>", ClientCommand},
	{"<local-command-stdout>", ClientCommand},
	{"<local-command-stderr>", ClientCommand},
	{"<bash-input>", ClientCommand},
	{"<bash-stdout>", ClientCommand},
	{"<bash-stderr>", ClientCommand},
	{"This session is being continued from a previous conversation", ClientContinuation},
	{"[earlier conversation truncated for compaction retry]", string(SyntheticCompaction)},
	{"<session>", ClientTitle},
}

// Markers found further into a text than its beginning.
var (
	// claudeMdMarkers are in the context reminder when it carries CLAUDE.md or memory files.
	claudeMdMarkers = [...][]byte{[]byte("# claudeMd"), []byte("Codebase and user instructions are shown below")}
	// hookMarkers are in the reminders that carry what a hook said ("<Hook> hook additional
	// context: …").
	hookMarkers = [...][]byte{[]byte("hook additional context"), []byte("hook blocking error"),
		[]byte("hook stopped continuation"), []byte("hook success")}
)

// classifyWindow is how much of a text its classification decodes: room for white space, a
// reminder tag and the longest prefix it looks for. markerWindow is how far into the raw text
// it looks for the markers further in (which have nothing JSON escapes).
const (
	classifyWindow = 160
	markerWindow   = 512
)

// textClass is what a text block is, as far as anatomy goes.
type textClass struct {
	blank    bool
	reminder bool   // inside <system-reminder>
	kind     string // a ClientText or Synthetic kind; "" for text a person typed
}

// human reports whether the text is human text as Message.HumanText counts it: not blank, and
// not a system reminder (Claude Code's own texts outside reminders count; Synthetic tells them).
func (c textClass) human() bool { return !c.blank && !c.reminder }

// classifyText reads the start of a raw JSON string (quotes included) and says what kind of
// text it is.
func classifyText(raw []byte) textClass {
	var buf [4 * classifyWindow]byte
	head, _ := jsontext.AppendUnquote(buf[:0], raw[:min(len(raw), classifyWindow)]) // a cut string decodes to its start
	text := trimSpace(head)
	if len(text) < len(systemReminderTag) && len(raw) > classifyWindow {
		// White space that runs on: look at the whole text.
		full, _ := jsontext.AppendUnquote(nil, raw)
		text = trimSpace(full)
	}
	if len(text) == 0 {
		return textClass{blank: true}
	}
	var c textClass
	if bytes.HasPrefix(text, []byte(systemReminderTag)) {
		c.reminder = true
		text = trimSpace(text[len(systemReminderTag):])
	}
	c.kind = clientKind(text, raw[:min(len(raw), markerWindow)])
	if c.kind == "" {
		if k := syntheticPrefix(text); k != "" {
			c.kind = string(k)
		} else if c.reminder {
			c.kind = ClientReminder
		}
	}
	return c
}

// clientKind returns the kind of Claude Code's own text that text (decoded, its start) is, or
// "": by how it begins, else by markers within head, the start of the text as sent.
func clientKind(text, head []byte) string {
	for _, p := range clientPrefixes {
		if bytes.HasPrefix(text, []byte(p.prefix)) {
			if p.kind == ClientContext {
				for _, m := range claudeMdMarkers {
					if bytes.Contains(head, m) {
						return ClientClaudeMd
					}
				}
			}
			return p.kind
		}
	}
	if bytes.Contains(head, []byte(taskNotificationMarker)) {
		return string(SyntheticTaskNotification)
	}
	// The first line says what a hook added ("<Hook> hook additional context: …").
	line := text
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		line = text[:i]
	}
	for _, m := range hookMarkers {
		if bytes.Contains(line, m) {
			return ClientHook
		}
	}
	return ""
}

// userTextPart returns the part a user message's text block of class c is.
func userTextPart(c textClass) Part {
	if c.kind == "" {
		return Part{Kind: PartHuman}
	}
	return Part{Kind: PartClient, Name: c.kind}
}

// systemMessagePart returns the part a system-role message's text of class c is.
func systemMessagePart(c textClass) Part {
	if c.kind == "" || c.kind == ClientReminder {
		return Part{Kind: PartSystemMessage, Name: ClientOther}
	}
	return Part{Kind: PartSystemMessage, Name: c.kind}
}

// trimSpace drops the JSON white space text begins with.
func trimSpace(text []byte) []byte {
	for len(text) > 0 && isSpace(text[0]) {
		text = text[1:]
	}
	return text
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// mcpServer returns the server of an MCP tool's name, mcp__<server>__<tool>, or "".
func mcpServer(name string) string {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return ""
	}
	server, _, ok := strings.Cut(rest, "__")
	if !ok || server == "" {
		return ""
	}
	return server
}

// MCPServer returns the MCP server a tool belongs to, by its name mcp__<server>__<tool>; "" for
// any other tool.
func MCPServer(tool string) string { return mcpServer(tool) }

// textLen returns the length of the text of a raw JSON string (quotes included) that the decoder
// validated: its UTF-8 bytes once escapes are decoded, a lone surrogate counting as the U+FFFD it
// decodes to. Bytes that are not UTF-8 count one each. It decodes nothing.
func textLen(raw []byte) int {
	if len(raw) < 2 {
		return 0
	}
	s := raw[1 : len(raw)-1]
	n := len(s)
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 || i+1 >= len(s) {
			return n
		}
		s = s[i:]
		if s[1] != 'u' || len(s) < 6 {
			n-- // \n, \", …: two bytes for one
			s = s[2:]
			continue
		}
		r := hex4(s[2:6])
		switch {
		case utf16IsHigh(r) && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' && utf16IsLow(hex4(s[8:12])):
			n -= 12 - 4 // a surrogate pair: one rune of four bytes
			s = s[12:]
		case utf16IsHigh(r) || utf16IsLow(r):
			n -= 6 - 3 // a lone surrogate: U+FFFD
			s = s[6:]
		default:
			n -= 6 - utf8.RuneLen(r)
			s = s[6:]
		}
	}
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

func utf16IsHigh(r rune) bool { return r >= 0xd800 && r < 0xdc00 }
func utf16IsLow(r rune) bool  { return r >= 0xdc00 && r < 0xe000 }

// anatomist builds a request's Anatomy while its body is walked. The body's members come in any
// order (Claude Code sends messages before system and tools), so each section gets runs of its
// own, put in the API's order at the end.
type anatomist struct {
	parts    []PartSize
	lastPart int // index of the last part added, -1 for none
	runs     [3][]Run
	// sealed is, per section, the runs a breakpoint ended: no later block joins them.
	sealed [3]int
	marks  []mark
	// uses are the tool_use blocks seen, for naming the tool of each tool_result.
	uses []toolUseName
	// msg is the message being read: its index, its role as far as read, the role its content
	// was read with, where its runs begin, and its content hash.
	msg         int32
	msgRole     Role
	contentRole Role
	msgRuns     int
	msgHash     xxh3.Hasher
	system      []SystemHash
	tools       []ToolHash
	messages    []uint64
	blockHash   xxh3.Hasher
	// order maps the parts to the order they appear in the prompt, in finish.
	order []int32
	// head is how much the members before the messages array added: what a BodyCache restores
	// of them when it resumes a later body, whose bytes up to there are the same.
	head headLens
}

// headLens counts what an anatomist held when the messages array began.
type headLens struct {
	runs                 [3]int
	marks, system, tools int
}

// mark is a breakpoint as read: after the first runs of its section.
type mark struct {
	section Section
	runs    int
	at      Location
	ttl     string
}

// toolUseName is a tool_use block of message msg: a hash of its id and its tool's name.
type toolUseName struct {
	id   uint64
	name string
	msg  int32
}

// reset empties the anatomist, keeping its arrays.
func (a *anatomist) reset() {
	clear(a.parts)
	clear(a.uses)
	clear(a.tools)
	a.parts, a.uses, a.marks = a.parts[:0], a.uses[:0], a.marks[:0]
	a.system, a.tools, a.messages = a.system[:0], a.tools[:0], a.messages[:0]
	for i := range a.runs {
		a.runs[i] = a.runs[i][:0]
	}
	a.sealed = [3]int{}
	a.lastPart = -1
	a.head = headLens{}
}

// startMessages records what the members before the messages array added.
func (a *anatomist) startMessages() {
	a.head = headLens{marks: len(a.marks), system: len(a.system), tools: len(a.tools)}
	for s := range a.runs {
		a.head.runs[s] = len(a.runs[s])
	}
}

// part returns the index of p in the parts, adding it when it is new.
func (a *anatomist) part(p Part) int32 {
	if k := a.lastPart; k >= 0 && a.parts[k].Part == p {
		return int32(k)
	}
	for i := range a.parts {
		if a.parts[i].Part == p {
			a.lastPart = i
			return int32(i)
		}
	}
	if len(a.parts) >= maxParts && p.Name != "" && p.Name != ClientOther {
		return a.part(Part{Kind: p.Kind, Name: ClientOther})
	}
	a.parts = append(a.parts, PartSize{Part: p})
	a.lastPart = len(a.parts) - 1
	return int32(a.lastPart)
}

// add counts blocks blocks of part p, of n bytes, at the end of section s.
func (a *anatomist) add(s Section, p Part, n, blocks int) {
	k := a.part(p)
	msg := int32(-1)
	if s == SectionMessages {
		msg = a.msg
	}
	runs := a.runs[s]
	if last := len(runs) - 1; last >= a.sealed[s] && runs[last].Part == k && runs[last].Message == msg {
		runs[last].Bytes += int32(n)
		runs[last].Blocks += int32(blocks)
		return
	}
	a.runs[s] = append(runs, Run{Part: k, Message: msg, Bytes: int32(n), Blocks: int32(blocks)})
}

// breakpoint records a cache_control marker at the end of what section s holds so far.
func (a *anatomist) breakpoint(s Section, at Location, ttl string) {
	n := len(a.runs[s])
	a.sealed[s] = n
	a.marks = append(a.marks, mark{section: s, runs: n, at: at, ttl: ttl})
}

// useName records a tool_use block's id (raw) and tool.
func (a *anatomist) useName(id []byte, name string) {
	if id != nil {
		a.uses = append(a.uses, toolUseName{id: xxh3.Hash(id), name: name, msg: a.msg})
	}
}

// toolName returns the tool a tool_use block names (raw), as a string made once per body and
// tool: a history calls the same few tools hundreds of times.
func (a *anatomist) toolName(raw []byte) string {
	name := unquoteBytes(raw)
	for i := len(a.uses) - 1; i >= 0; i-- {
		if a.uses[i].name == string(name) {
			return a.uses[i].name
		}
	}
	return string(name)
}

// toolOf returns the tool whose tool_use block has id (raw); "" when none was seen. Results
// follow their calls closely: the search starts with the latest.
func (a *anatomist) toolOf(id []byte) string {
	if id == nil {
		return ""
	}
	h := xxh3.Hash(id)
	for i := len(a.uses) - 1; i >= 0; i-- {
		if a.uses[i].id == h {
			return a.uses[i].name
		}
	}
	return ""
}

// startMessage begins message i.
func (a *anatomist) startMessage(i int) {
	a.msg, a.msgRole, a.contentRole, a.msgRuns = int32(i), RoleOther, RoleOther, len(a.runs[SectionMessages])
	a.msgHash.Reset()
}

// startContent begins the content of the message being read.
func (a *anatomist) startContent() { a.contentRole = a.msgRole }

// endMessage ends the message begun last, whose role is role: runs classified with another role
// (its role came after its content) are moved to the parts that role's blocks are.
func (a *anatomist) endMessage(role Role) {
	if role != a.contentRole || role == RoleOther {
		runs := a.runs[SectionMessages][a.msgRuns:]
		for i := range runs {
			p := a.parts[runs[i].Part].Part
			if q := rolePart(p, role); q != p {
				runs[i].Part = a.part(q)
			}
		}
	}
	_, _ = a.msgHash.WriteString(string(role))
	a.messages = append(a.messages, a.msgHash.Sum64())
}

// rolePart returns the part that text read as p would be in a message of role.
func rolePart(p Part, role Role) Part {
	text := p.Kind == PartHuman || p.Kind == PartClient || p.Kind == PartAssistantText || p.Kind == PartSystemMessage
	if !text {
		return p
	}
	switch role {
	case RoleUser:
		if p.Kind == PartAssistantText || p.Kind == PartSystemMessage {
			return Part{Kind: PartHuman}
		}
		return p
	case RoleAssistant:
		return Part{Kind: PartAssistantText}
	case RoleSystem:
		return Part{Kind: PartSystemMessage, Name: ClientOther}
	}
	return Part{Kind: PartOther}
}

// textPart returns the part a text block of class c of the message being read is.
func (a *anatomist) textPart(c textClass) Part {
	switch a.msgRole {
	case RoleAssistant:
		return Part{Kind: PartAssistantText}
	case RoleSystem:
		return systemMessagePart(c)
	case RoleUser, RoleOther:
		// RoleOther: the role is not known yet (it may come after the content); endMessage
		// moves the runs once it is.
		return userTextPart(c)
	}
	return Part{Kind: PartOther}
}

// hashMember adds a member of a block (its name and raw value, from the value's ':' on) to h.
func hashMember(h *xxh3.Hasher, name, raw []byte) {
	_, _ = h.Write(name)
	for len(raw) > 0 && (isSpace(raw[0]) || raw[0] == ':') {
		raw = raw[1:]
	}
	_, _ = h.Write(raw)
	_, _ = h.Write([]byte{0})
}

// finish makes the Anatomy: the sections' runs in the API's order, each part's size summed from
// them, the parts in the order they first appear, and the breakpoints' offsets.
func (a *anatomist) finish() Anatomy {
	var out Anatomy
	n := len(a.runs[0]) + len(a.runs[1]) + len(a.runs[2])
	if n == 0 && len(a.marks) == 0 {
		return out
	}
	out.Runs = make([]Run, 0, n)
	var base [3]int
	for s := range a.runs {
		base[s] = len(out.Runs)
		out.Runs = append(out.Runs, a.runs[s]...)
	}
	order := a.order[:0]
	for range a.parts {
		order = append(order, -1)
	}
	a.order = order
	for i := range out.Runs {
		r := &out.Runs[i]
		k := order[r.Part]
		if k < 0 {
			k = int32(len(out.Parts))
			order[r.Part] = k
			out.Parts = append(out.Parts, PartSize{Part: a.parts[r.Part].Part})
		}
		r.Part = k
		out.Parts[k].Bytes += int(r.Bytes)
		out.Parts[k].Blocks += int(r.Blocks)
	}
	if len(a.marks) > 0 {
		// In prompt order, each mark after more runs than the last: one walk finds the offsets.
		sortMarks(a.marks)
		out.Breakpoints = make([]Breakpoint, 0, len(a.marks))
		i, offset := 0, 0
		for _, m := range a.marks {
			for end := base[m.section] + m.runs; i < end; i++ {
				offset += int(out.Runs[i].Bytes)
			}
			out.Breakpoints = append(out.Breakpoints, Breakpoint{At: m.at, Offset: offset, TTL: m.ttl})
		}
	}
	if len(a.system) > 0 {
		out.System = append([]SystemHash(nil), a.system...)
	}
	if len(a.tools) > 0 {
		out.Tools = append([]ToolHash(nil), a.tools...)
	}
	if len(a.messages) > 0 {
		out.Messages = append([]uint64(nil), a.messages...)
	}
	return out
}

// sortMarks puts marks in prompt order: by section, then by the runs before them (an insertion
// sort: there are a few, and mostly in order).
func sortMarks(marks []mark) {
	before := func(x, y mark) bool {
		return x.section < y.section || x.section == y.section && x.runs < y.runs
	}
	for i := 1; i < len(marks); i++ {
		for j := i; j > 0 && before(marks[j], marks[j-1]); j-- {
			marks[j], marks[j-1] = marks[j-1], marks[j]
		}
	}
}

// anatomySnapshot is what a BodyCache keeps of an anatomist after a whole body, to resume a
// later body of the same conversation from one of its messages: a copy of its state.
type anatomySnapshot struct {
	parts    []PartSize
	runs     [3][]Run
	marks    []mark
	system   []SystemHash
	tools    []ToolHash
	messages []uint64
	uses     []toolUseName
	head     headLens
}

// snapshot copies a's state into s, reusing s's arrays.
func (a *anatomist) snapshot(s *anatomySnapshot) {
	s.parts = append(s.parts[:0], a.parts...)
	for i := range a.runs {
		s.runs[i] = append(s.runs[i][:0], a.runs[i]...)
	}
	s.marks = append(s.marks[:0], a.marks...)
	s.system = append(s.system[:0], a.system...)
	s.tools = append(s.tools[:0], a.tools...)
	s.messages = append(s.messages[:0], a.messages...)
	s.uses = append(s.uses[:0], a.uses...)
	s.head = a.head
}

// restore sets a to what s held before the messages array and of its first k messages: the
// state of a body that begins with the same bytes, up to message k.
func (a *anatomist) restore(s *anatomySnapshot, k int) {
	a.reset()
	a.parts = append(a.parts, s.parts...)
	for _, sec := range [...]Section{SectionTools, SectionSystem} {
		a.runs[sec] = append(a.runs[sec], s.runs[sec][:s.head.runs[sec]]...)
	}
	msgs := s.runs[SectionMessages]
	n := 0
	for n < len(msgs) && int(msgs[n].Message) < k {
		n++
	}
	a.runs[SectionMessages] = append(a.runs[SectionMessages], msgs[:n]...)
	for i, m := range s.marks {
		if i < s.head.marks || m.section == SectionMessages && m.at.Index < k {
			a.keepMark(m)
		}
	}
	a.system = append(a.system, s.system[:s.head.system]...)
	a.tools = append(a.tools, s.tools[:s.head.tools]...)
	a.messages = append(a.messages, s.messages[:min(k, len(s.messages))]...)
	for _, u := range s.uses {
		if int(u.msg) < k {
			a.uses = append(a.uses, u)
		}
	}
	a.head = s.head
}

// restoreTail adds what s held of the members after the messages array: a body that ends with
// the same bytes decodes to it.
func (a *anatomist) restoreTail(s *anatomySnapshot) {
	for _, sec := range [...]Section{SectionTools, SectionSystem} {
		base := len(a.runs[sec]) - s.head.runs[sec]
		a.runs[sec] = append(a.runs[sec], s.runs[sec][s.head.runs[sec]:]...)
		for _, m := range s.marks[s.head.marks:] {
			if m.section == sec {
				m.runs += base
				a.keepMark(m)
			}
		}
	}
	a.system = append(a.system, s.system[s.head.system:]...)
	a.tools = append(a.tools, s.tools[s.head.tools:]...)
}

// keepMark adds a mark restored from a snapshot.
func (a *anatomist) keepMark(m mark) {
	a.marks = append(a.marks, m)
	a.sealed[m.section] = max(a.sealed[m.section], m.runs)
}
