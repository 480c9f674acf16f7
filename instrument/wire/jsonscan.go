package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader walks one JSON document in place without building values: strings are returned as
// their raw (still escaped) bytes and only decoded when a caller needs the text. Request bodies
// are mostly long content strings the tracker never reads, so skipping them at memory speed is
// what makes decoding a 1 MB body cheap. Every value it passes over is validated, so a body that
// is not JSON is reported as such.
//
// After the first error every method is a no-op returning zero values; check err at the end.
type jsonReader struct {
	b     []byte
	i     int
	depth int
	err   error
	// strLen is the decoded length of the last string rawString read.
	strLen int
	// quiet readers fail with errNotShape rather than a message: those that only check whether
	// input has a shape, and take another way when it does not, often on input cut short.
	quiet bool
}

// maxJSONDepth bounds nesting, as encoding/json does, so hostile input cannot exhaust the stack.
const maxJSONDepth = 10000

// errJSONDepth is reported when a document nests deeper than maxJSONDepth.
var errJSONDepth = errors.New("exceeded max depth")

// errNotShape is the error of a quiet reader.
var errNotShape = errors.New("not the expected shape")

func (r *jsonReader) fail(what string) {
	if r.err != nil {
		return
	}
	if r.quiet {
		r.err = errNotShape
		return
	}
	if r.i >= len(r.b) {
		r.err = fmt.Errorf("unexpected end of JSON input (%s)", what)
		return
	}
	r.err = fmt.Errorf("invalid character %q at offset %d (%s)", r.b[r.i], r.i, what)
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the end or after an error.
func (r *jsonReader) peek() byte {
	if r.err != nil {
		return 0
	}
	r.ws()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// end checks that nothing but white space follows the document.
func (r *jsonReader) end() error {
	if r.err != nil {
		return r.err
	}
	r.ws()
	if r.i != len(r.b) {
		r.fail("after top-level value")
	}
	return r.err
}

// object iterates over an object's members, calling fn with each raw key; fn must consume the
// member's value exactly once (read it or skip it). A value that is not an object is skipped and
// object returns false.
func (r *jsonReader) object(fn func(key []byte)) bool {
	if r.peek() != '{' {
		r.skip()
		return false
	}
	if r.depth++; r.depth > maxJSONDepth {
		r.err = errJSONDepth
		return false
	}
	r.i++
	if r.peek() == '}' {
		r.i++
		r.depth--
		return true
	}
	return r.members(fn)
}

// members reads an object's members from the next key on, through its closing brace.
func (r *jsonReader) members(fn func(key []byte)) bool {
	return r.member(fn) && r.objectRest(fn)
}

// objectRest resumes an object right after one of its members' values: it reads the members
// that follow, through the closing brace.
func (r *jsonReader) objectRest(fn func(key []byte)) bool {
	for r.err == nil {
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return true
		default:
			r.fail("after object value")
			return false
		}
		if !r.member(fn) {
			return false
		}
	}
	return false
}

// member reads one member's key and hands it to fn, which consumes the value.
func (r *jsonReader) member(fn func(key []byte)) bool {
	if r.peek() != '"' {
		r.fail("looking for object key")
		return false
	}
	key := r.rawString()
	if r.peek() != ':' {
		r.fail("after object key")
		return false
	}
	r.i++
	fn(key)
	return true
}

// array iterates over an array's elements; fn must consume each element exactly once. A value
// that is not an array is skipped and array returns false.
func (r *jsonReader) array(fn func()) bool {
	if r.peek() != '[' {
		r.skip()
		return false
	}
	if r.depth++; r.depth > maxJSONDepth {
		r.err = errJSONDepth
		return false
	}
	r.i++
	if r.peek() == ']' {
		r.i++
		r.depth--
		return true
	}
	return r.elements(fn)
}

// elements reads an array's elements from the next one on, through its closing bracket.
func (r *jsonReader) elements(fn func()) bool {
	for r.err == nil {
		fn()
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return true
		default:
			r.fail("after array element")
		}
	}
	return false
}

// str reads a string value and returns its raw bytes between the quotes (still escaped). Any
// other value is skipped and str returns nil, false.
func (r *jsonReader) str() ([]byte, bool) {
	if r.peek() != '"' {
		r.skip()
		return nil, false
	}
	s := r.rawString()
	return s, r.err == nil
}

// strN reads a string value and returns its raw bytes and decoded length. Any other value is
// skipped and gives nil, 0, false.
func (r *jsonReader) strN() ([]byte, int, bool) {
	raw, ok := r.str()
	if !ok {
		return nil, 0, false
	}
	return raw, r.strLen, true
}

// text reads a string value and decodes it; any other value gives "".
func (r *jsonReader) text() string {
	raw, ok := r.str()
	if !ok {
		return ""
	}
	return unquote(raw)
}

// boolean reads true or false; any other value is skipped and gives false.
func (r *jsonReader) boolean() bool {
	switch r.peek() {
	case 't':
		r.literal("true")
		return r.err == nil
	default:
		r.skip()
		return false
	}
}

// integer reads a number and returns it when it is an integer that fits an int; anything else
// is skipped and gives 0.
func (r *jsonReader) integer() int {
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		r.skip()
		return 0
	}
	start := r.i
	r.number()
	n, err := strconv.Atoi(string(r.b[start:r.i]))
	if err != nil {
		return 0
	}
	return n
}

// value skips any value and returns its raw bytes.
func (r *jsonReader) value() []byte {
	r.peek()
	start := r.i
	r.skip()
	if r.err != nil {
		return nil
	}
	return r.b[start:r.i]
}

// skip passes over any value, validating it.
func (r *jsonReader) skip() {
	switch r.peek() {
	case '"':
		r.rawString()
	case '{':
		r.object(func([]byte) { r.skip() })
	case '[':
		r.array(r.skip)
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		r.number()
	default:
		r.fail("looking for beginning of value")
	}
}

func (r *jsonReader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail("in literal " + lit)
		return
	}
	r.i += len(lit)
}

func (r *jsonReader) number() {
	b, i := r.b, r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		r.i = i
		r.fail("in number")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			r.fail("after decimal point in number")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			r.fail("in exponent of number")
			return
		}
	}
	r.i = i
}

// strPlain marks the bytes that need no attention inside a string: everything but the quote,
// the backslash and control characters.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// rawString consumes a string starting at its opening quote and returns the bytes between the
// quotes. It also leaves the string's decoded length in r.strLen, so that sizes of content never
// decoded cost nothing extra (invalid UTF-8 counts as its raw bytes).
//
// Content strings are long and, when they hold source code, have an escape every ten bytes or
// so; this function is the largest part of decoding a request body. It reads eight bytes at a
// time through a string's first 32 bytes (keys and short values end there), then 64 at a time
// with strMasks, and takes anything unusual (\u escapes, errors) one byte at a time.
func (r *jsonReader) rawString() []byte {
	b := r.b
	i := r.i + 1
	start := i
	saved := 0 // bytes escapes take beyond what they decode to
	for {
		lim := len(b)
		if strBlocks {
			lim = min(i+32, len(b))
		}
		for {
			// Eight bytes at a time while none is a quote, a backslash or a control
			// character (SWAR: each test sets the high bit of a byte that matches).
			for i+8 <= lim {
				m := strStops(binary.LittleEndian.Uint64(b[i:]))
				if m == 0 {
					i += 8
					continue
				}
				// Straight to the first byte that matches: the tests can mark bytes above a
				// match that do not, never bytes below it.
				i += bits.TrailingZeros64(m) >> 3
				// Two-byte escapes (\n, \", \t) are taken here, without leaving the loop.
				if b[i] != '\\' || i+1 >= len(b) || !strEscape2[b[i+1]] {
					goto stop
				}
				i += 2
				saved++
			}
			if lim == len(b) {
				break
			}
			var end int
			if i, saved, end = strBlocksFrom(b, i, saved); end >= 0 {
				r.i = end + 1
				r.strLen = end - start - saved
				return b[start:end]
			}
			lim = len(b)
		}
	stop:
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			r.i = i
			r.fail("in string literal")
			return nil
		}
		switch c := b[i]; {
		case c == '"':
			r.i = i + 1
			r.strLen = i - start - saved
			return b[start:i]
		case c == '\\':
			if i+1 >= len(b) {
				r.i = i + 1
				r.fail("in string escape code")
				return nil
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
				saved++
			case 'u':
				n, more, ok := uEscape(b, i)
				if !ok {
					r.i = i + 2
					r.fail("in \\u hexadecimal character escape")
					return nil
				}
				i += n
				saved += more
			default:
				r.i = i + 1
				r.fail("in string escape code")
				return nil
			}
		default:
			r.i = i
			r.fail("in string literal")
			return nil
		}
	}
}

// uEscape reads the \u escape at b[i] (b[i+1] is 'u'): n is its length, 6 or 12 for a surrogate
// pair, and saved the bytes it takes beyond the UTF-8 it decodes to (a lone surrogate decodes
// to U+FFFD); ok is false when four hex digits do not follow.
func uEscape(b []byte, i int) (n, saved int, ok bool) {
	if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
		return 0, 0, false
	}
	ru := hex4(b[i+2:])
	n = 6
	if utf16.IsSurrogate(ru) {
		ru = utf8.RuneError
		if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' && isHex4(b[i+8:i+12]) {
			if dec := utf16.DecodeRune(hex4(b[i+2:]), hex4(b[i+8:])); dec != utf8.RuneError {
				ru, n = dec, 12
			}
		}
	}
	return n, n - utf8.RuneLen(ru), true
}

// oddBits has the bits of odd positions set.
const oddBits = 0xaaaaaaaaaaaaaaaa

// strBlocksFrom goes on with a string in b from offset i, 64 bytes at a time, while b holds 64
// more bytes and each block has only plain bytes and two-byte escapes; saved is as rawString
// keeps it. If a block holds the closing quote with nothing unusual before it, end is the
// quote's offset; otherwise end is -1 and i is where rawString goes on a word at a time, never
// in the middle of an escape.
//
// Which backslashes start an escape is worked out for the whole block at once, with the
// subtraction trick from simdjson (Langdale and Lemire, "Parsing gigabytes of JSON per
// second"): a run of backslashes escapes the byte after it when the run is odd.
func strBlocksFrom(b []byte, i, saved int) (next, savedNext, end int) {
	carry := uint64(0) // 1 when the block's first byte is escaped by the last one before it
	for i+64 <= len(b) {
		quote, backslash, control, escapable := strMasks(b[i:])
		starts := backslash &^ carry // backslashes not themselves escaped
		code := ((starts<<1 | oddBits) - starts) ^ oddBits
		escaped := code ^ (backslash | carry) // bytes an escape applies to
		escape := code & backslash            // backslashes that start one
		closing := quote &^ escaped
		if odd := control | escaped&^escapable; closing|odd != 0 {
			before := closing&-closing - 1 // every bit when closing is 0
			if odd&before != 0 {
				break
			}
			saved += bits.OnesCount64(escape & before)
			return i, saved, i + bits.TrailingZeros64(closing)
		}
		saved += bits.OnesCount64(escape)
		carry = escape >> 63
		i += 64
	}
	if carry != 0 {
		// Back to the backslash, so that rawString reads the escape whole.
		i--
		saved--
	}
	return i, saved, -1
}

// strStops sets the high bit of each byte of x that is a quote, a backslash or a control
// character, and maybe of bytes above one that is.
func strStops(x uint64) uint64 {
	return hasZeroByte(x^(swarOnes*'"')) | hasZeroByte(x^(swarOnes*'\\')) | hasByteLess(x, 0x20)
}

// strEscape2 marks the bytes that follow a backslash in a two-byte escape.
var strEscape2 = func() (t [256]bool) {
	for _, c := range `"\\/bfnrt` {
		t[c] = true
	}
	return t
}()

// strMasksGo is strMasks in Go, for platforms without its assembly and to test it.
func strMasksGo(b []byte) (quote, backslash, control, escapable uint64) {
	for i, c := range b[:64] {
		bit := uint64(1) << i
		switch {
		case c == '"':
			quote |= bit
		case c == '\\':
			backslash |= bit
		case c < 0x20:
			control |= bit
		}
		if strEscape2[c] {
			escapable |= bit
		}
	}
	return
}

// SWAR helpers: swarOnes*c repeats byte c eight times.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// hasZeroByte is non-zero when some byte of x is zero.
func hasZeroByte(x uint64) uint64 { return (x - swarOnes) & ^x & swarHigh }

// hasByteLess is non-zero when some byte of x is less than n (n <= 128).
func hasByteLess(x uint64, n uint64) uint64 { return (x - swarOnes*n) & ^x & swarHigh }

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote decodes the raw bytes of a validated JSON string, the way encoding/json does (invalid
// UTF-8 and lone surrogates become U+FFFD).
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)), raw, math.MaxInt))
}

// unquotePrefix decodes the start of a raw JSON string, at most limit bytes of text, cut at a
// rune boundary. Only the start of raw is read, however long the string is.
func unquotePrefix(raw []byte, limit int) string {
	out := appendUnquoted(make([]byte, 0, min(len(raw), limit)+utf8.UTFMax), raw, limit)
	return truncate(string(out), limit)
}

// appendUnquoted decodes raw onto dst and stops once it appended at least limit bytes.
func appendUnquoted(dst, raw []byte, limit int) []byte {
	base := len(dst)
	for i := 0; i < len(raw) && len(dst)-base < limit; {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			i += 2
			switch raw[i-1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if i+4 > len(raw) {
					return dst
				}
				ru := hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(ru) {
					ru2 := utf8.RuneError
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' && isHex4(raw[i+2:]) {
						ru2 = hex4(raw[i+2:])
					}
					if dec := utf16.DecodeRune(ru, ru2); dec != utf8.RuneError {
						i += 6
						ru = dec
					} else {
						ru = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, ru)
			default:
				dst = append(dst, raw[i-1])
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			ru, size := utf8.DecodeRune(raw[i:])
			if ru == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
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
