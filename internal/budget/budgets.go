// Package budget holds spend budgets per person and per team: the budgets file, the Prometheus
// alerting rules rendered from it, the in-process ledger of what each person and team spent, and
// the opt-in enforcement that refuses an over-budget person's next prompt.
//
// A daily budget is for the last 24 hours and a monthly one for the last 30 days, both rolling:
// Prometheus evaluates exactly that with increase(…[24h]) and increase(…[30d]), so the alerts
// and the enforcement agree, and nobody's budget resets for everyone at once at a midnight of
// some time zone.
package budget

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/cctrace/cctrace/internal/configfile"
	"github.com/cctrace/cctrace/internal/identity"
)

// Windows of a budget.
const (
	Daily   = "daily"   // the last 24 hours
	Monthly = "monthly" // the last 30 days
)

// Scopes of a budget.
const (
	ScopePerson = "person"
	ScopeTeam   = "team"
)

// Limit is a budget in US dollars for each window; zero means none for that window.
type Limit struct {
	Daily, Monthly float64
}

// Budgets are the budgets of people and teams, by name as the directory gives them. A nil
// *Budgets has none. It is immutable once parsed.
type Budgets struct {
	People map[string]Limit
	Teams  map[string]Limit
}

// inScope returns what of people and teams a scope (ScopePerson or ScopeTeam) is about.
func inScope[T any](scope string, people, teams T) T {
	if scope == ScopeTeam {
		return teams
	}
	return people
}

// Of returns the budget of a person or team (scope ScopePerson or ScopeTeam) by name.
func (b *Budgets) Of(scope, name string) (Limit, bool) {
	if b == nil || name == "" {
		return Limit{}, false
	}
	l, ok := inScope(scope, b.People, b.Teams)[name]
	return l, ok
}

// Names returns the names of one scope's budgets, sorted.
func (b *Budgets) Names(scope string) []string {
	if b == nil {
		return nil
	}
	m := inScope(scope, b.People, b.Teams)
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Parse parses a budgets file. name is the file's name for errors, which say "name:line: what".
// The format (YAML; US dollars; each window optional):
//
//	people:
//	  alice: {daily: 5, monthly: 100}
//	  bob:
//	    monthly: 40
//	teams:
//	  platform: {daily: 50, monthly: 1000}
func Parse(name string, data []byte) (*Budgets, error) {
	doc, err := configfile.ParseYAML(name, data)
	if err != nil {
		return nil, err
	}
	b := &Budgets{People: map[string]Limit{}, Teams: map[string]Limit{}}
	root, err := configfile.Mapping(name, doc, "people", "teams")
	if err != nil || root == nil {
		return b, err
	}
	for _, sc := range []struct {
		key string
		out map[string]Limit
	}{{"people", b.People}, {"teams", b.Teams}} {
		m := configfile.Value(root, sc.key)
		if m == nil {
			continue
		}
		if m.Kind != yaml.MappingNode {
			return nil, configfile.At(name, m, "%s must map names to budgets, e.g. alice: {daily: 5, monthly: 100}", sc.key)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			who, err := configfile.String(name, k, "a name", identity.CleanValue)
			if err != nil {
				return nil, err
			}
			if line, dup := seen[who]; dup {
				return nil, configfile.At(name, k, "%q is already given on line %d", who, line)
			}
			seen[who] = k.Line
			l, err := parseLimit(name, v)
			if err != nil {
				return nil, err
			}
			sc.out[who] = l
		}
	}
	return b, nil
}

func parseLimit(name string, n *yaml.Node) (Limit, error) {
	var l Limit
	if n.Kind != yaml.MappingNode {
		return l, configfile.At(name, n, "a budget must be a mapping of daily and monthly US dollars, e.g. {daily: 5, monthly: 100}")
	}
	if err := configfile.Keys(name, n, Daily, Monthly); err != nil {
		return l, err
	}
	if len(n.Content) == 0 {
		return l, configfile.At(name, n, "a budget without daily or monthly")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		usd, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || err != nil || math.IsNaN(usd) || math.IsInf(usd, 0) {
			return l, configfile.At(name, v, "%s budget %q is not a number of US dollars", k.Value, v.Value)
		}
		if usd <= 0 {
			return l, configfile.At(name, v, "%s budget %v must be above 0 (leave it out for none)", k.Value, usd)
		}
		if k.Value == Daily {
			l.Daily = usd
		} else {
			l.Monthly = usd
		}
	}
	return l, nil
}

// format writes usd as the rules and messages show it.
func format(usd float64) string { return strconv.FormatFloat(usd, 'f', -1, 64) }

// windowText says what a window is, for people.
func windowText(window string) string {
	if window == Monthly {
		return "the last 30 days"
	}
	return "the last 24 hours"
}

// dollars formats an amount for a message: cents, or more digits below a dollar.
func dollars(usd float64) string {
	if usd < 1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}
