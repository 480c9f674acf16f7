package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/replay"
)

// TestChatSpanCarriesTheBill: the chat span of a recorded answer whose usage bills beyond its
// tokens says so: the server tools the API ran, fast mode, where inference ran and the
// sub-inferences (an advisor's) billed beside the answer.
func TestChatSpanCarriesTheBill(t *testing.T) {
	ended := replaySpans(t, "billing")
	want := map[attribute.Key]attribute.Value{
		keyUsageWebFetch:      attribute.IntValue(1),
		keyUsageCodeExecution: attribute.IntValue(1),
		keyUsageSpeed:         attribute.StringValue("fast"),
		keyUsageInferenceGeo:  attribute.StringValue("us"),
		keyUsageIterations:    attribute.IntValue(1),
	}
	chats := 0
	for _, s := range ended {
		if !strings.HasPrefix(s.Name(), "chat ") {
			continue
		}
		chats++
		got := attrMap(s)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k].String(), v.String())
			}
		}
		if _, ok := got[keyUsageWebSearch]; ok {
			t.Errorf("%s set for an answer that searched nothing", keyUsageWebSearch)
		}
	}
	if chats != 1 {
		t.Errorf("%d chat spans, want the recording's one", chats)
	}
}

// replaySpans plays the recorded session testdata/claude-code/<name> through a tracker and this
// sink, and returns the spans the sink ended.
func replaySpans(t *testing.T, name string) []sdktrace.ReadOnlySpan {
	t.Helper()
	exchanges, err := replay.Load("../testdata/claude-code/" + name)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	sink, err := New(WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	tr := instrument.New(sink)
	replay.Play(tr, exchanges)
	tr.Close(exchanges[len(exchanges)-1].Response.End)
	if err := sink.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}
