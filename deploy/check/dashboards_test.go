package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// builtInDatasources are uids Grafana has without provisioning.
var builtInDatasources = map[string]bool{"-- Grafana --": true, "grafana": true}

// provisionedDatasources returns the uids of the provisioned data sources by uid, with their type.
func provisionedDatasources(t *testing.T) map[string]string {
	t.Helper()
	var f struct {
		Datasources []struct {
			UID      string         `yaml:"uid"`
			Type     string         `yaml:"type"`
			JSONData map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/datasources.yml", &f)
	uids := make(map[string]string)
	for _, ds := range f.Datasources {
		if ds.UID == "" {
			t.Errorf("data source of type %s has no fixed uid", ds.Type)
		}
		if _, dup := uids[ds.UID]; dup {
			t.Errorf("data source uid %q provisioned twice", ds.UID)
		}
		uids[ds.UID] = ds.Type
	}
	return uids
}

func TestDatasourceLinks(t *testing.T) {
	uids := provisionedDatasources(t)
	var f struct {
		Datasources []struct {
			UID      string `yaml:"uid"`
			JSONData struct {
				Exemplars []struct {
					Name          string `yaml:"name"`
					DatasourceUID string `yaml:"datasourceUid"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/datasources.yml", &f)
	found := false
	for _, ds := range f.Datasources {
		for _, ex := range ds.JSONData.Exemplars {
			t.Run(ds.UID+"->"+ex.DatasourceUID, func(t *testing.T) {
				if uids[ex.DatasourceUID] != "tempo" {
					t.Errorf("exemplar link goes to %q, which is not a provisioned Tempo data source", ex.DatasourceUID)
				}
				// cctrace's exemplar label (metrics package: prometheus.Labels{"trace_id": …}).
				if ex.Name != "trace_id" {
					t.Errorf("exemplar label %q, want trace_id", ex.Name)
				}
			})
			found = true
		}
	}
	if !found {
		t.Error("no data source links exemplars to traces")
	}
}

// dashboard is the part of a Grafana dashboard JSON the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Datasource map[string]any `json:"datasource"`
			Query      any            `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	out := make(map[string]dashboard)
	for _, path := range glob(t, "grafana/dashboards/*.json") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if !json.Valid(b) {
			t.Fatalf("%s is not valid JSON", path)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		out[filepath.Base(path)] = d
	}
	return out
}

// datasourceRefs collects every "datasource" object anywhere in the dashboard JSON, so that a
// reference the typed struct does not model is still checked.
func datasourceRefs(v any, out *[]map[string]any) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if k == "datasource" {
				if m, ok := c.(map[string]any); ok {
					*out = append(*out, m)
				} else {
					*out = append(*out, map[string]any{"uid": c})
				}
			}
			datasourceRefs(c, out)
		}
	case []any:
		for _, c := range v {
			datasourceRefs(c, out)
		}
	}
}

func TestDashboardDatasourcesProvisioned(t *testing.T) {
	uids := provisionedDatasources(t)
	for _, path := range glob(t, "grafana/dashboards/*.json") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s is not valid JSON: %v", path, err)
			}
			var refs []map[string]any
			datasourceRefs(v, &refs)
			if len(refs) == 0 {
				t.Fatal("no data source references")
			}
			for _, ref := range refs {
				uid, _ := ref["uid"].(string)
				if builtInDatasources[uid] {
					continue
				}
				typ, ok := uids[uid]
				if !ok {
					t.Errorf("data source %v is not provisioned", ref)
					continue
				}
				if want, _ := ref["type"].(string); want != "" && want != typ {
					t.Errorf("data source %q referenced as type %q, provisioned as %q", uid, want, typ)
				}
			}
		})
	}
}

func TestDashboardQueries(t *testing.T) {
	recorded := recordedNames(t)
	seenUID := make(map[string]string)
	for file, d := range loadDashboards(t) {
		t.Run(file, func(t *testing.T) {
			if d.UID == "" || d.Title == "" {
				t.Errorf("dashboard needs a fixed uid and a title, got uid %q title %q", d.UID, d.Title)
			}
			if other, dup := seenUID[d.UID]; dup {
				t.Errorf("uid %q also used by %s", d.UID, other)
			}
			seenUID[d.UID] = file
			exprs := 0
			ids := make(map[int]bool)
			var walk func(ps []panel)
			walk = func(ps []panel) {
				for _, p := range ps {
					if ids[p.ID] {
						t.Errorf("panel id %d used twice", p.ID)
					}
					ids[p.ID] = true
					walk(p.Panels)
					if p.Type != "row" && len(p.Targets) == 0 {
						t.Errorf("panel %q has no queries", p.Title)
					}
					for _, tg := range p.Targets {
						exprs++
						checkExpr(t, p.Title+"/"+tg.RefID, grafanaVars.Replace(tg.Expr), recorded)
					}
				}
			}
			walk(d.Panels)
			if exprs == 0 {
				t.Error("no PromQL expressions")
			}
			for _, v := range d.Templating.List {
				q := ""
				switch qv := v.Query.(type) {
				case string:
					q = qv
				case map[string]any:
					q, _ = qv["query"].(string)
				}
				m := labelValues.FindStringSubmatch(q)
				if m == nil {
					t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q)
					continue
				}
				checkExpr(t, "variable "+v.Name, m[1], recorded)
			}
		})
	}
}

// labelValues matches Grafana's label_values(metric, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// checkExpr parses expr and checks every metric it selects.
func checkExpr(t *testing.T, where, expr string, recorded []string) {
	t.Helper()
	if expr == "" {
		t.Errorf("%s: empty expression", where)
		return
	}
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	for _, n := range names {
		if err := checkName(n, recorded); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}
