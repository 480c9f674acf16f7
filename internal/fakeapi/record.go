package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
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
}

// write stores the exchange as dir/NNN.json, one top-level key per line. "body" is the request
// body itself when it is compact JSON (byte for byte what the client sent, after removing any
// content encoding); any other body is stored as the string "body_text".
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
		{"headers", stripSecrets(r.req.Header)},
		{"content_encoding", r.contentEncoding},
	}
	if isCompactJSON(r.req.Body) {
		fields = append(fields, kv{"body", json.RawMessage(r.req.Body)})
	} else {
		fields = append(fields, kv{"body_text", string(r.req.Body)})
	}
	fields = append(fields,
		kv{"rule", r.rule},
		kv{"status", r.status},
		kv{"response_headers", stripSecrets(r.respHeader)},
		kv{"response", string(r.response)},
	)
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
