package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bounds that keep a StreamDecoder's memory fixed whatever the upstream sends.
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

// StreamDecoder decodes an SSE response incrementally, chunk by chunk as forwarded. Lines may be
// split across chunks at any byte; \n, \r\n and \r all end lines. Its memory is bounded
// regardless of input. The zero value is ready to use, as is NewStreamDecoder's result.
type StreamDecoder struct {
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
	firstChunk time.Time
	stopped    bool // message_stop seen
	errType    string
	errMessage string
	skipped    int    // events or lines that could not be decoded
	firstSkip  string // why the first of them was skipped

	slow     bool // tests: decode every event with the general decoder (no blockDeltaShape)
	buffered bool // tests: decode every event line by line through event and data (no eventInPlace)
}

// openBlock is a content block between its content_block_start and content_block_stop.
type openBlock struct {
	tool       int    // index into msg.tools; -1 for blocks other than tool_use
	agent      bool   // an Agent tool call: its whole input is kept and decoded
	startInput []byte // the input object of content_block_start (used when no delta follows)
	input      []byte // input JSON accumulated from input_json_delta
	truncated  bool   // input exceeded what is kept
}

// NewStreamDecoder returns a decoder for one SSE response body.
func NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{open: make(map[int]*openBlock, 2)}
}

// Write feeds the next chunk, received at now. It never fails; bad events are skipped and
// remembered for Finish.
func (d *StreamDecoder) Write(p []byte, now time.Time) {
	if d.skipLF && len(p) > 0 {
		d.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		if !d.buffered && d.betweenEvents() {
			if n := d.eventInPlace(p, now); n > 0 {
				p = p[n:]
				continue
			}
		}
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		end, next := nl, nl+1
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			end, next = cr, cr+1
			switch {
			case cr+1 < len(p) && p[cr+1] == '\n':
				next = cr + 2
			case cr+1 == len(p):
				d.skipLF = true
			}
		}
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
		p = p[next:]
	}
}

// betweenEvents reports whether the next byte starts a line and no event is pending.
func (d *StreamDecoder) betweenEvents() bool {
	return len(d.line) == 0 && !d.overlong && len(d.event) == 0 && !d.hasData && !d.dataOver
}

// maxInPlaceName bounds the event name eventInPlace reads; the Messages API's are under 20 bytes.
const maxInPlaceName = 64

// blockDeltaEvent starts nearly every event of a stream: a content_block_delta, as the Messages
// API sends it with \n line ends, up to the index in its data.
const blockDeltaEvent = "event: content_block_delta\ndata: " + blockDeltaHead

// eventInPlace decodes the event at the start of p, called between events, when it lies wholly
// in p and has the shape the Messages API always sends: an optional event line, one data line
// and the blank line (`event: NAME\ndata: JSON\n\n`, with any of the three line ends). It reads
// name and data where they lie rather than copying them line by line into d.event and d.data,
// and returns the event's length. It returns 0, having changed nothing, for anything else (an
// event cut by the chunk's end, several data lines, comments, other fields), which Write then
// takes line by line; both ways hand handleEvent the same name and data.
func (d *StreamDecoder) eventInPlace(p []byte, now time.Time) int {
	if !d.slow && bytes.HasPrefix(p, []byte(blockDeltaEvent)) {
		// Nearly every event, recognised without looking for its lines' ends: its data line
		// ends where its JSON does (which holds neither \n nor \r, so it reads the same on the
		// line alone), and what handleEvent would do with it is handleBlockDelta.
		if index, f, n, ok := blockDeltaShapeRest(p, len(blockDeltaEvent)); ok {
			if end := d.eventEnd(p, n); end > 0 {
				d.handleBlockDelta(index, f, now)
				return end
			}
		}
	}
	var name []byte
	i := 0
	if bytes.HasPrefix(p, []byte("event:")) {
		i = fieldValue(p, len("event:"))
		start := i
		for i < len(p) && p[i] != '\n' && p[i] != '\r' {
			if i-start == maxInPlaceName {
				return 0
			}
			i++
		}
		name = p[start:i]
		if i = lineEnd(p, i); i < 0 {
			return 0
		}
	}
	if !bytes.HasPrefix(p[i:], []byte("data:")) {
		return 0
	}
	i = fieldValue(p, i+len("data:"))
	n := lineLength(p[i:])
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
func (d *StreamDecoder) eventEnd(p []byte, i int) int {
	i = lineEnd(p, i)
	if i < 0 || i == len(p) {
		return 0
	}
	end := lineEnd(p, i)
	if end < 0 {
		return 0
	}
	if end == len(p) && p[end-1] == '\r' {
		d.skipLF = true // as Write would: the same state either way
	}
	return end
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
func lineLength(p []byte) int {
	nl := bytes.IndexByte(p, '\n')
	seg := p
	if nl >= 0 {
		seg = p[:nl]
	}
	if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
		return cr
	}
	return nl
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
func (d *StreamDecoder) appendLine(p []byte) {
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

func (d *StreamDecoder) skip(why string) {
	if d.skipped == 0 {
		d.firstSkip = why
	}
	d.skipped++
}

// processLine interprets one complete SSE line (without its terminator).
func (d *StreamDecoder) processLine(line []byte, now time.Time) {
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
func (d *StreamDecoder) dispatch(now time.Time) {
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
	typ          []byte
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

// blockDeltaFields are the members of a content_block_delta's delta that the decoder uses, raw.
type blockDeltaFields struct {
	typ, text, partial []byte
	partialLen         int // decoded length of partial
}

// Nearly every event of a stream is a content_block_delta, and the Messages API always sends
// them in one of two shapes, byte for byte; blockDeltaShape recognises them, so that most
// events skip the general decoder.
const (
	blockDeltaHead      = `{"type":"content_block_delta","index":`
	deltaTypeAt         = len(`,"delta":{"type":"`)
	textDeltaMid        = `,"delta":{"type":"text_delta","text":`
	inputJSONDeltaMid   = `,"delta":{"type":"input_json_delta","partial_json":`
	maxShapeIndexDigits = 9 // an index jsonReader.integer reads the same
)

// blockDeltaShape returns the index and delta of a content_block_delta event's data that is
// exactly
//
//	{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}
//	{"type":"content_block_delta","index":N,"delta":{"type":"input_json_delta","partial_json":"…"}}
//
// (white space allowed only at its end), as handleEvent's general decoder would read them. ok is
// false for anything else, which the general decoder then handles (and reports, if it is not
// valid).
func blockDeltaShape(data []byte) (index int, f blockDeltaFields, ok bool) {
	if !bytes.HasPrefix(data, []byte(blockDeltaHead)) {
		return 0, f, false
	}
	index, f, n, ok := blockDeltaShapeRest(data, len(blockDeltaHead))
	if !ok {
		return 0, blockDeltaFields{}, false
	}
	r := jsonReader{b: data, i: n, quiet: true}
	if r.end() != nil {
		return 0, blockDeltaFields{}, false
	}
	return index, f, true
}

// blockDeltaShapeRest reads the rest of blockDeltaShape's object from p[i:], which follows its
// blockDeltaHead, and also returns where the object ends, whatever follows it.
func blockDeltaShapeRest(p []byte, i int) (index int, f blockDeltaFields, end int, ok bool) {
	start := i
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		index = index*10 + int(p[i]-'0')
		i++
	}
	switch digits := i - start; {
	case digits == 0 || digits > maxShapeIndexDigits:
		return 0, f, 0, false
	case digits > 1 && p[start] == '0': // not JSON
		return 0, f, 0, false
	}
	rest := p[i:]
	var member int
	switch {
	case bytes.HasPrefix(rest, []byte(textDeltaMid)):
		member = len(textDeltaMid)
		f.typ = rest[deltaTypeAt : deltaTypeAt+len("text_delta")]
	case bytes.HasPrefix(rest, []byte(inputJSONDeltaMid)):
		member = len(inputJSONDeltaMid)
		f.typ = rest[deltaTypeAt : deltaTypeAt+len("input_json_delta")]
	default:
		return 0, f, 0, false
	}
	var r jsonReader // not a composite literal: the compiler would build it once and copy it
	r.b, r.i, r.quiet = p, i+member, true
	if r.i >= len(p) || p[r.i] != '"' {
		return 0, blockDeltaFields{}, 0, false
	}
	s := r.rawString()
	if r.err != nil || r.i+2 > len(p) || p[r.i] != '}' || p[r.i+1] != '}' {
		return 0, blockDeltaFields{}, 0, false
	}
	if member == len(textDeltaMid) {
		f.text = s
	} else {
		f.partial, f.partialLen = s, r.strLen
	}
	return index, f, r.i + 2, true
}

// readBlockDelta reads a content_block_delta's delta object from r.
func readBlockDelta(r *jsonReader) blockDeltaFields {
	var f blockDeltaFields
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			f.typ, _ = r.str()
		case "text":
			f.text, _ = r.str()
		case "partial_json":
			f.partial, f.partialLen, _ = r.strN()
		default:
			r.skip()
		}
	})
	return f
}

func (d *StreamDecoder) handleEvent(name, data []byte, now time.Time) error {
	if !d.slow {
		if index, f, ok := blockDeltaShape(data); ok {
			d.handleBlockDelta(index, f, now)
			return nil
		}
	}
	var ev sseEvent
	r := jsonReader{b: data}
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			ev.typ, _ = r.str()
		case "index":
			ev.index = r.integer()
		case "message":
			ev.message = r.value()
		case "content_block":
			ev.contentBlock = r.value()
		case "delta":
			if string(name) != "content_block_delta" || r.peek() != '{' {
				ev.delta = r.value()
				break
			}
			start := r.i
			ev.blockDelta, ev.hasBlockDelta = readBlockDelta(&r), true
			ev.delta = r.b[start:r.i] // for an event whose type contradicts its name
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
	switch string(ev.typ) {
	case "message_start":
		d.msg.message(ev.message)
	case "content_block_start":
		d.blockStart(ev.index, ev.contentBlock)
	case "content_block_delta":
		if !ev.hasBlockDelta {
			sub := jsonReader{b: ev.delta}
			ev.blockDelta = readBlockDelta(&sub)
		}
		d.handleBlockDelta(ev.index, ev.blockDelta, now)
	case "content_block_stop":
		d.blockStop(ev.index, now)
	case "message_delta":
		d.msg.delta(ev.delta)
		d.msg.usage(ev.usage)
	case "message_stop":
		d.stopped = true
	case "error":
		d.errType, d.errMessage = decodeError(ev.err)
	}
	return nil
}

func (d *StreamDecoder) blockStart(index int, raw []byte) {
	blk := d.msg.block(raw)
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
	d.open[index] = ob
}

// handleBlockDelta handles a content_block_delta event.
func (d *StreamDecoder) handleBlockDelta(index int, f blockDeltaFields, now time.Time) {
	if d.firstChunk.IsZero() {
		d.firstChunk = now
	}
	d.blockDelta(index, f)
}

func (d *StreamDecoder) blockDelta(index int, f blockDeltaFields) {
	partial, partialLen := f.partial, f.partialLen
	switch string(f.typ) {
	case "text_delta":
		d.msg.appendText(f.text)
	case "input_json_delta":
		ob := d.open[index]
		if ob == nil || ob.tool < 0 {
			return
		}
		tu := &d.msg.tools[ob.tool]
		tu.InputBytes += partialLen
		keep := PreviewLimit + 8
		if ob.agent {
			keep = maxToolInput
		}
		switch room := keep - len(ob.input); {
		case room <= 0:
			ob.truncated = true
		default:
			before := len(ob.input)
			ob.input = appendUnquoted(ob.input, partial, room)
			if len(ob.input) > keep || len(ob.input)-before < partialLen {
				ob.truncated = true
			}
		}
	}
}

func (d *StreamDecoder) blockStop(index int, now time.Time) {
	ob := d.open[index]
	if ob == nil {
		return
	}
	delete(d.open, index)
	if ob.tool < 0 {
		return
	}
	d.finishTool(ob, now)
}

// finishTool completes a tool call from its accumulated input. end is zero for a call whose
// content_block_stop never came.
func (d *StreamDecoder) finishTool(ob *openBlock, end time.Time) {
	tu := &d.msg.tools[ob.tool]
	tu.End = end
	input := ob.input
	if input == nil {
		input = ob.startInput
		tu.InputBytes = len(input)
	}
	tu.Input = truncate(string(input), PreviewLimit)
	if ob.agent && !ob.truncated && !end.IsZero() {
		tu.Agent = decodeAgentCall(input)
	}
}

// Finish fills resp.Message, FirstChunk, ErrorType, ErrorMessage, Incomplete and ParseError from
// what was seen. Content blocks still open (the stream was cut) keep a zero End.
func (d *StreamDecoder) Finish(resp *Response) {
	for index, ob := range d.open {
		if ob.tool >= 0 {
			d.finishTool(ob, time.Time{})
		}
		delete(d.open, index)
	}
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

// messageBuilder assembles a MessageInfo from a JSON message or from stream events.
type messageBuilder struct {
	// complete is true for a JSON message, whose tool inputs are final as given; a stream's
	// arrive in later deltas.
	complete bool
	seen     bool
	info     MessageInfo
	tools    []ToolUse
	text     []byte
}

func (b *messageBuilder) start() {
	if !b.seen {
		b.seen = true
		b.info.Blocks = make(map[BlockType]int, 4)
	}
}

// message reads a message object (message_start's, or a whole JSON response).
func (b *messageBuilder) message(raw []byte) {
	b.start()
	r := jsonReader{b: raw}
	r.object(func(key []byte) {
		switch string(key) {
		case "id":
			b.info.ID = r.text()
		case "model":
			b.info.Model = r.text()
		case "stop_reason":
			if s := r.text(); s != "" {
				b.info.StopReason = s
			}
		case "usage":
			b.usage(r.value())
		case "content":
			r.array(func() { b.block(r.value()) })
		default:
			r.skip()
		}
	})
}

// delta reads message_delta's delta object.
func (b *messageBuilder) delta(raw []byte) {
	b.start()
	r := jsonReader{b: raw}
	r.object(func(key []byte) {
		if string(key) == "stop_reason" {
			if s := r.text(); s != "" {
				b.info.StopReason = s
			}
			return
		}
		r.skip()
	})
}

// usage applies a usage object. Fields it lacks (or has as null) keep their earlier values,
// since message_delta may repeat only some of message_start's counts.
func (b *messageBuilder) usage(raw []byte) {
	u := &b.info.Usage
	r := jsonReader{b: raw}
	set := func(dst *int) {
		if r.peek() == '-' || r.peek() >= '0' && r.peek() <= '9' {
			*dst = r.integer()
			return
		}
		r.skip()
	}
	r.object(func(key []byte) {
		switch string(key) {
		case "input_tokens":
			set(&u.InputTokens)
		case "output_tokens":
			set(&u.OutputTokens)
		case "cache_read_input_tokens":
			set(&u.CacheReadInputTokens)
		case "cache_creation_input_tokens":
			set(&u.CacheCreationInputTokens)
		case "cache_creation":
			r.object(func(key []byte) {
				switch string(key) {
				case "ephemeral_5m_input_tokens":
					set(&u.CacheCreation5m)
				case "ephemeral_1h_input_tokens":
					set(&u.CacheCreation1h)
				default:
					r.skip()
				}
			})
		default:
			r.skip()
		}
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
func (b *messageBuilder) block(raw []byte) responseBlock {
	b.start()
	var typ, text, id, name, input []byte
	r := jsonReader{b: raw}
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			typ, _ = r.str()
		case "text":
			text, _ = r.str()
		case "id":
			id, _ = r.str()
		case "name":
			name, _ = r.str()
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
			tu.Agent = decodeAgentCall(input)
		}
		b.tools = append(b.tools, tu)
		return responseBlock{tool: len(b.tools) - 1, input: input, agent: agent}
	}
	return responseBlock{tool: -1}
}

func (b *messageBuilder) appendText(raw []byte) {
	if room := PreviewLimit + utf8Max - len(b.text); room > 0 && len(raw) > 0 {
		b.text = appendUnquoted(b.text, raw, room)
	}
}

// utf8Max leaves room to finish a rune before the preview is cut.
const utf8Max = 4

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
func decodeAgentCall(input []byte) *AgentCall {
	var call AgentCall
	r := jsonReader{b: input}
	ok := r.object(func(key []byte) {
		switch string(key) {
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
func decodeError(raw []byte) (typ, message string) {
	r := jsonReader{b: raw}
	r.object(func(key []byte) {
		switch string(key) {
		case "type":
			typ = r.text()
		case "message":
			message = truncate(r.text(), PreviewLimit)
		default:
			r.skip()
		}
	})
	return typ, message
}

// DecodeResponse decodes a complete non-streamed (or content-encoded) response body, per
// resp.ContentType, resp.ContentEncoding and the endpoint: a JSON message, a count_tokens
// answer, a JSON error, or an event stream decoded at once (all events at resp.End). Failures
// are reported in resp.ParseError; it never panics on bad input.
func DecodeResponse(resp *Response, endpoint Endpoint, body []byte) {
	b, err := Decompress(resp.ContentEncoding, body)
	if err != nil {
		resp.ParseError = fmt.Sprintf("decoding response body: %v", err)
		return
	}
	if isEventStream(resp.ContentType) {
		resp.Streamed = true
		d := NewStreamDecoder()
		d.Write(b, resp.End)
		d.Finish(resp)
		return
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	var (
		typ, errRaw      []byte
		inputTokens      int
		hasInputTokens   bool
		looksLikeMessage bool
	)
	r := jsonReader{b: b}
	isObject := r.object(func(key []byte) {
		switch string(key) {
		case "type":
			typ, _ = r.str()
		case "error":
			errRaw = r.value()
		case "input_tokens":
			inputTokens, hasInputTokens = r.integer(), true
		case "content":
			looksLikeMessage = true
			r.skip()
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
		resp.ErrorType, resp.ErrorMessage = decodeError(errRaw)
	case endpoint == EndpointCountTokens && hasInputTokens:
		resp.InputTokens = inputTokens
	case string(typ) == "message" || looksLikeMessage:
		mb := messageBuilder{complete: true}
		mb.message(b)
		for i := range mb.tools {
			mb.tools[i].End = resp.End
		}
		resp.Message = mb.result()
	}
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream")
}
