package ui

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// grafanaTempoUID is the uid of the Tempo data source that deploy/grafana provisions.
const grafanaTempoUID = "tempo"

// TraceUI builds links from a turn to the same trace in Jaeger or Grafana. The zero value builds
// no links.
type TraceUI struct {
	kind string // "jaeger", "grafana" or "template"
	base string
}

// ParseTraceUI reads the --trace-ui-url value. Three forms are understood:
//
//	http://localhost:16686                        Jaeger: links to BASE/trace/TRACE_ID
//	http://localhost:3000/explore                 Grafana Explore on the Tempo data source (uid "tempo")
//	https://example.com/anything?id={trace_id}    any UI: {trace_id} is replaced by the trace id
//
// The empty string gives the zero TraceUI.
func ParseTraceUI(raw string) (TraceUI, error) {
	if raw == "" {
		return TraceUI{}, nil
	}
	u, err := url.Parse(strings.ReplaceAll(raw, "{trace_id}", "TRACEID"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return TraceUI{}, fmt.Errorf("invalid --trace-ui-url %q: want the http(s) base URL of Jaeger (http://localhost:16686), Grafana Explore (http://localhost:3000/explore) or a URL with {trace_id}", raw)
	}
	switch {
	case strings.Contains(raw, "{trace_id}"):
		return TraceUI{kind: "template", base: raw}, nil
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/explore"):
		return TraceUI{kind: "grafana", base: strings.TrimSuffix(raw, "/")}, nil
	default:
		return TraceUI{kind: "jaeger", base: strings.TrimSuffix(raw, "/")}, nil
	}
}

// Name is what the link is called on the page: "Jaeger", "Grafana" or "trace UI"; empty for the
// zero TraceUI.
func (t TraceUI) Name() string {
	switch t.kind {
	case "jaeger":
		return "Jaeger"
	case "grafana":
		return "Grafana"
	case "template":
		return "trace UI"
	}
	return ""
}

// Link returns the URL of the trace with the given 32-digit hex id, or "" for the zero TraceUI.
func (t TraceUI) Link(traceID string) string {
	switch t.kind {
	case "jaeger":
		return t.base + "/trace/" + url.PathEscape(traceID)
	case "grafana":
		panes, _ := json.Marshal(map[string]any{
			"cctrace": map[string]any{
				"datasource": grafanaTempoUID,
				"queries": []any{map[string]any{
					"refId":      "A",
					"datasource": map[string]string{"type": "tempo", "uid": grafanaTempoUID},
					"queryType":  "traceql",
					"query":      traceID,
				}},
				"range": map[string]string{"from": "now-7d", "to": "now"},
			},
		})
		return t.base + "?schemaVersion=1&panes=" + url.QueryEscape(string(panes))
	case "template":
		return strings.ReplaceAll(t.base, "{trace_id}", url.QueryEscape(traceID))
	}
	return ""
}
