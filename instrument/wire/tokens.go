package wire

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeOptions make the decoder accept what encoding/json accepts: a repeated member name (the
// decoders here read every occurrence) and invalid UTF-8 in strings (decoded to U+FFFD, as
// encoding/json does). Both also spare the decoder work it would do to reject them.
var decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decoder is a jsontext.Decoder and the buffer it reads from, pooled together: a decoder keeps
// per-depth state that is worth reusing, and reading from a bytes.Buffer makes it parse the
// input in place, without copying it.
type decoder struct {
	dec *jsontext.Decoder
	in  bytes.Buffer
}

var decoderPool = sync.Pool{New: func() any { return &decoder{dec: jsontext.NewDecoder(noInput{}, decodeOptions...)} }}

// noInput is what a pooled decoder reads from, so that it keeps no input alive.
type noInput struct{}

func (noInput) Read([]byte) (int, error) { return 0, io.EOF }

// tokens walks one JSON document with a jsontext.Decoder, reading only what the caller asks for:
// values it passes over are validated by the decoder without being decoded, and strings are
// returned raw (quoted, still escaped) so that only the few texts kept are ever unquoted.
//
// After the first error every method is a no-op returning zero values; err holds that error.
// The zero value is ready for start or reset; release hands its decoder back.
type tokens struct {
	dd  *decoder
	src []byte // the bytes raw values are returned from
	// shift is the offset in src of the decoder's input offset 0: a BodyCache decodes a body
	// from one of its messages on, behind a prefix that stands for what came before.
	shift int
	err   error
}

// reset starts walking src from its start.
func (t *tokens) reset(src []byte) { t.start(src, src, 0) }

// start starts walking in, whose offset 0 is at offset shift of src: in holds src's bytes from
// some offset on, possibly behind a prefix of its own.
func (t *tokens) start(src, in []byte, shift int) {
	if t.dd == nil {
		t.dd = decoderPool.Get().(*decoder)
	}
	t.src, t.shift, t.err = src, shift, nil
	t.dd.in = *bytes.NewBuffer(in)
	t.dd.dec.Reset(&t.dd.in, decodeOptions...)
}

// release gives the decoder back to the pool, holding nothing of the input.
func (t *tokens) release() {
	if t.dd != nil {
		t.dd.dec.Reset(noInput{}, decodeOptions...)
		t.dd.in = bytes.Buffer{}
		decoderPool.Put(t.dd)
		t.dd = nil
	}
	t.src = nil
}

func (t *tokens) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// kind returns the kind of the next token without reading it; 0 after an error, which it
// records, the end of the input included.
func (t *tokens) kind() jsontext.Kind {
	if t.err != nil {
		return 0
	}
	k := t.dd.dec.PeekKind()
	if k == 0 {
		_, err := t.dd.dec.ReadToken()
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		t.fail(err)
	}
	return k
}

// token reads the next token, which the caller knows (a delimiter kind returned, or a name it
// has no use for).
func (t *tokens) token() {
	if t.err != nil {
		return
	}
	if _, err := t.dd.dec.ReadToken(); err != nil {
		t.fail(err)
	}
}

// offset returns the offset in src just after the last token or value read.
func (t *tokens) offset() int { return int(t.dd.dec.InputOffset()) + t.shift }

// value reads the next value whole and returns its bytes in src.
func (t *tokens) value() []byte {
	if t.err != nil {
		return nil
	}
	v, err := t.dd.dec.ReadValue()
	if err != nil {
		t.fail(err)
		return nil
	}
	end := t.offset()
	return t.src[end-len(v) : end]
}

// skip passes over the next value, validating it.
func (t *tokens) skip() { t.value() }

// str reads a string and returns it raw, quotes included; any other value is skipped and gives
// nil.
func (t *tokens) str() []byte {
	if v := t.value(); len(v) > 0 && v[0] == '"' {
		return v
	}
	return nil
}

// text reads a string and decodes it; any other value gives "".
func (t *tokens) text() string {
	if raw := t.str(); raw != nil {
		return unquote(raw)
	}
	return ""
}

// boolean reads a value and reports whether it is true.
func (t *tokens) boolean() bool {
	v := t.value()
	return len(v) > 0 && v[0] == 't'
}

// integer reads a number and returns it when it is an integer that fits an int; anything else
// gives 0.
func (t *tokens) integer() int {
	v := t.value()
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0
	}
	return n
}

// textBytes reads a string and returns its text, nil for any other value: for comparing with
// the names the decoders know, without making a string of it.
func (t *tokens) textBytes() []byte { return unquoteBytes(t.str()) }

// name reads a member name and returns it decoded.
func (t *tokens) name() []byte { return unquoteBytes(t.value()) }

// object reads an object, calling fn with each member's name; fn must consume the member's
// value (read it or skip it). Any other value is skipped and object returns false.
func (t *tokens) object(fn func(name []byte)) bool { return t.open('{') && t.members(fn) }

// open reads the opening delimiter k of a value, and reports whether it was one; any other value
// is skipped.
func (t *tokens) open(k jsontext.Kind) bool {
	if t.kind() != k {
		t.skip()
		return false
	}
	t.token()
	return true
}

// members reads the members of an object whose opening brace was read, through its closing
// brace, as object does.
func (t *tokens) members(fn func(name []byte)) bool {
	for {
		switch t.kind() {
		case '}':
			t.token()
			return t.err == nil
		case 0:
			return false
		}
		fn(t.name())
	}
}

// member reads an object, calling read for each member named want, which read must consume,
// and passing over the others; as object, it returns false for any other value.
func (t *tokens) member(want string, read func()) bool {
	return t.object(func(name []byte) {
		if string(name) == want {
			read()
			return
		}
		t.skip()
	})
}

// array reads an array, calling fn for each element, which fn must consume. Any other value is
// skipped and array returns false.
func (t *tokens) array(fn func()) bool { return t.open('[') && t.elements(fn) }

// elements reads the elements of an array whose opening bracket was read, through its closing
// bracket, as array does.
func (t *tokens) elements(fn func()) bool {
	for {
		switch t.kind() {
		case ']':
			t.token()
			return t.err == nil
		case 0:
			return false
		}
		fn()
	}
}

// end checks that nothing but white space follows the document, and returns the walk's error.
func (t *tokens) end() error {
	if t.err != nil {
		return t.err
	}
	if k := t.dd.dec.PeekKind(); k != 0 {
		// The decoder reads a stream of values; a document is one.
		t.fail(fmt.Errorf("unexpected %s after top-level value at offset %d", k, t.offset()))
		return t.err
	}
	if _, err := t.dd.dec.ReadToken(); err != io.EOF {
		t.fail(err)
	}
	return t.err
}

// unquote decodes a raw JSON string (quotes included) that the decoder validated, as
// encoding/json does: invalid UTF-8 and lone surrogates become U+FFFD.
func unquote(raw []byte) string {
	var buf []byte
	return string(decoded(raw, &buf))
}

// unquoteBytes decodes a raw JSON string (quotes included) that the decoder validated; one
// without escapes is returned in place, between its quotes.
func unquoteBytes(raw []byte) []byte {
	if len(raw) < 2 {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	b, _ := jsontext.AppendUnquote(nil, raw)
	return b
}

// unquotePrefix decodes the start of a raw JSON string, at most limit bytes of text, cut at a
// rune boundary. Only the start of raw is read, however long the string is.
func unquotePrefix(raw []byte, limit int) string {
	b := appendPrefix(make([]byte, 0, limit+utf8.UTFMax), raw, limit+utf8.UTFMax)
	return truncate(string(b), limit)
}

// appendPrefix appends to dst the start of the text of a raw JSON string, at most limit bytes
// (the last rune may be cut). Only the start of raw is decoded: a byte of text takes at most six
// bytes escaped (\u0041), so that many suffice for limit bytes, the rest of an escape cut at the
// end of them falling beyond.
func appendPrefix(dst, raw []byte, limit int) []byte {
	if n := 1 + 6*(limit+2*utf8.UTFMax); len(raw) > n {
		raw = raw[:n] // cut: AppendUnquote gives back what it decoded before the cut
	}
	before := len(dst)
	dst, _ = jsontext.AppendUnquote(dst, raw)
	if len(dst)-before > limit {
		dst = dst[:before+limit]
	}
	return dst
}

// decoded returns the text of a raw JSON string: in place, between its quotes, when it has
// neither escapes nor invalid UTF-8, and otherwise decoded into *buf (grown as needed).
func decoded(raw []byte, buf *[]byte) []byte {
	if len(raw) < 2 {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw[1 : len(raw)-1]
	}
	*buf, _ = jsontext.AppendUnquote((*buf)[:0], raw)
	return *buf
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
