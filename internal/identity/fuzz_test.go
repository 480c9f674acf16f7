package identity

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCleanValue checks that whatever a client puts in an identity header comes out a bounded,
// printable, valid label value, and that cleaning is idempotent.
func FuzzCleanValue(f *testing.F) {
	for _, s := range []string{"alice", " bob\r\n", "a\x00b", "\xff\xfe", strings.Repeat("é", 100), "zoë\u200b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := CleanValue(in)
		if len(out) > MaxValueBytes || !utf8.ValidString(out) || out != strings.TrimSpace(out) {
			t.Fatalf("CleanValue(%q) = %q", in, out)
		}
		for _, r := range out {
			if !unicode.IsPrint(r) {
				t.Fatalf("CleanValue(%q) keeps %U", in, r)
			}
		}
		if again := CleanValue(out); again != out {
			t.Fatalf("CleanValue is not idempotent: %q then %q", out, again)
		}
	})
}

// FuzzParseDirectory checks that no file makes the parser panic, and that an error names the
// file.
func FuzzParseDirectory(f *testing.F) {
	f.Add("people:\n  - name: alice\n    team: platform\n    identities: [alice, key-0123456789abcdef]\n")
	f.Add("people: [")
	f.Add("people:\n  - {name: a, identities: [x]}\n  - {name: b, identities: [x]}\n")
	f.Fuzz(func(t *testing.T, text string) {
		d, err := ParseDirectory("d.yaml", []byte(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "d.yaml:") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, p := range d.byIdentity {
			if p.Name == "" || CleanValue(p.Name) != p.Name {
				t.Fatalf("person %q accepted", p.Name)
			}
		}
	})
}
