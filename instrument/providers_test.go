package instrument

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/cctrace/cctrace/instrument/wire"
)

// TestProviderRecordingsMatchAnthropic replays the tool_roundtrip session recorded with Claude
// Code in each cloud mode and checks that it makes the same turn as the Anthropic API's
// recording: the same spans, requests, tool calls and token totals, every chat span naming its
// provider and a model (taken from the path where the body has none), and the totals equal to
// what the wire carried (Bedrock's read from its event-stream frames independently).
func TestProviderRecordingsMatchAnthropic(t *testing.T) {
	ref := turnOf(t, "tool_roundtrip")
	for _, tc := range []struct {
		dir      string
		provider wire.Provider
		model    string
	}{
		{"vertex_tool_roundtrip", wire.ProviderVertex, "claude-opus-5-5"},
		{"bedrock_tool_roundtrip", wire.ProviderBedrock, "us.anthropic.claude-opus-5-5"},
		{"foundry_tool_roundtrip", wire.ProviderFoundry, "claude-sonnet-4-5"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got := turnOf(t, tc.dir)
			if got.shape != ref.shape {
				t.Errorf("spans:\n%s\nwant the shape of tool_roundtrip's:\n%s", got.shape, ref.shape)
			}
			if got.turn.Usage != ref.turn.Usage || got.turn.Requests != ref.turn.Requests || got.turn.ToolCalls != ref.turn.ToolCalls {
				t.Errorf("turn totals %+v, tool_roundtrip's %+v", *got.turn, *ref.turn)
			}
			u := got.turn.Usage
			u.CacheCreation5m, u.CacheCreation1h = 0, 0 // wireUsage reads no TTL split
			if u != got.wire {
				t.Errorf("turn usage %+v, the wire carried %+v", got.turn.Usage, got.wire)
			}
			for _, c := range got.chats {
				if c.Request.Provider != tc.provider || c.Request.Body == nil || c.Request.Body.Model != tc.model || !c.Request.Body.Stream {
					t.Errorf("chat span request: provider %v, body %+v", c.Request.Provider, c.Request.Body)
				}
			}
		})
	}
}

// recordedTurn is the one turn of a tool_roundtrip recording.
type recordedTurn struct {
	shape string // the span tree with model names left out
	turn  *Turn
	chats []*Chat
	wire  wire.Usage // the usage the responses carried, summed
}

func turnOf(t *testing.T, name string) recordedTurn {
	t.Helper()
	rec, bySeq := replayed(t, filepath.Join("../testdata/claude-code", name))
	var out recordedTurn
	var shape strings.Builder
	for _, s := range rec.spans {
		switch {
		case s.Turn != nil:
			out.turn = s.Turn
		case s.Chat != nil && s.Chat.Kind == RequestNoSession:
			continue // Bedrock's inference-profile listing
		case s.Chat != nil:
			out.chats = append(out.chats, s.Chat)
		}
		fmt.Fprintf(&shape, "%v %s\n", s.Kind, strings.Fields(s.Name)[0])
	}
	out.shape = shape.String()
	if out.turn == nil || len(out.chats) == 0 {
		t.Fatalf("%s: no turn", name)
	}
	for seq := uint64(1); bySeq[seq] != nil; seq++ {
		ex := bySeq[seq]
		if ex.Request.Endpoint != wire.EndpointMessages {
			continue
		}
		resp := ex.RawResponse()
		if wire.IsAWSEventStream(ex.Response.ContentType) {
			resp = sseFromFrames(t, []byte(resp))
		}
		u, _ := wireUsage(t, resp)
		out.wire = addUsage(out.wire, u)
	}
	return out
}

// sseFromFrames turns Bedrock's event-stream frames back into the SSE text of the events they
// carry, decoding them with the AWS SDK rather than with wire's decoder.
func sseFromFrames(t *testing.T, stream []byte) string {
	t.Helper()
	var sse strings.Builder
	r := bytes.NewReader(stream)
	dec := eventstream.NewDecoder()
	for r.Len() > 0 {
		msg, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatalf("decoding frame: %v", err)
		}
		var chunk struct{ Bytes string }
		if err := json.Unmarshal(msg.Payload, &chunk); err != nil {
			t.Fatal(err)
		}
		ev, err := base64.StdEncoding.DecodeString(chunk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sse, "data: %s\n\n", ev)
	}
	return sse.String()
}
