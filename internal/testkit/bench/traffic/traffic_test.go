package traffic

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestBody(t *testing.T) {
	rec, err := FindRecording()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		size        int
		minMessages int
		tools       bool
	}{
		{"10KB subagent-like", 10 << 10, 5, true},
		{"200KB session", 200 << 10, 100, true},
		{"1MB session", 1 << 20, 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := rec.Body(tc.size)
			if len(b) < tc.size || len(b) > tc.size+tc.size/10+4096 {
				t.Errorf("body is %d bytes, want about %d", len(b), tc.size)
			}
			if !bytes.Equal(b, rec.Body(tc.size)) {
				t.Error("two bodies of the same size differ")
			}
			var v struct {
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
				Tools  []json.RawMessage `json:"tools"`
				System []json.RawMessage `json:"system"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if len(v.Messages) < tc.minMessages {
				t.Errorf("%d messages, want at least %d", len(v.Messages), tc.minMessages)
			}
			if got := len(v.Tools) > 0; got != tc.tools {
				t.Errorf("tools present = %v, want %v", got, tc.tools)
			}
			if len(v.System) < 2 {
				t.Errorf("system has %d blocks, want the billing header and a prompt", len(v.System))
			}
			if last := v.Messages[len(v.Messages)-1].Role; last != "user" {
				t.Errorf("last message is %q, want user", last)
			}
		})
	}
}

func TestNewStream(t *testing.T) {
	for _, n := range []int{1, 7, 500} {
		s := NewStream(n)
		if want := max(n, 7); len(s.Events) != want || len(s.Ends) != want {
			t.Errorf("NewStream(%d): %d events, %d ends, want %d", n, len(s.Events), len(s.Ends), want)
		}
		if s.Ends[len(s.Ends)-1] != len(s.Bytes) {
			t.Errorf("NewStream(%d): last end %d, bytes %d", n, s.Ends[len(s.Ends)-1], len(s.Bytes))
		}
		for i, e := range s.Events {
			if !bytes.HasSuffix(e, []byte("\n\n")) || !bytes.HasPrefix(e, []byte("event: ")) {
				t.Fatalf("NewStream(%d): event %d is not an SSE event: %q", n, i, e)
			}
			var data map[string]any
			line := bytes.SplitN(e, []byte("\ndata: "), 2)[1]
			if err := json.Unmarshal(bytes.TrimSpace(line), &data); err != nil {
				t.Fatalf("NewStream(%d): event %d data is not JSON: %v", n, i, err)
			}
		}
	}
}

func TestStamp(t *testing.T) {
	rec, err := FindRecording()
	if err != nil {
		t.Fatal(err)
	}
	b := rec.Body(10 << 10)
	at := NonceOffset(b)
	if at < 0 {
		t.Fatal("body has no nonce")
	}
	Stamp(b, at, 42)
	if !bytes.Contains(b, []byte("fix what fails (request 0000000042).")) {
		t.Errorf("stamped body lacks the request number: %s", b[len(b)-300:])
	}
	if !json.Valid(b) {
		t.Error("stamped body is not JSON")
	}
	if NonceOffset([]byte(`{}`)) != -1 {
		t.Error("NonceOffset found a nonce in {}")
	}
}
