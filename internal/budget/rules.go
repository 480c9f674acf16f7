package budget

import (
	"bytes"
	"strconv"
	"text/template"
)

// Alerts the rendered rules define.
const (
	AlertPersonDaily   = "CctracePersonDailyBudgetSpent"
	AlertPersonMonthly = "CctracePersonMonthlyBudgetSpent"
	AlertTeamDaily     = "CctraceTeamDailyBudgetSpent"
	AlertTeamMonthly   = "CctraceTeamMonthlyBudgetSpent"
)

// Rules renders Prometheus alerting rules for b: a constant series per budget
// (cctrace:person_budget_usd{user,window} and cctrace:team_budget_usd{team,window}) and four alerts
// that fire at once when the spend of a person or a team over the last 24 hours or 30 days
// (increase of cctrace_cost_usd_total) reaches its budget. Each alert carries the team label,
// which Alertmanager routes by; a person's alert carries the team of their spend (a person who
// changed teams within the window has their spend split between the two). source names the
// budgets file in the header comment.
func Rules(b *Budgets, source string) ([]byte, error) {
	type entry struct {
		Name   string
		Window string
		USD    string
	}
	data := struct {
		Source        string
		People, Teams []entry
		Alerts        []alertRule
	}{Source: source}
	for _, sc := range []struct {
		scope string
		out   *[]entry
	}{{ScopePerson, &data.People}, {ScopeTeam, &data.Teams}} {
		for _, n := range b.Names(sc.scope) {
			l, _ := b.Of(sc.scope, n)
			for _, w := range []struct {
				window string
				usd    float64
			}{{Daily, l.Daily}, {Monthly, l.Monthly}} {
				if w.usd > 0 {
					*sc.out = append(*sc.out, entry{Name: strconv.Quote(n), Window: w.window, USD: format(w.usd)})
				}
			}
		}
	}
	data.Alerts = alertRules
	var buf bytes.Buffer
	if err := rulesTemplate.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// alertRule is one of the four alerts.
type alertRule struct {
	Name, Scope, Window, Range, Label, Record, By, Text string
}

var alertRules = []alertRule{
	{AlertPersonDaily, ScopePerson, Daily, "24h", "user", "cctrace:person_budget_usd", "user, team", "the last 24 hours"},
	{AlertPersonMonthly, ScopePerson, Monthly, "30d", "user", "cctrace:person_budget_usd", "user, team", "the last 30 days"},
	{AlertTeamDaily, ScopeTeam, Daily, "24h", "team", "cctrace:team_budget_usd", "team", "the last 24 hours"},
	{AlertTeamMonthly, ScopeTeam, Monthly, "30d", "team", "cctrace:team_budget_usd", "team", "the last 30 days"},
}

var rulesTemplate = template.Must(template.New("rules").Parse(`# Spend budgets per person and per team, rendered by
#   cctrace budgets rules --budgets {{.Source}}
# Do not edit: change the budgets file and render this again, then reload Prometheus.
# daily is the last 24 hours, monthly the last 30 days (rolling, as increase() counts them).
groups:
  - name: cctrace-budget-limits
    rules:
{{- range .People}}
      - record: cctrace:person_budget_usd
        expr: vector({{.USD}})
        labels:
          user: {{.Name}}
          window: {{.Window}}
{{- end}}
{{- range .Teams}}
      - record: cctrace:team_budget_usd
        expr: vector({{.USD}})
        labels:
          team: {{.Name}}
          window: {{.Window}}
{{- end}}
{{- if and (not .People) (not .Teams)}}
      # No budgets: an empty group keeps this file valid.
      - record: cctrace:budgets_defined
        expr: vector(0)
{{- end}}
  - name: cctrace-budgets
    rules:
{{- range .Alerts}}
      - alert: {{.Name}}
        expr: |
{{- if eq .Scope "person"}}
          (
            sum by (user) (increase(cctrace_cost_usd_total[{{.Range}}]))
              >= on (user) group_left {{.Record}}{window="{{.Window}}"}
          )
          # The team the person spent most with in the window, for routing; the sum is the
          # person's over every team, as enforcement counts it.
          + on (user) group_left (team)
            (0 * topk by (user) (1, sum by (user, team) (increase(cctrace_cost_usd_total[{{.Range}}]))))
{{- else}}
          sum by ({{.By}}) (increase(cctrace_cost_usd_total[{{.Range}}]))
            >= on ({{.Label}}) group_left {{.Record}}{window="{{.Window}}"}
{{- end}}
        labels:
          severity: warning
          budget_scope: {{.Scope}}
          budget_window: {{.Window}}
        annotations:
          summary: "{{if eq .Scope "person"}}{{"{{"}} $labels.user {{"}}"}}{{else}}Team {{"{{"}} $labels.team {{"}}"}}{{end}} spent the {{.Window}} budget"
          description: "{{if eq .Scope "person"}}{{"{{"}} $labels.user {{"}}"}} (team {{"{{"}} $labels.team {{"}}"}}){{else}}Team {{"{{"}} $labels.team {{"}}"}}{{end}} spent ${{"{{"}} $value | printf \"%.2f\" {{"}}"}} over {{.Text}}, at or above the {{.Window}} budget in the budgets file. With --enforce-budgets, cctrace refuses their new prompts until the spend of the window is below it."
{{- end}}
`))
