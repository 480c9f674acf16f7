package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/summary"
)

// peopleStore holds one finished turn each of alice (platform) and carol (search), and spend.
func peopleStore() *summary.Store {
	s := summary.New(summary.WithSpend(func() summary.Spend {
		return summary.Spend{
			People: []summary.SpendTotal{{Name: "alice", Team: "platform", Daily: 6, DailyBudget: 5}, {Name: "carol", Team: "search", Daily: 1}},
			Teams:  []summary.SpendTotal{{Name: "platform", Daily: 6}, {Name: "search", Daily: 1}},
		}
	}))
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for i, p := range []struct{ user, team string }{{"alice", "platform"}, {"carol", "search"}} {
		root := &instrument.Span{
			TraceID: instrument.TraceID{byte(i + 1)}, ID: instrument.SpanID{byte(i + 1)}, Kind: instrument.KindTurn,
			Name: "invoke_agent claude-code", Start: start, SessionID: "session-" + p.user, TurnIndex: 1,
			User: p.user, Team: p.team, Turn: &instrument.Turn{Index: 1},
		}
		s.SpanStarted(root)
		root.End, root.Turn.Outcome = start.Add(time.Second), "end_turn"
		s.SpanEnded(root)
	}
	return s
}

// TestPagesByScope checks that a viewer sees only the people of their scope on every page, and
// that the spend table and the person filter show.
func TestPagesByScope(t *testing.T) {
	h := New(peopleStore())
	as := func(sc summary.Scope, path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		h.ServeHTTP(rec, r.WithContext(summary.WithScope(r.Context(), sc)))
		return rec.Code, rec.Body.String()
	}
	carolTurn := "/turns/" + instrument.TraceID{2}.String()
	tests := []struct {
		name       string
		scope      summary.Scope
		path       string
		code       int
		has, hasnt []string
	}{
		{"admin sees everyone and the spend", summary.Scope{}, "/", 200, []string{"session-alice"[:8], "/?user=carol", `id="spend-people"`, `id="spend-teams"`, "of $5.00"}, nil},
		{"filter by person", summary.Scope{}, "/?user=carol", 200, []string{"Sessions of carol", "/sessions/session-carol"}, []string{"/sessions/session-alice"}},
		{"a person sees their own", summary.Scope{User: "alice"}, "/", 200, []string{"/sessions/session-alice"}, []string{"/sessions/session-carol", "/?user=carol", `id="spend-teams"`}},
		{"a person cannot open another's session", summary.Scope{User: "alice"}, "/sessions/session-carol", 404, nil, []string{"Messages:"}},
		{"a person cannot open another's turn", summary.Scope{User: "alice"}, carolTurn, 404, nil, nil},
		{"a lead sees their team", summary.Scope{Team: "search"}, "/", 200, []string{"/sessions/session-carol", `id="spend-teams"`}, []string{"/sessions/session-alice"}},
		{"a lead opens their team's turn", summary.Scope{Team: "search"}, carolTurn, 200, []string{"carol (search)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := as(tt.scope, tt.path)
			if code != tt.code {
				t.Errorf("status %d, want %d", code, tt.code)
			}
			for _, s := range tt.has {
				if !strings.Contains(body, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range tt.hasnt {
				if strings.Contains(body, s) {
					t.Errorf("page shows %q", s)
				}
			}
		})
	}
}

// TestPagesWithoutPeople: when nobody is told apart (WithPeople false: one person's cctrace),
// no page shows a person or the spend of people and teams.
func TestPagesWithoutPeople(t *testing.T) {
	h := New(peopleStore(), WithPeople(func() bool { return false }))
	for _, path := range []string{"/", "/sessions/session-alice", "/turns/" + instrument.TraceID{1}.String()} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d", path, rec.Code)
		}
		for _, s := range []string{"<th>person</th>", "<dt>person</dt>", `id="spend-people"`, `id="spend-teams"`, "/?user=alice"} {
			if strings.Contains(body, s) {
				t.Errorf("%s shows %q", path, s)
			}
		}
	}
}
