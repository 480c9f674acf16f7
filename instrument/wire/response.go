package wire

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds that keep a streamDecoder's memory fixed whatever the upstream sends.
const (
	// maxSSELine bounds one SSE line, and the data of one event; longer ones are skipped.
	// Real events are far smaller: deltas are tens of bytes, message_start a few KB.
	maxSSELine = 4 << 20
	// maxToolInput bounds the input JSON kept for one Agent tool call, which must be decoded.
	// Other tool calls keep only their preview.
	maxToolInput = 1 << 20
	// maxOpenBlocks bounds the content blocks open at once (the API opens one at a time).
	maxOpenBlocks = 64
	// maxToolUses bounds the tool calls kept from one response.
	maxToolUses = 1024
)

// isAgentTool reports whether a tool_use starts a subagent: the Agent tool, named Task in older
// Claude Code versions.
func isAgentTool(name string) bool { return name == "Agent" || name == "Task" }

// streamDecoder decodes an SSE response incrementally, chunk by chunk as forwarded. Lines may be
// split across chunks at any byte; \n, \r\n and \r all end lines. Its memory is bounded
// regardless of input. The zero value is ready to use, as is newStreamDecoder's result.
type streamDecoder struct {
	// SSE framing.
	line     []byte // the start of a line split across chunks
	overlong bool   // the current line exceeded maxSSELine and is being skipped
	skipLF   bool   // the previous chunk ended in \r: a leading \n belongs to it
	event    []byte // the event field of the pending event
	data     []byte // the data of the pending event, lines joined with \n
	hasData  bool
	dataOver bool // the pending event's data exceeded maxSSELine

	// Decoded content.
	msg        messageBuilder
	open       map[int]*openBlock
	openTools  int // blocks in open that are tool calls
	firstChunk time.Time
	stopped    bool // message_stop seen
	errType    string
	errMessage string
	skipped    int    // events or lines that could not be decoded
	firstSkip  string // why the first of them was skipped

	buffered bool // tests: decode every event line by line through event and data (no eventInPlace)
	// lfOnly is set while the chunk being written holds no \r, as the Messages API's never do:
	// its lines all end in \n, and finding where a line ends takes one search instead of two.
	lfOnly bool

	// frames is set for a Bedrock event stream (newEventStreamDecoder): its events come in AWS
	// event-stream frames instead of SSE lines.
	frames *awsFrames

	// t decodes event data; buf decodes tool input deltas.
	t   tokens
	buf []byte
}

// openBlock is a content block between its content_block_start and content_block_stop.
type openBlock struct {
	tool       int    // index into msg.tools; -1 for blocks other than tool_use
	agent      bool   // an Agent tool call: its whole input is kept and decoded
	startInput []byte // the input object of content_block_start (used when no delta follows)
	input      []byte // input JSON accumulated from input_json_delta
	truncated  bool   // input exceeded what is kept
}

// newStreamDecoder returns a decoder for one SSE response body.
func newStreamDecoder() *streamDecoder {
	return &streamDecoder{open: make(map[int]*openBlock, 2)}
}

// Write feeds the next chunk, received at now. It never fails; bad events are skipped and
// remembered for Finish.
func (d *streamDecoder) Write(p []byte, now time.Time) {
	if d.frames != nil {
		d.writeFrames(p, now)
	} else {
		d.write(p, now)
	}
	// Between chunks the decoder goes back to its pool, holding nothing of this one.
	d.t.release()
}

func (d *streamDecoder) write(p []byte, now time.Time) {
	if d.skipLF && len(p) > 0 {
		d.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	d.lfOnly = bytes.IndexByte(p, '\r') < 0
	for len(p) > 0 {
		if !d.buffered && d.betweenEvents() {
			if n := d.eventInPlace(p, now); n > 0 {
				p = p[n:]
				continue
			}
		}
		end := d.lineLength(p)
		if end < 0 {
			d.appendLine(p)
			return
		}
		line := p[:end]
		if len(d.line) > 0 || d.overlong {
			d.appendLine(line)
			line = d.line
		}
		if d.overlong {
			d.skip("SSE line longer than 4 MiB")
		} else {
			d.processLine(line, now)
		}
		d.line = d.line[:0]
		d.overlong = false
		p = p[d.nextLine(p, end):]
	}
}

// betweenEvents reports whether the next byte starts a line and no event is pending.
func (d *streamDecoder) betweenEvents() bool {
	return len(d.line) == 0 && !d.overlong && len(d.event) == 0 && !d.hasData && !d.dataOver
}

// deltaStart starts a content_block_delta event as the Messages API sends it.
const deltaStart = "event: content_block_delta\ndata:"

// maxInPlaceName bounds the event name eventInPlace reads; the Messages API's are under 20 bytes.
const maxInPlaceName = 64

// eventInPlace decodes the event at the start of p, called between events, when it lies wholly
// in p and has the shape the Messages API always sends: an optional event line, one data line
// and the blank line (`event: NAME\ndata: JSON\n\n`, with any of the three line ends). It reads
// name and data where they lie rather than copying them line by line into d.event and d.data,
// and returns the event's length. It returns 0, having changed nothing, for anything else (an
// event cut by the chunk's end, several data lines, comments, other fields), which Write then
// takes line by line; both ways hand handleEvent the same name and data.
func (d *streamDecoder) eventInPlace(p []byte, now time.Time) int {
	if d.lfOnly && bytes.HasPrefix(p, []byte(deltaStart)) && d.passesOver([]byte("content_block_delta")) {
		// Nearly all of a long answer's events: a delta that changes nothing kept ends at the
		// blank line after its one data line, and its data need not be looked at. Anything
		// else about it (more lines, a cut) is left to the general case below.
		i := fieldValue(p, len(deltaStart))
		if n := bytes.IndexByte(p[i:], '\n'); n >= 0 && n+1 <= maxSSELine && i+n+1 < len(p) && p[i+n+1] == '\n' {
			return i + n + 2
		}
	}
	var name []byte
	i := 0
	if bytes.HasPrefix(p, []byte("event:")) {
		start := fieldValue(p, len("event:"))
		n := d.lineLength(p[start:min(len(p), start+maxInPlaceName+1)])
		if n < 0 || n > maxInPlaceName {
			return 0
		}
		name = p[start : start+n]
		if i = lineEnd(p, start+n); i < 0 {
			return 0
		}
	}
	if !bytes.HasPrefix(p[i:], []byte("data:")) {
		return 0
	}
	i = fieldValue(p, i+len("data:"))
	n := d.lineLength(p[i:])
	if n < 0 || n+1 > maxSSELine {
		return 0
	}
	data := p[i : i+n]
	end := d.eventEnd(p, i+n)
	if end == 0 {
		return 0
	}
	if err := d.handleEvent(name, data, now); err != nil {
		d.skip(err.Error())
	}
	return end
}

// eventEnd returns where the event whose data line ends at p[i] ends, past the blank line
// that must follow; 0 when p does not hold them both.
func (d *streamDecoder) eventEnd(p []byte, i int) int {
	i = lineEnd(p, i)
	if i < 0 || i == len(p) {
		return 0
	}
	return max(d.nextLine(p, i), 0)
}

// nextLine returns lineEnd(p, i), noting a \r that is p's last byte: a \n that starts the next
// chunk belongs to it.
func (d *streamDecoder) nextLine(p []byte, i int) int {
	next := lineEnd(p, i)
	if next == len(p) && p[next-1] == '\r' {
		d.skipLF = true
	}
	return next
}

// fieldValue returns where the value of the SSE field whose colon ends at i starts: after one
// optional space.
func fieldValue(p []byte, i int) int {
	if i < len(p) && p[i] == ' ' {
		i++
	}
	return i
}

// lineLength returns the length of the line at the start of p, up to its \n or \r; -1 when p
// holds no line end.
func (d *streamDecoder) lineLength(p []byte) int {
	nl := bytes.IndexByte(p, '\n')
	seg := p
	if nl >= 0 {
		seg = p[:nl]
	}
	if cr := d.indexCR(seg); cr >= 0 {
		return cr
	}
	return nl
}

// indexCR returns the index of the first \r in seg, part of the chunk being written; -1 when
// there is none, at once when the chunk has none.
func (d *streamDecoder) indexCR(seg []byte) int {
	if d.lfOnly {
		return -1
	}
	return bytes.IndexByte(seg, '\r')
}

// lineEnd returns where the line after the line end at p[i] starts: past \n, \r\n or \r; p's
// length for a \r that is p's last byte, whose \n (if any) starts the next chunk. It returns -1
// when p[i] does not end a line (or i is p's length).
func lineEnd(p []byte, i int) int {
	switch {
	case i >= len(p):
		return -1
	case p[i] == '\n':
		return i + 1
	case p[i] != '\r':
		return -1
	case i+1 < len(p) && p[i+1] == '\n':
		return i + 2
	}
	return i + 1
}

// appendLine keeps the start of a line that continues in the next chunk.
func (d *streamDecoder) appendLine(p []byte) {
	if d.overlong {
		return
	}
	if len(d.line)+len(p) > maxSSELine {
		d.overlong = true
		d.line = nil
		return
	}
	d.line = appendBounded(d.line, p, maxSSELine)
}

// appendBounded appends p to dst, never letting dst's capacity exceed limit (append's own growth
// could overshoot it by half). len(dst)+len(p) must be at most limit.
func appendBounded(dst, p []byte, limit int) []byte {
	if need := len(dst) + len(p); need > cap(dst) {
		grown := make([]byte, len(dst), min(max(2*cap(dst), need, 512), limit))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, p...)
}

func (d *streamDecoder) skip(why string) {
	if d.skipped == 0 {
		d.firstSkip = why
	}
	d.skipped++
}

// processLine interprets one complete SSE line (without its terminator).
func (d *streamDecoder) processLine(line []byte, now time.Time) {
	if len(line) == 0 {
		d.dispatch(now)
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	if k := bytes.IndexByte(line, ':'); k >= 0 {
		field, value = line[:k], line[k+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		d.event = append(d.event[:0], value...)
	case "data":
		if d.dataOver {
			return
		}
		if len(d.data)+len(value)+1 > maxSSELine {
			d.dataOver = true
			return
		}
		if d.hasData {
			d.data = appendBounded(d.data, []byte{'\n'}, maxSSELine)
		}
		d.data = appendBounded(d.data, value, maxSSELine)
		d.hasData = true
	}
}

// dispatch handles the pending event at the blank line that ends it.
func (d *streamDecoder) dispatch(now time.Time) {
	defer func() {
		d.event = d.event[:0]
		d.data = d.data[:0]
		d.hasData = false
		d.dataOver = false
		if cap(d.data) > 64<<10 {
			d.data = nil // do not hold a large buffer for the rest of the stream
		}
	}()
	switch {
	case d.dataOver:
		d.skip("SSE event data longer than 4 MiB")
	case d.hasData:
		if err := d.handleEvent(d.event, d.data, now); err != nil {
			d.skip(err.Error())
		}
	}
}

// sseEvent holds the members of one event's data object, as raw JSON.
type sseEvent struct {
	typ          []byte // decoded
	index        int
	message      []byte
	contentBlock []byte
	delta        []byte
	usage        []byte
	err          []byte
	// blockDelta is the delta of a content_block_delta event, read in place when the SSE event
	// name said what the event is (always, from the Messages API) rather than kept raw and read
	// a second time: these are nearly all of a stream's events.
	blockDelta    blockDeltaFields
	hasBlockDelta bool
}

// blockDeltaFields are the members of a content_block_delta's delta that the decoder uses:
// its type, and its text and partial_json raw.
type blockDeltaFields struct {
	typ, text, partial []byte
}

// member reads the member name of a delta object.
func (f *blockDeltaFields) member(r *tokens, name []byte) {
	switch string(name) {
	case "type":
		f.typ = r.textBytes()
	case "text":
		f.text = r.str()
	case "partial_json":
		f.partial = r.str()
	default:
		r.skip()
	}
}

// handleEvent decodes the data of one event, named name (empty without an event line), and
// applies it.
func (d *streamDecoder) handleEvent(name, data []byte, now time.Time) error {
	if d.passesOver(name) {
		return nil
	}
	var ev sseEvent
	r := &d.t
	r.reset(data)
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			ev.typ = r.textBytes()
		case "index":
			ev.index = r.integer()
		case "message":
			ev.message = r.value()
		case "content_block":
			ev.contentBlock = r.value()
		case "delta":
			if string(name) != "content_block_delta" || r.kind() != '{' {
				ev.delta = r.value()
				break
			}
			r.token()
			start := r.offset() - 1
			r.members(func(name []byte) { ev.blockDelta.member(r, name) })
			ev.hasBlockDelta = true
			ev.delta = r.src[start:r.offset()] // for an event whose type contradicts its name
		case "usage":
			ev.usage = r.value()
		case "error":
			ev.err = r.value()
		default:
			r.skip()
		}
	})
	if err := r.end(); err != nil {
		return fmt.Errorf("decoding %s event: %w", name, err)
	}
	if len(ev.typ) == 0 {
		ev.typ = name
	}
	// The event is read: what follows decodes its members with the same decoder.
	switch string(ev.typ) {
	case "message_start":
		d.msg.message(r, ev.message)
	case "content_block_start":
		d.blockStart(ev.index, ev.contentBlock)
	case "content_block_delta":
		if !ev.hasBlockDelta {
			r.reset(ev.delta)
			r.object(func(name []byte) { ev.blockDelta.member(r, name) })
		}
		d.handleBlockDelta(ev.index, ev.blockDelta, now)
	case "content_block_stop":
		d.blockStop(ev.index, now)
	case "message_delta":
		d.msg.delta(r, ev.delta)
		r.reset(ev.usage)
		d.msg.usage(r)
	case "message_stop":
		d.stopped = true
	case "error":
		d.errType, d.errMessage = decodeError(r, ev.err)
	}
	return nil
}

// passesOver reports whether an event named name can change nothing the decoder keeps, and so
// need not be decoded: a content_block_delta once the first delta's time is known, the text
// preview is full and no tool call is open. Such deltas (text beyond the preview, thinking) are
// nearly all of a long answer's events. The Messages API names each event by its type.
func (d *streamDecoder) passesOver(name []byte) bool {
	return string(name) == "content_block_delta" && !d.firstChunk.IsZero() && d.msg.textFull() && d.openTools == 0
}

func (d *streamDecoder) blockStart(index int, raw []byte) {
	blk := d.msg.block(&d.t, raw)
	if len(d.open) >= maxOpenBlocks {
		d.skip("too many open content blocks")
		return
	}
	if d.open == nil {
		d.open = make(map[int]*openBlock, 2)
	}
	ob := &openBlock{tool: blk.tool, agent: blk.agent}
	if blk.tool >= 0 {
		// The input arrives in deltas; the start's (normally {}) only stands when none come.
		ob.startInput = bytes.Clone(blk.input)
		d.msg.tools[blk.tool].InputBytes = 0
	}
	d.closeBlock(index)
	d.open[index] = ob
	if ob.tool >= 0 {
		d.openTools++
	}
}

// closeBlock forgets the open block at index, if any, and returns it.
func (d *streamDecoder) closeBlock(index int) *openBlock {
	ob := d.open[index]
	if ob == nil {
		return nil
	}
	delete(d.open, index)
	if ob.tool >= 0 {
		d.openTools--
	}
	return ob
}

// handleBlockDelta handles a content_block_delta event.
func (d *streamDecoder) handleBlockDelta(index int, f blockDeltaFields, now time.Time) {
	if d.firstChunk.IsZero() {
		d.firstChunk = now
	}
	switch string(f.typ) {
	case "text_delta":
		d.msg.appendText(f.text)
	case "input_json_delta":
		ob := d.open[index]
		if ob == nil || ob.tool < 0 {
			return
		}
		partial := decoded(f.partial, &d.buf)
		d.msg.tools[ob.tool].InputBytes += len(partial)
		keep := PreviewLimit + 8
		if ob.agent {
			keep = maxToolInput
		}
		room := max(keep-len(ob.input), 0)
		if len(partial) > room {
			partial = partial[:room]
			ob.truncated = true
		}
		ob.input = append(ob.input, partial...)
		if cap(d.buf) > maxScratchBuf {
			d.buf = nil
		}
	}
}

func (d *streamDecoder) blockStop(index int, now time.Time) {
	ob := d.closeBlock(index)
	if ob == nil || ob.tool < 0 {
		return
	}
	d.finishTool(ob, now)
}

// finishTool completes a tool call from its accumulated input. end is zero for a call whose
// content_block_stop never came.
func (d *streamDecoder) finishTool(ob *openBlock, end time.Time) {
	tu := &d.msg.tools[ob.tool]
	tu.End = end
	input := ob.input
	if input == nil {
		input = ob.startInput
		tu.InputBytes = len(input)
	}
	tu.Input = truncate(string(input), PreviewLimit)
	if ob.agent && !ob.truncated && !end.IsZero() {
		tu.Agent = decodeAgentCall(&d.t, input)
	}
}

// Finish fills resp.Message, FirstChunk, ErrorType, ErrorMessage, Incomplete and ParseError from
// what was seen. Content blocks still open (the stream was cut) keep a zero End.
func (d *streamDecoder) Finish(resp *Response) {
	for index, ob := range d.open {
		if ob.tool >= 0 {
			d.finishTool(ob, time.Time{})
		}
		d.closeBlock(index)
	}
	d.t.release()
	resp.Message = d.msg.result()
	resp.FirstChunk = d.firstChunk
	if d.errType != "" || d.errMessage != "" {
		resp.ErrorType, resp.ErrorMessage = d.errType, d.errMessage
	}
	resp.Incomplete = !d.stopped
	if d.skipped > 0 {
		resp.ParseError = fmt.Sprintf("decoding event stream: skipped %d events (first: %s)",
			d.skipped, d.firstSkip)
	}
}

// messageBuilder assembles a MessageInfo from a JSON message or from stream events. Its methods
// decode with the tokens they are given, from a raw value that was read whole before.
type messageBuilder struct {
	// complete is true for a JSON message, whose tool inputs are final as given; a stream's
	// arrive in later deltas.
	complete bool
	seen     bool
	info     MessageInfo
	tools    []ToolUse
	text     []byte
	blocks   [][]byte // a message's content blocks, read after it
}

func (b *messageBuilder) start() {
	if !b.seen {
		b.seen = true
		b.info.Blocks = make(map[BlockType]int, 4)
	}
}

// message reads a message object (message_start's, or a whole JSON response).
func (b *messageBuilder) message(r *tokens, raw []byte) {
	b.start()
	r.reset(raw)
	r.object(func(name []byte) {
		switch string(name) {
		case "id":
			b.info.ID = r.text()
		case "model":
			b.info.Model = r.text()
		case "stop_reason":
			setText(r, &b.info.StopReason)
		case "usage":
			b.usage(r)
		case "content":
			r.array(func() { b.blocks = append(b.blocks, r.value()) })
		default:
			r.skip()
		}
	})
	for _, blk := range b.blocks {
		b.block(r, blk)
	}
	clear(b.blocks)
	b.blocks = b.blocks[:0]
}

// delta reads message_delta's delta object.
func (b *messageBuilder) delta(r *tokens, raw []byte) {
	b.start()
	r.reset(raw)
	r.member("stop_reason", func() { setText(r, &b.info.StopReason) })
}

// setText reads a string into *dst, which keeps its value when the string is empty or the value
// not a string: a later event may repeat an earlier one's members with no value.
func setText(r *tokens, dst *string) {
	if s := r.text(); s != "" {
		*dst = s
	}
}

// usage reads a usage object from r. Fields it lacks (or has as null) keep their earlier values,
// since message_delta may repeat only some of message_start's counts.
func (b *messageBuilder) usage(r *tokens) {
	r.object(func(name []byte) { b.usageMember(r, name) })
}

// usageMember reads the member name of a usage object.
func (b *messageBuilder) usageMember(r *tokens, name []byte) {
	u := &b.info.Usage
	set := func(dst *int) {
		if r.kind() == '0' {
			*dst = r.integer()
			return
		}
		r.skip()
	}
	switch string(name) {
	case "input_tokens":
		set(&u.InputTokens)
	case "output_tokens":
		set(&u.OutputTokens)
	case "cache_read_input_tokens":
		set(&u.CacheReadInputTokens)
	case "cache_creation_input_tokens":
		set(&u.CacheCreationInputTokens)
	case "cache_creation":
		r.object(func(name []byte) {
			switch string(name) {
			case "ephemeral_5m_input_tokens":
				set(&u.CacheCreation5m)
			case "ephemeral_1h_input_tokens":
				set(&u.CacheCreation1h)
			default:
				r.skip()
			}
		})
	case "server_tool_use":
		r.object(func(name []byte) {
			switch string(name) {
			case "web_search_requests":
				set(&u.ServerToolUse.WebSearch)
			case "web_fetch_requests":
				set(&u.ServerToolUse.WebFetch)
			case "code_execution_requests":
				set(&u.ServerToolUse.CodeExecution)
			default:
				r.skip()
			}
		})
	case "speed":
		setText(r, &u.Speed)
	case "inference_geo":
		setText(r, &u.InferenceGeo)
	case "iterations":
		b.iterations(r)
	default:
		r.skip()
	}
}

// iterations reads usage.iterations, keeping the entries billed beside the top-level counts
// (all but "message" and "fallback_message", the answer's own sampling). The last list read
// stands: message_delta repeats message_start's.
func (b *messageBuilder) iterations(r *tokens) {
	b.info.Iterations = b.info.Iterations[:0]
	r.array(func() {
		var it Iteration
		inner := &messageBuilder{}
		r.object(func(name []byte) {
			switch string(name) {
			case "type":
				it.Type = r.text()
			case "model":
				it.Model = r.text()
			default:
				// The counts share the top-level usage's names.
				inner.usageMember(r, name)
			}
		})
		switch it.Type {
		case "", "message", "fallback_message":
			return
		}
		it.Usage = inner.info.Usage
		b.info.Iterations = append(b.info.Iterations, it)
	})
}

// responseBlock is what block() learned of one content block.
type responseBlock struct {
	tool  int    // index into tools, or -1
	input []byte // raw input object of a tool_use
	agent bool   // the tool_use starts a subagent
}

// block counts a content block (content_block_start's, or one of a JSON message's) and, for a
// tool_use, records the call with its input as given (complete for JSON messages, usually {} at
// a stream's content_block_start).
func (b *messageBuilder) block(r *tokens, raw []byte) responseBlock {
	b.start()
	var typ, text, id, name, input []byte
	r.reset(raw)
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			typ = r.textBytes()
		case "text":
			text = r.str()
		case "id":
			id = r.str()
		case "name":
			name = r.str()
		case "input":
			input = r.value()
		default:
			r.skip()
		}
	})
	bt := parseBlockType(typ)
	b.info.Blocks[bt]++
	switch bt {
	case BlockText:
		b.appendText(text)
	case BlockToolUse:
		if len(b.tools) >= maxToolUses {
			return responseBlock{tool: -1}
		}
		tu := ToolUse{ID: unquote(id), Name: unquote(name), InputBytes: len(input)}
		tu.Input = truncate(string(input), PreviewLimit)
		agent := isAgentTool(tu.Name)
		if agent && b.complete {
			tu.Agent = decodeAgentCall(r, input)
		}
		b.tools = append(b.tools, tu)
		return responseBlock{tool: len(b.tools) - 1, input: input, agent: agent}
	}
	return responseBlock{tool: -1}
}

// textFull reports whether the start of the response's text that is kept is complete.
func (b *messageBuilder) textFull() bool { return len(b.text) >= PreviewLimit+utf8.UTFMax }

// appendText adds a raw text to the start of the response's text that is kept.
func (b *messageBuilder) appendText(raw []byte) {
	if room := PreviewLimit + utf8.UTFMax - len(b.text); room > 0 && len(raw) > 0 {
		b.text = appendPrefix(b.text, raw, room)
	}
}

func (b *messageBuilder) result() *MessageInfo {
	if !b.seen {
		return nil
	}
	info := b.info
	info.ToolUses = b.tools
	info.Text = truncate(string(b.text), PreviewLimit)
	return &info
}

// decodeAgentCall decodes the input of an Agent tool call; nil when it is not a JSON object.
func decodeAgentCall(r *tokens, input []byte) *AgentCall {
	var call AgentCall
	r.reset(input)
	ok := r.object(func(name []byte) {
		switch string(name) {
		case "description":
			call.Description = truncate(r.text(), PreviewLimit)
		case "subagent_type":
			call.SubagentType = truncate(r.text(), PreviewLimit)
		case "run_in_background":
			call.RunInBackground = r.boolean()
		case "prompt":
			call.PromptHash = HashText(r.text())
		default:
			r.skip()
		}
	})
	if !ok || r.end() != nil {
		return nil
	}
	return &call
}

// decodeError reads an error object {"type":…,"message":…}.
func decodeError(r *tokens, raw []byte) (typ, message string) {
	var status string
	r.reset(raw)
	r.object(func(name []byte) {
		switch string(name) {
		case "type":
			typ = r.text()
		case "status":
			// Google APIs (Vertex AI) name the error in "status" (UNAUTHENTICATED, …).
			status = r.text()
		case "message":
			message = truncate(r.text(), PreviewLimit)
		default:
			r.skip()
		}
	})
	return cmp.Or(typ, status), message
}

// DecodeResponse decodes a complete response body, as forwarded, per resp.ContentType,
// resp.ContentEncoding and the endpoint: a JSON message, a count_tokens answer, a JSON error, or
// an event stream. An event stream's events are timed by resp.Chunks, which it then clears; the
// events of a content-encoded stream, and those past the chunks, are taken at resp.End. Failures
// are reported in resp.ParseError; it never panics on bad input.
func DecodeResponse(resp *Response, endpoint Endpoint, body []byte) {
	b, err := Decompress(resp.ContentEncoding, body)
	if err != nil {
		resp.ParseError = fmt.Sprintf("decoding response body: %v", err)
		return
	}
	if IsEventStream(resp.ContentType) {
		resp.Streamed = true
		d := newStreamDecoder()
		if IsAWSEventStream(resp.ContentType) {
			d = newEventStreamDecoder()
		}
		from := 0
		if !encoded(resp.ContentEncoding) { // the chunks are b's
			for _, c := range resp.Chunks {
				if c.End < from || c.End > len(b) {
					break
				}
				d.Write(b[from:c.End], c.At)
				from = c.End
			}
		}
		d.Write(b[from:], resp.End)
		d.Finish(resp)
		resp.Chunks = nil
		return
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	var (
		r                tokens
		typ, errRaw      []byte
		awsMessage       string
		inputTokens      int
		hasInputTokens   bool
		looksLikeMessage bool
	)
	defer r.release()
	r.reset(b)
	isObject := r.object(func(name []byte) {
		switch string(name) {
		case "type":
			typ = r.textBytes()
		case "error":
			errRaw = r.value()
		case "input_tokens":
			inputTokens, hasInputTokens = r.integer(), true
		case "content":
			looksLikeMessage = true
			r.skip()
		case "message", "Message":
			// AWS services (Bedrock) answer errors as {"message": …}.
			awsMessage = truncate(r.text(), PreviewLimit)
		default:
			r.skip()
		}
	})
	if err := r.end(); err != nil || !isObject {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		resp.ParseError = fmt.Sprintf("decoding response body: %v", err)
		return
	}
	switch {
	case string(typ) == "error" || errRaw != nil:
		resp.ErrorType, resp.ErrorMessage = decodeError(&r, errRaw)
	case endpoint == EndpointCountTokens && hasInputTokens:
		resp.InputTokens = inputTokens
	case resp.Status >= 400 && awsMessage != "":
		resp.ErrorMessage = awsMessage
	case string(typ) == "message" || looksLikeMessage:
		mb := messageBuilder{complete: true}
		mb.message(&r, b)
		for i := range mb.tools {
			mb.tools[i].End = resp.End
		}
		resp.Message = mb.result()
	}
}

// IsEventStream reports whether a Content-Type is an event stream: text/event-stream (SSE), or
// Bedrock's application/vnd.amazon.eventstream (IsAWSEventStream).
func IsEventStream(contentType string) bool {
	mt := mediaType(contentType)
	return strings.EqualFold(mt, "text/event-stream") || strings.EqualFold(mt, awsEventStream)
}

// mediaType returns a Content-Type without its parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.TrimSpace(mt)
}
