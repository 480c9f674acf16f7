package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/cctrace/cctrace/instrument/wire"
)

// bedrockFrames encodes Anthropic stream events as Bedrock's chunk frames.
func bedrockFrames(t *testing.T, events ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range events {
		payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(ev))})
		err := enc.Encode(&b, eventstream.Message{
			Headers: eventstream.Headers{
				{Name: ":event-type", Value: eventstream.StringValue("chunk")},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
				{Name: ":message-type", Value: eventstream.StringValue("event")},
			},
			Payload: payload,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestBedrockEventStreamPassesThroughAndDecodes: Bedrock's binary frames reach the client
// unchanged, written in pieces that split frames, and are decoded as they pass.
func TestBedrockEventStreamPassesThroughAndDecodes(t *testing.T) {
	stream := bedrockFrames(t,
		`{"type":"message_start","message":{"id":"msg_1","model":"claude-opus-5-5","usage":{"input_tokens":7,"cache_read_input_tokens":100,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":7,"outputTokenCount":3}}`,
	)
	h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		for rest := stream; len(rest) > 0; {
			n := min(37, len(rest)) // splits frames anywhere
			_, _ = w.Write(rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	}), WithProvider(wire.ProviderBedrock))
	req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/model/us.anthropic.claude-opus-5-5/invoke-with-response-stream",
		strings.NewReader(`{"anthropic_version":"bedrock-2023-05-31","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); !bytes.Equal(got, stream) {
		t.Fatalf("the client got %d bytes, not the %d the upstream sent", len(got), len(stream))
	}
	rec := h.rec.next(t)
	if rec.req.Provider != wire.ProviderBedrock || rec.req.Endpoint != wire.EndpointMessages ||
		rec.req.PathModel != "us.anthropic.claude-opus-5-5" || !rec.req.PathStream {
		t.Errorf("request %+v", rec.req)
	}
	if !bytes.Equal(rec.respBody, stream) || len(rec.resp.Chunks) == 0 {
		t.Errorf("observed a copy of %d bytes in %d chunks, want the %d forwarded", len(rec.respBody), len(rec.resp.Chunks), len(stream))
	}
	r := rec.decoded()
	if !r.Streamed || r.Message == nil || r.Message.StopReason != "end_turn" || r.Message.Usage.CacheReadInputTokens != 100 ||
		r.Message.Usage.OutputTokens != 3 || r.Message.Text != "Hello" || r.Incomplete || r.ParseError != "" {
		t.Errorf("response %+v, message %+v", r, r.Message)
	}
	if r.FirstChunk.IsZero() {
		t.Error("no time to first token")
	}
}

// TestRouteAndUpstreamAuth: WithRoute picks the upstream by path, and WithUpstreamAuth's
// transport sees every outgoing request.
func TestRouteAndUpstreamAuth(t *testing.T) {
	seen := make(chan string, 4)
	answer := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen <- name + " " + r.URL.Path + " " + r.Header.Get("X-Signed")
			w.WriteHeader(http.StatusOK)
		})
	}
	runtime, _ := url.Parse(startUpstream(t, answer("runtime")))
	control, _ := url.Parse(startUpstream(t, answer("control")))
	route := func(path string) *url.URL {
		if strings.HasPrefix(path, "/model/") {
			return nil
		}
		return control
	}
	sign := func(base http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Signed", "yes")
			return base.RoundTrip(r)
		})
	}
	h := newHarnessTo(t, runtime, WithRoute(route), WithUpstreamAuth(sign))
	for _, path := range []string{"/model/m/invoke", "/inference-profiles"} {
		resp, err := h.client.Get(h.proxyURL + path)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp.Body)
		h.rec.next(t)
	}
	want := []string{"runtime /model/m/invoke yes", "control /inference-profiles yes"}
	for _, w := range want {
		if got := <-seen; got != w {
			t.Errorf("upstream saw %q, want %q", got, w)
		}
	}
}
