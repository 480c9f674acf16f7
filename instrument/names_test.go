package instrument

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

func TestSpanNamesJoin(t *testing.T) {
	n := newSpanNames()
	long := strings.Repeat("m", maxCachedName+1)
	for range 2 { // the second round reads what the first stored
		for _, tc := range []struct{ prefix, value string }{
			{"chat ", "claude-opus-5-5"}, {"execute_tool ", "Bash"}, {"invoke_agent ", "claude-code"},
			{"chat ", "Bash"}, {"execute_tool ", "claude-opus-5-5"}, {"chat ", ""}, {"chat ", long},
			{"chat ", "claude-opus-5"}, {"chat ", "claude-opus-5-"},
		} {
			if got, want := n.join(tc.prefix, tc.value), tc.prefix+tc.value; got != want {
				t.Errorf("join(%q, %q) = %q, want %q", tc.prefix, tc.value, got, want)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { n.join("chat ", "claude-opus-5-5") }); a != 0 {
		t.Errorf("a repeated name allocates %v times, want 0", a)
	}
}

func TestAppendHashMatchesFmt(t *testing.T) {
	for _, h := range []uint64{0, 1, 0xf, 0xdeadbeef, 1 << 63, ^uint64(0), 0x0123456789abcdef} {
		if got, want := string(appendHash([]byte("fp-"), h)), fmt.Sprintf("fp-%016x", h); got != want {
			t.Errorf("appendHash(%#x) = %q, want %q", h, got, want)
		}
	}
}

// splitTraceparent is how parseTraceparent read a header before it stopped allocating: the
// reference it must agree with.
func splitTraceparent(h string) *LinkedSpan {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return nil
	}
	var l LinkedSpan
	if _, err := hex.Decode(l.TraceID[:], []byte(parts[1])); err != nil || !l.TraceID.IsValid() {
		return nil
	}
	if _, err := hex.Decode(l.SpanID[:], []byte(parts[2])); err != nil || !l.SpanID.IsValid() {
		return nil
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(parts[3])); err != nil {
		return nil
	}
	l.Sampled = flags[0]&1 == 1
	return &l
}

func TestParseTraceparentMatchesSplit(t *testing.T) {
	const trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, h := range []string{
		"", "-", "---", "----", "00-" + trace + "-" + span + "-01", " 00-" + trace + "-" + span + "-00\t",
		"-" + trace + "-" + span + "-01", "0000-" + trace + "-" + span + "-01", "00-" + trace + "-" + span + "-01-",
		"00-" + trace + "-" + span + "-1", "00-" + trace + "-" + span + "-zz", "00-" + trace + span + "-01",
		"00-" + trace + "--" + span + "-01", "00-" + strings.ToUpper(trace) + "-" + span + "-03",
		"00-" + strings.Repeat("0", 32) + "-" + span + "-01", "00-" + trace + "-" + strings.Repeat("0", 16) + "-01",
	} {
		got, want := parseTraceparent(h), splitTraceparent(h)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("parseTraceparent(%q) = %+v, want %+v", h, got, want)
		}
	}
}
