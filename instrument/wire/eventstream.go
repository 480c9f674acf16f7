package wire

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Bedrock answers a streamed Messages call (invoke-with-response-stream) in AWS event-stream
// framing rather than SSE: binary frames, each a prelude with its total length, headers, a
// payload and CRCs. A `chunk` event's payload is {"bytes": base64 of one Anthropic stream event
// JSON}; an exception frame says why the stream failed. The frames are decoded with the AWS
// SDK's decoder, from a copy of the bytes already forwarded: nothing is re-encoded.

// awsEventStream is the Content-Type of a Bedrock event stream.
const awsEventStream = "application/vnd.amazon.eventstream"

// IsAWSEventStream reports whether a Content-Type is Bedrock's event stream.
func IsAWSEventStream(contentType string) bool {
	return strings.EqualFold(mediaType(contentType), awsEventStream)
}

// maxFrame bounds one event-stream frame the decoder holds; a longer one is skipped by its
// length. Bedrock's frames carry one stream event each, far smaller.
const maxFrame = maxSSELine + 64<<10

// minFrame is the length of a frame with no headers and no payload: prelude, its CRC and the
// message CRC.
const minFrame = 16

// awsFrames splits an event stream into frames across chunks.
type awsFrames struct {
	dec     *eventstream.Decoder
	pending []byte // the start of a frame split across chunks
	skip    int    // bytes still to skip of an overlong frame
	broken  bool   // a frame's length made no sense: framing is lost for the rest of the stream
	payload []byte // the decoder's payload buffer, reused from frame to frame
	event   []byte // a chunk's decoded Anthropic event
}

// newEventStreamDecoder returns a decoder for one Bedrock response body in AWS event-stream
// framing (application/vnd.amazon.eventstream). It is fed and finished as newStreamDecoder's
// is, and decodes the Anthropic events inside the frames the same way; frames may be split
// across chunks at any byte.
func newEventStreamDecoder() *streamDecoder {
	d := newStreamDecoder()
	d.frames = &awsFrames{dec: eventstream.NewDecoder()}
	return d
}

// writeFrames decodes every whole frame in what has arrived and keeps the start of the next.
func (d *streamDecoder) writeFrames(p []byte, now time.Time) {
	f := d.frames
	if f.broken {
		return
	}
	buf := p
	if len(f.pending) > 0 {
		f.pending = append(f.pending, p...)
		buf = f.pending
	}
	for len(buf) > 0 {
		if f.skip > 0 {
			n := min(f.skip, len(buf))
			f.skip -= n
			buf = buf[n:]
			continue
		}
		if len(buf) < 4 {
			break
		}
		total := int(binary.BigEndian.Uint32(buf))
		if total < minFrame {
			d.skip(fmt.Sprintf("event-stream frame of %d bytes", total))
			f.broken = true
			buf = nil
			break
		}
		if total > maxFrame {
			d.skip(fmt.Sprintf("event-stream frame longer than %d bytes", maxFrame))
			f.skip = total
			continue
		}
		if len(buf) < total {
			break
		}
		msg, err := f.dec.Decode(bytes.NewReader(buf[:total]), f.payload[:0])
		if err != nil {
			d.skip(fmt.Sprintf("decoding event-stream frame: %v", err))
		} else {
			if cap(msg.Payload) > cap(f.payload) && cap(msg.Payload) <= 64<<10 {
				f.payload = msg.Payload[:0]
			}
			d.handleFrame(msg, now)
		}
		buf = buf[total:]
	}
	// Keep what is left of a frame for the next chunk, in pending's own array.
	f.pending = append(f.pending[:0], buf...)
	if cap(f.pending) > 64<<10 && len(f.pending) == 0 {
		f.pending = nil // do not hold a large frame's buffer for the rest of the stream
	}
}

// handleFrame applies one event-stream message: a chunk carries an Anthropic stream event, an
// exception or error ends the stream with an error.
func (d *streamDecoder) handleFrame(msg eventstream.Message, now time.Time) {
	switch headerString(msg.Headers, ":message-type") {
	case "event":
		if headerString(msg.Headers, ":event-type") != "chunk" {
			return
		}
		event, err := d.chunkEvent(msg.Payload)
		if err != nil {
			d.skip(err.Error())
			return
		}
		if err := d.handleEvent(nil, event, now); err != nil {
			d.skip(err.Error())
		}
		if f := d.frames; cap(f.event) > maxScratchBuf {
			f.event = nil // do not hold a large event's buffer for the rest of the stream
		}
	case "exception":
		d.errType = cmp.Or(headerString(msg.Headers, ":exception-type"), "exception")
		_, d.errMessage = decodeError(&d.t, msg.Payload)
	case "error":
		d.errType = headerString(msg.Headers, ":error-code")
		d.errMessage = truncate(headerString(msg.Headers, ":error-message"), PreviewLimit)
	}
}

// chunkEvent decodes a chunk's payload, {"bytes": "<base64>"}, into the Anthropic event it
// carries.
func (d *streamDecoder) chunkEvent(payload []byte) ([]byte, error) {
	f := d.frames
	var raw []byte
	r := &d.t
	r.reset(payload)
	r.member("bytes", func() { raw = r.str() })
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("decoding chunk payload: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("decoding chunk payload: no bytes")
	}
	raw = decoded(raw, &d.buf)
	n := base64.StdEncoding.DecodedLen(len(raw))
	if cap(f.event) < n {
		f.event = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(f.event[:n], raw)
	if err != nil {
		return nil, fmt.Errorf("decoding chunk bytes: %w", err)
	}
	if cap(d.buf) > maxScratchBuf {
		d.buf = nil
	}
	return f.event[:n], nil
}

// headerString returns a string-valued header of an event-stream message, "" when absent.
func headerString(hs eventstream.Headers, name string) string {
	v := hs.Get(name)
	if v == nil {
		return ""
	}
	if s, ok := v.(eventstream.StringValue); ok {
		return string(s)
	}
	return v.String()
}
