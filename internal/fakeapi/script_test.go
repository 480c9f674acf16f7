package fakeapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body to /v1/messages straight through the handler and returns the rule that answered.
func post(t *testing.T, srv *Server, body string, header map[string]string) Served {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/messages?beta=true", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	srv.ServeHTTP(httptest.NewRecorder(), req)
	served := srv.Served()
	return served[len(served)-1]
}

func TestRulesAreStickyAndIndependent(t *testing.T) {
	a1, a2 := Reply{Text: "a1", Usage: Usage{InputTokens: 1}}, Reply{Text: "a2", Usage: Usage{InputTokens: 2}}
	b1 := Reply{Text: "b1", Usage: Usage{InputTokens: 100}}
	srv := New(Script{
		Rules: []Rule{
			{Name: "a", Match: func(r *Request) bool { return r.Model == "a" }, Replies: []Reply{a1, a2}},
			{Name: "b", Match: func(r *Request) bool { return r.Model == "b" }, Replies: []Reply{b1}},
			{Name: "empty", Match: func(r *Request) bool { return r.Model == "empty" }},
		},
		Default: Reply{Text: "d", Usage: Usage{InputTokens: 1000}},
	})
	var got []string
	for _, model := range []string{"a", "b", "a", "x", "a", "b", "empty"} {
		sv := post(t, srv, `{"model":"`+model+`","messages":[]}`, nil)
		got = append(got, sv.Rule)
	}
	if want := "a,b,a,default,a,b,empty"; strings.Join(got, ",") != want {
		t.Errorf("rules = %v, want %s", got, want)
	}
	// a answered 1, 2, 2 (sticky); b 100 twice; default 1000; empty nothing.
	if u := srv.TotalUsage(); u.InputTokens != 1+2+2+100+100+1000 {
		t.Errorf("total input = %d", u.InputTokens)
	}
}

func TestToolIDsAreUnique(t *testing.T) {
	srv := New(Script{Rules: []Rule{{Name: "t", Replies: []Reply{{ToolCalls: []ToolCall{{Name: "Bash"}, {Name: "Read"}}}}}}})
	seen := map[string]bool{}
	for range 3 {
		sv := post(t, srv, `{"model":"m","messages":[]}`, nil)
		if len(sv.ToolIDs) != 2 {
			t.Fatalf("tool ids %v", sv.ToolIDs)
		}
		for _, id := range sv.ToolIDs {
			if seen[id] {
				t.Errorf("tool id %s served twice", id)
			}
			seen[id] = true
		}
	}
}

func TestMatchers(t *testing.T) {
	const tools = `"tools":[{"name":"Bash"},{"name":"Agent"}]`
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		want   map[string]bool
	}{
		{
			name: "human prompt",
			body: `{"model":"m",` + tools + `,"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"do it"}]},{"role":"system","content":"env"}]}`,
			want: map[string]bool{},
		},
		{
			name: "title",
			body: `{"model":"haiku","tools":[],"output_config":{"format":{"type":"json_schema"}},"messages":[{"role":"user","content":"<session>hi</session>"}]}`,
			want: map[string]bool{"title": true, "side": true},
		},
		{
			name: "session wrapper without schema",
			body: `{"model":"haiku","messages":[{"role":"user","content":"<session>hi</session>"}]}`,
			want: map[string]bool{"title": true, "side": true},
		},
		{
			name: "tool results",
			body: `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"no"}]}]}]}`,
			want: map[string]bool{"results": true},
		},
		{
			name:   "subagent by header",
			body:   `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"go"}]}`,
			header: map[string]string{"X-Claude-Code-Agent-Id": "a123"},
			want:   map[string]bool{"subagent": true},
		},
		{
			name: "subagent by billing header",
			body: `{"model":"m",` + tools + `,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.328; cc_is_subagent=true;"}],"messages":[{"role":"user","content":"go"}]}`,
			want: map[string]bool{"subagent": true},
		},
		{
			name: "compaction",
			body: `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."}]}`,
			want: map[string]bool{"compaction": true},
		},
		{
			name: "task notification",
			body: `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"<system-reminder>\n<task-notification>\n<task-id>a1</task-id></task-notification></system-reminder>"}]}]}`,
			want: map[string]bool{"notification": true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(tc.body))
			for k, v := range tc.header {
				hr.Header.Set(k, v)
			}
			r := &Request{Header: hr.Header, Body: []byte(tc.body)}
			if err := r.decodeBody(); err != nil {
				t.Fatalf("decodeBody: %v", err)
			}
			for name, m := range map[string]Matcher{
				"title": IsTitle, "side": IsSide, "subagent": IsSubagent, "compaction": IsCompaction,
				"results": HasToolResults, "notification": IsTaskNotification,
			} {
				if got := m(r); got != tc.want[name] {
					t.Errorf("%s = %v, want %v", name, got, tc.want[name])
				}
			}
		})
	}
}

func TestScenarioNames(t *testing.T) {
	names := ScenarioNames()
	for _, want := range []string{
		"compaction", "interactive", "midstream_error", "parallel_tools", "retry_529", "side_request",
		"slow_pings", "subagent", "subagent_background", "tool_roundtrip",
		"auto_compaction", "interrupted", "plan_mode", "sdk_tool_loop", "ratelimit",
		"slow_tool", "billing", "web_search", "web_search_pause", "web_fetch", "subagent_web_search",
		"cache_model_change", "cache_tools_change", "long_session",
	} {
		s, err := Scenario(want)
		if err != nil {
			t.Errorf("Scenario(%q): %v", want, err)
			continue
		}
		if s.Name != want || len(s.Rules) == 0 {
			t.Errorf("Scenario(%q) = %+v", want, s)
		}
	}
	if len(names) != 28 {
		t.Errorf("ScenarioNames() = %v", names)
	}
	if _, err := Scenario("nope"); err == nil {
		t.Error("unknown scenario gave no error")
	}
}
