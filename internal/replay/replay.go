// Package replay reads recorded exchanges (the NNN.json files of testdata/claude-code, written by
// internal/fakeapi) and plays them into anything that takes requests and responses, such as the
// tracker, in the order the proxy would have seen them (Play), or sends the requests again over
// HTTP as the client sent them (Send, which cctrace demo uses). It is a second source for the
// pipeline: the tracker cannot tell replayed traffic from live traffic.
package replay

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/cctrace/cctrace/instrument/wire"
)

// Exchange is one recorded request and the response it got.
type Exchange struct {
	Seq      int
	Request  *wire.Request
	Response *wire.Response
	// Header and Query are the request's headers (secrets were never recorded) and raw query;
	// Body is the raw request body, as sent.
	Header http.Header
	Query  string
	Body   []byte
	// response is the raw response body.
	response []byte
}

// RawResponse returns the response body as recorded (the SSE or JSON text the upstream sent, or
// Bedrock's binary event stream).
func (e *Exchange) RawResponse() string { return string(e.response) }

// record is the on-disk form of one exchange.
type record struct {
	Seq             int                 `json:"seq"`
	Time            time.Time           `json:"time"`
	End             time.Time           `json:"end"`
	Method          string              `json:"method"`
	Path            string              `json:"path"`
	Query           string              `json:"query"`
	Provider        string              `json:"provider"`
	Headers         map[string][]string `json:"headers"`
	ContentEncoding string              `json:"content_encoding"`
	Body            json.RawMessage     `json:"body"`
	BodyText        string              `json:"body_text"`
	Status          int                 `json:"status"`
	ResponseHeaders map[string][]string `json:"response_headers"`
	Response        string              `json:"response"`
	ResponseBase64  []byte              `json:"response_base64"`
}

// Sessions returns the recorded sessions under root (testdata/claude-code): its directories, in
// name order.
func Sessions(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing recorded sessions: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	return dirs, nil
}

// Load reads every NNN.json exchange in dir, in sequence order.
func Load(dir string) ([]*Exchange, error) {
	out, err := LoadFS(os.DirFS(dir), ".")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return out, nil
}

// LoadFS reads every NNN.json exchange in dir of fsys, in sequence order: recordings embedded in
// a binary, or on disk.
func LoadFS(fsys fs.FS, dir string) ([]*Exchange, error) {
	paths, err := fs.Glob(fsys, path.Join(dir, "[0-9][0-9][0-9].json"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("loading %s: no NNN.json exchanges", dir)
	}
	var out []*Exchange
	for _, p := range paths {
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("reading exchange: %w", err)
		}
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p, err)
		}
		ex, err := r.exchange()
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p, err)
		}
		out = append(out, ex)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

func (r *record) exchange() (*Exchange, error) {
	id := uint64(r.Seq)
	h := http.Header(r.Headers)
	route := wire.ClassifyRoute(r.Method, r.Path)
	req := &wire.Request{
		ExchangeID:      id,
		Time:            r.Time,
		Method:          r.Method,
		Path:            r.Path,
		Endpoint:        route.Endpoint,
		PathModel:       route.Model,
		PathStream:      route.Stream,
		Headers:         wire.ParseHeaders(h),
		ContentEncoding: r.ContentEncoding,
	}
	if r.Provider != "" {
		p, err := wire.ParseProvider(r.Provider)
		if err != nil {
			return nil, err
		}
		req.Provider = p
	}
	response := []byte(r.Response)
	if r.ResponseBase64 != nil {
		response = r.ResponseBase64
	}
	body := []byte(r.Body)
	if len(body) == 0 && r.BodyText != "" {
		body = []byte(r.BodyText)
	}
	req.BodySize = int64(len(body))
	rh := http.Header(r.ResponseHeaders)
	resp := &wire.Response{
		ExchangeID:      id,
		Status:          r.Status,
		HeaderTime:      r.Time,
		End:             r.End,
		RequestID:       rh.Get("Request-Id"),
		ContentType:     rh.Get("Content-Type"),
		ContentEncoding: rh.Get("Content-Encoding"),
		Streamed:        wire.IsEventStream(rh.Get("Content-Type")),
		BodySize:        int64(len(response)),
		RateLimitHeader: wire.RateLimitHeader(rh),
	}
	return &Exchange{Seq: r.Seq, Request: req, Response: resp, Header: h, Query: r.Query, Body: body, response: response}, nil
}

// Target takes decoded requests and responses, like instrument.Tracker.
type Target interface {
	Request(*wire.Request)
	Response(*wire.Response)
}

// Play decodes each exchange as the pipeline would and feeds target in time order: a request at
// its arrival, a response when it ended. Each exchange is decoded once; the caller must not play
// the same exchanges twice.
func Play(target Target, exchanges []*Exchange) {
	type event struct {
		at  time.Time
		seq int
		ex  *Exchange
		end bool
	}
	var events []event
	for _, ex := range exchanges {
		events = append(events, event{ex.Request.Time, ex.Seq, ex, false}, event{ex.Response.End, ex.Seq, ex, true})
	}
	sort.SliceStable(events, func(i, j int) bool {
		a, b := events[i], events[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return !a.end && b.end
	})
	bodies := wire.NewBodyCache(0)
	for _, ev := range events {
		if !ev.end {
			req := ev.ex.Request
			_ = bodies.DecodeRequest(req, ev.ex.Body)
			target.Request(req)
			continue
		}
		resp := ev.ex.Response
		wire.DecodeResponse(resp, ev.ex.Request.Endpoint, ev.ex.response)
		wire.DecodeRateLimit(resp)
		target.Response(resp)
	}
}
