package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cctrace/cctrace/internal/wire"
)

// hintingObserver decodes each request body with a wire.BodyCache as soon as it is read (a test
// may; the pipeline does it on its own goroutine) and gives the proxy hints from the same cache.
type hintingObserver struct {
	mu    sync.Mutex
	cache *wire.BodyCache
	got   []hintedRequest
	done  chan struct{}
}

type hintedRequest struct {
	req  *wire.Request
	kept int // bytes of body copy handed over
	err  error
}

var _ BodyHinter = (*hintingObserver)(nil)

func (o *hintingObserver) BodyHint(req *wire.Request) *wire.Hint {
	return o.cache.Hint(wire.BodyKey(req.Headers))
}

func (o *hintingObserver) RequestRead(req *wire.Request, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.cache.DecodeRequest(req, body)
	o.got = append(o.got, hintedRequest{req: req, kept: len(body), err: err})
	RecycleBody(body)
}

func (o *hintingObserver) ResponseDone(*wire.Response, []byte) { o.done <- struct{}{} }

// chunkedReader returns its bytes in chunks of random sizes, so that the points the tap checks
// fall anywhere in a read.
type chunkedReader struct {
	b   []byte
	rnd *rand.Rand
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rnd.IntN(9000))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// growingConversation returns the bodies of a conversation that grows by a tool call and its
// result with every request, with cache_control on the newest message, as Claude Code sends it.
func growingConversation(t *testing.T, requests int) [][]byte {
	t.Helper()
	type block = map[string]any
	msgs := []block{{"role": "user", "content": []block{{"type": "text", "text": "Refactor the proxy."}}}}
	result := strings.Repeat("func f() {\n\treturn \"x\" // ünï\n}\n", 400) // ~13 KB
	var bodies [][]byte
	for i := range requests {
		if i > 0 {
			id := fmt.Sprintf("toolu_%03d", i)
			msgs = append(msgs,
				block{"role": "assistant", "content": []block{{"type": "text", "text": "Reading."}, {"type": "tool_use", "id": id, "name": "Read", "input": block{"path": id}}}},
				block{"role": "user", "content": []block{{"type": "tool_result", "tool_use_id": id, "content": result}}})
		}
		sent := make([]block, len(msgs))
		copy(sent, msgs)
		last := block{}
		for k, v := range msgs[len(msgs)-1] {
			last[k] = v
		}
		content := append([]block(nil), last["content"].([]block)...)
		tagged := block{}
		for k, v := range content[len(content)-1] {
			tagged[k] = v
		}
		tagged["cache_control"] = block{"type": "ephemeral"}
		content[len(content)-1] = tagged
		last["content"] = content
		sent[len(sent)-1] = last
		var b bytes.Buffer
		b.WriteString(`{"model":"claude-opus-4-7","messages":`)
		m, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(m)
		b.WriteString(`,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.328;"}],"tools":[{"name":"Read","input_schema":{"type":"object"}}],"max_tokens":32000,"stream":false}`)
		bodies = append(bodies, b.Bytes())
	}
	return bodies
}

// TestBodyHintKeepsOnlyTheNewPart sends a growing conversation through the proxy with an
// Observer that hints it: every body must reach the upstream byte for byte, decode exactly as
// ParseBody decodes the whole body, and, once the conversation has a previous body, reach the
// Observer as a copy of its new part only.
func TestBodyHintKeepsOnlyTheNewPart(t *testing.T) {
	var (
		upMu     sync.Mutex
		upBodies [][]byte
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream: reading body: %v", err)
		}
		upMu.Lock()
		upBodies = append(upBodies, b)
		upMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","id":"msg_1","role":"assistant","model":"claude-opus-4-7","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	obs := &hintingObserver{cache: wire.NewBodyCache(0), done: make(chan struct{}, 64)}
	p, err := New(u, obs)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	bodies := growingConversation(t, 24)
	// A rewritten history in the middle: the hint no longer matches, the body is copied whole.
	rewritten := bytes.Replace(bodies[12], []byte("Refactor the proxy."), []byte("Refactor the PROXY."), 1)
	bodies = append(bodies[:13:13], append([][]byte{rewritten}, bodies[13:]...)...)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i, body := range bodies {
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/messages", &chunkedReader{b: body, rnd: rnd})
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Claude-Code-Session-Id", "s-hint")
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-obs.done
	}

	upMu.Lock()
	defer upMu.Unlock()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(upBodies) != len(bodies) || len(obs.got) != len(bodies) {
		t.Fatalf("upstream got %d bodies, observer %d, sent %d", len(upBodies), len(obs.got), len(bodies))
	}
	tails := 0
	for i, body := range bodies {
		if !bytes.Equal(upBodies[i], body) {
			t.Fatalf("request %d: the upstream got a different body", i)
		}
		g := obs.got[i]
		if g.err != nil {
			t.Fatalf("request %d: not decoded: %v", i, g.err)
		}
		want, err := wire.ParseBody(body, "")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g.req.Body, want) {
			t.Fatalf("request %d (from offset %v): decoded differently from ParseBody", i, g.req.BodyFrom != nil)
		}
		if g.req.BodyFrom != nil {
			tails++
			if len(body) > 200<<10 && g.kept > len(body)/4 {
				t.Errorf("request %d: kept %d of %d bytes", i, g.kept, len(body))
			}
			if int64(g.kept)+g.req.BodyFrom.Offset() != int64(len(body)) {
				t.Errorf("request %d: kept %d bytes from offset %d of a %d-byte body", i, g.kept, g.req.BodyFrom.Offset(), len(body))
			}
		} else if g.kept != len(body) {
			t.Errorf("request %d: whole copy of %d bytes, body %d", i, g.kept, len(body))
		}
		if g.req.BodySize != int64(len(body)) {
			t.Errorf("request %d: BodySize %d, want %d", i, g.req.BodySize, len(body))
		}
	}
	last := obs.got[len(obs.got)-1]
	t.Logf("%d of %d bodies handed over from an offset; the last kept %d of %d bytes", tails, len(bodies), last.kept, len(bodies[len(bodies)-1]))
	// The first body, and the first after the rewrite, have nothing to resume from; the small
	// early ones have no checkpoint far enough in to be worth it.
	if tails < len(bodies)-6 {
		t.Errorf("%d of %d bodies handed over from an offset, want at least %d", tails, len(bodies), len(bodies)-6)
	}
	if n := p.copies.reserved.Load(); n != 0 {
		t.Errorf("copy budget holds %d bytes after every exchange ended", n)
	}
}
