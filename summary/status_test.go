package summary

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// TestStatus checks what the status line is served: the newest turn's live figures, and the
// main agent's context from its last answered request, neither a subagent's nor a side
// request's.
func TestStatus(t *testing.T) {
	now := t0.Add(10 * time.Second)
	s := New(WithClock(func() time.Time { return now }))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sessions/{id}/status", s.ServeStatus)
	status := func(id string, scope ...Scope) (int, SessionStatus) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/api/sessions/"+id+"/status", nil)
		for _, sc := range scope {
			req = req.WithContext(WithScope(req.Context(), sc))
		}
		mux.ServeHTTP(rec, req)
		var st SessionStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("status of %s: %v: %s", id, err, rec.Body)
		}
		return rec.Code, st
	}
	if code, st := status("nobody"); code != http.StatusNotFound || st.SessionID != "nobody" || st.Turn != nil {
		t.Errorf("unknown session: %d %+v", code, st)
	}

	// Turn 1 ends; turn 2 runs with a main-chain request and a subagent's answered.
	b := newSpans(1, "sess-status")
	old := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 0)
	s.SpanStarted(old)
	old.End, old.Turn = t0.Add(time.Second), &instrument.Turn{Index: 1, Outcome: "end_turn", Totals: instrument.Totals{Requests: 1}}
	s.SpanEnded(old)
	b = newSpans(2, "sess-status")
	turn := b.span(instrument.KindTurn, nil, "invoke_agent claude-code", 2*time.Second)
	turn.TurnIndex = 2
	s.SpanStarted(turn)
	main := b.chat(turn, 2*time.Second, instrument.RequestTurn, 0)
	main.Chat.Request.Headers.Beta = []string{"claude-code-20250219", "context-1m-2025-08-07"}
	b.started(s, main)
	respond(main, 3*time.Second, wire.Usage{InputTokens: 100, OutputTokens: 50, CacheReadInputTokens: 4000, CacheCreationInputTokens: 900}, nil)
	b.ended(s, main)
	sub := b.chat(turn, 3*time.Second, instrument.RequestSubagent, 0)
	b.started(s, sub)
	respond(sub, 4*time.Second, wire.Usage{InputTokens: 7, OutputTokens: 3}, nil)
	b.ended(s, sub)

	code, st := status("sess-status")
	if code != http.StatusOK || st.Turn == nil || st.Context == nil {
		t.Fatalf("status: %d %+v", code, st)
	}
	if code, other := status("sess-status", Scope{User: "someone-else"}); code != http.StatusNotFound || other.Turn != nil || other.Context != nil {
		t.Errorf("a viewer who may not see the session: %d %+v, want 404 and nothing", code, other)
	}
	wantTurn := TurnStatus{TraceID: turn.TraceID.String(), Index: 2, Running: true, Duration: 8, Requests: 2,
		Tokens: usage(107, 53, 4000, 900)}
	gotTurn := *st.Turn
	gotTurn.Cost = 0
	if gotTurn != wantTurn || st.Turn.Cost <= 0 {
		t.Errorf("turn = %+v\nwant %+v and a cost", *st.Turn, wantTurn)
	}
	if want := (Context{Tokens: 5000, Window: LongContextWindow, Model: "claude-opus-5-5"}); *st.Context != want {
		t.Errorf("context = %+v, want %+v", *st.Context, want)
	}
}

func TestContextWindow(t *testing.T) {
	tests := []struct {
		model string
		betas []string
		want  int
	}{
		{"claude-opus-5-5", nil, DefaultContextWindow},
		{"claude-sonnet-4-5[1m]", nil, LongContextWindow},
		{"claude-sonnet-4-5", []string{"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"}, LongContextWindow},
	}
	for _, tt := range tests {
		if got := ContextWindow(tt.model, tt.betas); got != tt.want {
			t.Errorf("ContextWindow(%q, %v) = %d, want %d", tt.model, tt.betas, got, tt.want)
		}
	}
}
