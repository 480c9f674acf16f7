package summary

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
)

// peopleStore holds one turn each of alice (platform), bob (platform) and carol (search).
func peopleStore(t *testing.T) *Store {
	t.Helper()
	s := New(WithSpend(func() Spend {
		return Spend{
			People: []SpendTotal{{Name: "alice", Team: "platform", Daily: 3}, {Name: "bob", Team: "platform", Daily: 2}, {Name: "carol", Team: "search", Daily: 1}},
			Teams:  []SpendTotal{{Name: "platform", Daily: 5}, {Name: "search", Daily: 1}},
		}
	}))
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for i, p := range []struct{ user, team string }{{"alice", "platform"}, {"bob", "platform"}, {"carol", "search"}} {
		root := &instrument.Span{
			TraceID: instrument.TraceID{byte(i + 1)}, ID: instrument.SpanID{byte(i + 1)}, Kind: instrument.KindTurn,
			Name: "invoke_agent claude-code", Start: start, SessionID: "session-" + p.user, TurnIndex: 1,
			User: p.user, Team: p.team, Turn: &instrument.Turn{Index: 1},
		}
		s.SpanStarted(root)
		root.End = start.Add(time.Second)
		root.Turn.Outcome = "end_turn"
		s.SpanEnded(root)
	}
	return s
}

func TestTurnsByPerson(t *testing.T) {
	s := peopleStore(t)
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all", Filter{}, []string{"carol", "bob", "alice"}},
		{"one person", Filter{User: "bob"}, []string{"bob"}},
		{"one team", Filter{Team: "platform"}, []string{"bob", "alice"}},
		{"nobody", Filter{User: "dave"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tr := range s.TurnsWhere(tt.f) {
				got = append(got, tr.User)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("turns of %v, want %v", got, tt.want)
			}
		})
	}
	if ss := s.SessionsWhere(Filter{Team: "search"}); len(ss) != 1 || ss[0].User != "carol" || ss[0].Team != "search" {
		t.Errorf("sessions of search: %+v", ss)
	}
}

// TestAPITurnsScope checks what /api/turns serves each viewer: a person their own turns and
// spend, a lead their team's, an admin everything; asking for someone out of scope gives nothing.
func TestAPITurnsScope(t *testing.T) {
	s := peopleStore(t)
	type answer struct {
		Turns []Turn `json:"turns"`
		Spend *Spend `json:"spend"`
	}
	get := func(sc Scope, query string) answer {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/api/turns"+query, nil)
		r = r.WithContext(WithScope(r.Context(), sc))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		var a answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name                 string
		scope                Scope
		query                string
		turns, people, teams int
	}{
		{"admin", Scope{}, "", 3, 3, 2},
		{"admin asks for one person", Scope{}, "?user=carol", 1, 3, 2},
		{"person", Scope{User: "alice"}, "", 1, 1, 0},
		{"person asks for another", Scope{User: "alice"}, "?user=bob", 0, 1, 0},
		{"lead", Scope{Team: "platform"}, "", 2, 2, 1},
		{"lead asks for one of theirs", Scope{Team: "platform"}, "?user=bob", 1, 2, 1},
		{"lead asks for another team", Scope{Team: "platform"}, "?team=search", 0, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := get(tt.scope, tt.query)
			if len(a.Turns) != tt.turns || a.Spend == nil || len(a.Spend.People) != tt.people || len(a.Spend.Teams) != tt.teams {
				t.Errorf("%d turns, spend %+v; want %d turns, %d people, %d teams", len(a.Turns), a.Spend, tt.turns, tt.people, tt.teams)
			}
			for _, tr := range a.Turns {
				if !tt.scope.Allows(tr.User, tr.Team) {
					t.Errorf("served a turn of %s/%s", tr.User, tr.Team)
				}
			}
		})
	}
}
