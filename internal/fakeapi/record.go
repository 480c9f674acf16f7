package fakeapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/cctrace/cctrace/instrument/wire"
)

// record is one exchange as written to the record directory.
type record struct {
	seq             int
	start, end      time.Time
	req             *Request
	query           string
	contentEncoding string
	rule            string
	status          int
	respHeader      http.Header
	response        []byte
	provider        wire.Provider
}

// write stores the exchange as dir/NNN.json, one top-level key per line. "body" is the request
// body itself when it is compact JSON (byte for byte what the client sent, after removing any
// content encoding); any other body is stored as the string "body_text". "provider" names the
// provider the fake played, when not the Anthropic API; a response that is not UTF-8 text
// (Bedrock's event stream) is stored base64-encoded as "response_base64".
func (r *record) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating record dir: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	field := func(key string, v any, last bool) error {
		var vb bytes.Buffer
		enc := json.NewEncoder(&vb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encoding %s: %w", key, err)
		}
		fmt.Fprintf(&b, "%q: %s", key, bytes.TrimRight(vb.Bytes(), "\n"))
		if !last {
			b.WriteString(",")
		}
		b.WriteString("\n")
		return nil
	}
	type kv struct {
		k string
		v any
	}
	fields := []kv{
		{"seq", r.seq},
		{"time", r.start.UTC().Format(time.RFC3339Nano)},
		{"end", r.end.UTC().Format(time.RFC3339Nano)},
		{"method", r.req.Method},
		{"path", r.req.Path},
		{"query", r.query},
	}
	if r.provider != wire.ProviderAnthropic {
		fields = append(fields, kv{"provider", r.provider.String()})
	}
	fields = append(fields,
		kv{"headers", stripSecrets(r.req.Header)},
		kv{"content_encoding", r.contentEncoding},
	)
	if isCompactJSON(r.req.Body) {
		fields = append(fields, kv{"body", json.RawMessage(r.req.Body)})
	} else {
		fields = append(fields, kv{"body_text", string(r.req.Body)})
	}
	fields = append(fields,
		kv{"rule", r.rule},
		kv{"status", r.status},
		kv{"response_headers", stripSecrets(r.respHeader)},
	)
	// A binary answer (Bedrock's event stream) would not survive as a JSON string.
	if utf8.Valid(r.response) {
		fields = append(fields, kv{"response", string(r.response)})
	} else {
		fields = append(fields, kv{"response_base64", base64.StdEncoding.EncodeToString(r.response)})
	}
	for i, f := range fields {
		if err := field(f.k, f.v, i == len(fields)-1); err != nil {
			return err
		}
	}
	b.WriteString("}\n")
	name := filepath.Join(dir, fmt.Sprintf("%03d.json", r.seq))
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing record: %w", err)
	}
	return nil
}

// isCompactJSON reports whether b is valid JSON that an encoder would copy unchanged: no
// insignificant whitespace and no characters it would escape.
func isCompactJSON(b []byte) bool {
	if len(b) == 0 || !json.Valid(b) {
		return false
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return false
	}
	return bytes.Equal(c.Bytes(), b)
}
