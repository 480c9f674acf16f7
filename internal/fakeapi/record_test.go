package fakeapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordDir(t *testing.T) {
	compact := `{"model":"m","stream":true,"messages":[{"role":"user","content":"<system-reminder>a & b</system-reminder>\u2028é"}]}`
	for _, tc := range []struct {
		name     string
		body     string
		encoding string
		wantKey  string // "body" or "body_text"
	}{
		{"compact json kept byte for byte", compact, "", "body"},
		{"gzip body recorded decoded", compact, "gzip", "body"},
		{"indented json kept as text", "{\n  \"model\": \"m\",\n  \"messages\": []\n}", "", "body_text"},
		{"not json", "hello", "", "body_text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			srv := New(Script{Default: Reply{Text: "recorded", Usage: Usage{InputTokens: 4}}}, WithRecordDir(dir))
			ts := start(t, srv)

			payload := []byte(tc.body)
			if tc.encoding == "gzip" {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				_, _ = zw.Write(payload)
				_ = zw.Close()
				payload = b.Bytes()
			}
			req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/messages?beta=true", bytes.NewReader(payload))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", testKey)
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Cookie", "session="+testKey)
			req.Header.Set("X-Claude-Code-Session-Id", "sess-1")
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			sent, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ts.Close() // waits for the handler, which writes the record after responding

			raw, err := os.ReadFile(filepath.Join(dir, "001.json"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte(testKey)) {
				t.Fatal("the record holds a credential")
			}
			if tc.wantKey == "body" && !bytes.Contains(raw, []byte(compact)) {
				t.Error("the record does not hold the body byte for byte")
			}
			var rec struct {
				Seq             int             `json:"seq"`
				Time            string          `json:"time"`
				End             string          `json:"end"`
				Method          string          `json:"method"`
				Path            string          `json:"path"`
				Query           string          `json:"query"`
				Headers         http.Header     `json:"headers"`
				ContentEncoding string          `json:"content_encoding"`
				Body            json.RawMessage `json:"body"`
				BodyText        *string         `json:"body_text"`
				Rule            string          `json:"rule"`
				Status          int             `json:"status"`
				RespHeaders     http.Header     `json:"response_headers"`
				Response        string          `json:"response"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatalf("record is not JSON: %v\n%s", err, raw)
			}
			if rec.Seq != 1 || rec.Method != "POST" || rec.Path != "/v1/messages" || rec.Query != "beta=true" ||
				rec.Rule != "default" || rec.Status != 200 || rec.ContentEncoding != tc.encoding || rec.Time == "" || rec.End == "" {
				t.Errorf("record = %+v", rec)
			}
			if rec.Headers.Get("X-Claude-Code-Session-Id") != "sess-1" {
				t.Errorf("headers = %v", rec.Headers)
			}
			if rec.RespHeaders.Get("request-id") == "" {
				t.Errorf("response headers = %v", rec.RespHeaders)
			}
			if rec.Response != string(sent) {
				t.Errorf("recorded response differs from what was sent:\n%s\n---\n%s", rec.Response, sent)
			}
			switch tc.wantKey {
			case "body":
				if string(rec.Body) != compact {
					t.Errorf("body = %s", rec.Body)
				}
			case "body_text":
				if rec.BodyText == nil || *rec.BodyText != tc.body || rec.Body != nil {
					t.Errorf("body_text = %v, body = %s", rec.BodyText, rec.Body)
				}
			}
			if strings.Contains(rec.Response, "event: ") != strings.Contains(tc.body, `"stream":true`) {
				t.Errorf("response kind does not follow the request's stream flag: %q", rec.Response)
			}
		})
	}
}
