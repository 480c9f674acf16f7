package summary

import "context"

// Scope is what one viewer of the turns page and /api/turns may see. The zero value sees
// everything, as anyone who reaches an unprotected listener does; access control puts a
// narrower one in each request's context (WithScope).
type Scope struct {
	// User, when set, limits the viewer to the turns and sessions of that person.
	User string
	// Team, when set, limits the viewer to the turns and sessions of that team.
	Team string
}

// All reports whether the scope sees everything.
func (sc Scope) All() bool { return sc.User == "" && sc.Team == "" }

// Allows reports whether the scope sees the turns and sessions of a person of a team.
func (sc Scope) Allows(user, team string) bool {
	return (sc.User == "" || sc.User == user) && (sc.Team == "" || sc.Team == team)
}

// Narrow returns f limited to the scope, and false when the two pick nothing together (a viewer
// asking for someone they may not see).
func (sc Scope) Narrow(f Filter) (Filter, bool) {
	if sc.User != "" {
		if f.User != "" && f.User != sc.User {
			return f, false
		}
		f.User = sc.User
	}
	if sc.Team != "" {
		if f.Team != "" && f.Team != sc.Team {
			return f, false
		}
		f.Team = sc.Team
	}
	return f, true
}

// Spend returns the part of sp the scope sees: a person their own spend, a team lead their
// team's and its people's.
func (sc Scope) Spend(sp Spend) Spend {
	if sc.All() {
		return sp
	}
	var out Spend
	for _, p := range sp.People {
		if sc.Allows(p.Name, p.Team) {
			out.People = append(out.People, p)
		}
	}
	for _, t := range sp.Teams {
		if sc.User == "" && sc.Team == t.Name {
			out.Teams = append(out.Teams, t)
		}
	}
	return out
}

type scopeKey struct{}

// WithScope returns ctx carrying the viewer's scope.
func WithScope(ctx context.Context, sc Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// ScopeFrom returns the viewer's scope carried by ctx, the zero Scope (everything) when none is.
func ScopeFrom(ctx context.Context) Scope {
	sc, _ := ctx.Value(scopeKey{}).(Scope)
	return sc
}

// Spend is what people and teams spent over the budgets' windows, as /api/turns and the turns
// page show it. The zero value is no spend.
type Spend struct {
	People []SpendTotal `json:"people"`
	Teams  []SpendTotal `json:"teams"`
}

// SpendTotal is one person's or team's spend. Budgets are 0 when none is set.
type SpendTotal struct {
	Name          string  `json:"name"`
	Team          string  `json:"team,omitempty"` // a person's team
	Daily         float64 `json:"daily_usd"`      // the last 24 hours
	Monthly       float64 `json:"monthly_usd"`    // the last 30 days
	DailyBudget   float64 `json:"daily_budget_usd,omitempty"`
	MonthlyBudget float64 `json:"monthly_budget_usd,omitempty"`
}
