package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// rawStringSlow is rawString one byte at a time, the way it was before it learned to read eight
// and 64 bytes at a time: the reference the fast paths are checked against. Both read \u
// escapes with uEscape, which checkUnquote compares with encoding/json.
func (r *jsonReader) rawStringSlow() []byte {
	b := r.b
	i := r.i + 1
	start := i
	saved := 0
	for {
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
		case c < 0x20:
			r.i = i
			r.fail("in string literal")
			return nil
		case c != '\\':
			i++
		case i+1 >= len(b):
			r.i = i + 1
			r.fail("in string escape code")
			return nil
		default:
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
		}
	}
}

// checkRawString reads the string at the start of b with rawString and with rawStringSlow and
// fails unless both agree on the bytes, the decoded length, where they stop and the error.
func checkRawString(t *testing.T, b []byte) {
	t.Helper()
	fast, slow := jsonReader{b: b}, jsonReader{b: b}
	got, want := fast.rawString(), slow.rawStringSlow()
	errText := func(r jsonReader) string {
		if r.err == nil {
			return ""
		}
		return r.err.Error()
	}
	if !bytes.Equal(got, want) || fast.i != slow.i || errText(fast) != errText(slow) ||
		slow.err == nil && fast.strLen != slow.strLen {
		t.Fatalf("rawString(%q):\n got %q, next %d, length %d, err %v\nwant %q, next %d, length %d, err %v",
			b, got, fast.i, fast.strLen, fast.err, want, slow.i, slow.strLen, slow.err)
	}
}

// TestStrMasks checks the assembly that classifies 64 bytes against strMasksGo, on every byte
// value at every position and on blocks drawn from the bytes it looks for.
func TestStrMasks(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		q, s, c, e := strMasks(b)
		wq, ws, wc, we := strMasksGo(b)
		if q != wq || s != ws || c != wc || e != we {
			t.Fatalf("strMasks(%q) = %#x %#x %#x %#x, want %#x %#x %#x %#x", b, q, s, c, e, wq, ws, wc, we)
		}
	}
	for v := range 256 {
		for k := range 64 {
			b := bytes.Repeat([]byte{'a'}, 64)
			b[k] = byte(v)
			check(b)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\"\\/bfnrtu\x00\x1f\x20a\x7f\x80\xff")
	for range 10000 {
		b := make([]byte, 64)
		for k := range b {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		check(b)
	}
}

// TestRawStringLong puts escapes, runs of backslashes, \u escapes, errors and the closing quote
// at every offset of strings long enough for the 64-byte blocks, including across the edges of
// blocks and of the buffer.
func TestRawStringLong(t *testing.T) {
	features := []string{
		`"`, `\"`, `\\"`, `\\\"`, `\\\\"`, `\\\\\"`, `\n\t\"x\\`, `\/\b\f\r`,
		`\u00e9`, `\ud83d\ude00`, `\ud83d`, `\u12`, `\x`, `\`, "\x00", "\x1f", "\n", "\xff\xfe",
	}
	for _, n := range []int{31, 32, 33, 63, 64, 65, 95, 96, 97, 128, 129, 150, 200} {
		for k := range n {
			for _, f := range features {
				for _, closed := range []bool{true, false} {
					b := append([]byte{'"'}, bytes.Repeat([]byte{'a'}, k)...)
					b = append(b, f...)
					b = append(b, bytes.Repeat([]byte{'b'}, max(0, n-k-len(f)))...)
					if closed {
						b = append(b, '"', ',', ' ')
					}
					checkRawString(t, b)
				}
			}
		}
	}
}

// TestRawStringRandom checks long strings drawn from the bytes rawString treats specially.
func TestRawStringRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("\\\\\\\\nnu00e9aaaaaaaaaaaaaaaaaaaa\"\x01/bt")
	for range 20000 {
		b := make([]byte, 1+rng.IntN(400))
		b[0] = '"'
		for k := 1; k < len(b); k++ {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		checkRawString(t, b)
	}
}

func FuzzRawString(f *testing.F) {
	f.Add([]byte(`"` + string(bytes.Repeat([]byte(`if x != \"POST\" {\n\t\treturn\n\t}\\`), 8)) + `"`))
	f.Add([]byte(`"` + string(bytes.Repeat([]byte{'a'}, 70)) + `\u00e9\\\"` + string(bytes.Repeat([]byte{'b'}, 70)) + `"`))
	f.Add([]byte(`"` + string(bytes.Repeat([]byte{'\\'}, 129)) + `"` + string(bytes.Repeat([]byte{'c'}, 64))))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			b = append([]byte{'"'}, b...)
		}
		checkRawString(t, b)
	})
}
