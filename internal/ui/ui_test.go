package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/metrics"
	"github.com/cctrace/cctrace/summary"
)

// storeOf replays recorded Claude Code sessions from testdata/claude-code into a store.
func storeOf(t *testing.T, scenarios ...string) *summary.Store {
	t.Helper()
	store := summary.New()
	var seed uint64
	tr := instrument.New(store, instrument.WithIDSource(func() uint64 { seed++; return seed }),
		instrument.WithPricing(metrics.DefaultPrices().Cost))
	var last time.Time
	for _, name := range scenarios {
		exchanges, err := replay.Load(filepath.Join("..", "..", "testdata", "claude-code", name))
		if err != nil {
			t.Fatal(err)
		}
		replay.Play(tr, exchanges)
		last = exchanges[len(exchanges)-1].Response.End
	}
	tr.Tick(last.Add(time.Minute))
	return store
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body := rec.Body.String()
	if strings.Contains(body, "ZgotmplZ") {
		t.Errorf("GET %s: html/template rejected a value:\n%s", path, body)
	}
	return rec.Code, body
}

var (
	rowRE  = regexp.MustCompile(`<div class="wf-row ([^"]*)" data-kind="(\w+)" data-span="\w+" title="([^"]*)">\s*<div class="wf-name" style="padding-left:([\d.]+)em">`)
	hrefRE = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
)

// TestPages walks from the sessions page to a session's turns to the waterfall of a turn with a
// subagent, as a person would, following the links the pages give.
func TestPages(t *testing.T) {
	store := storeOf(t, "subagent", "retry_529")
	jaeger, err := ParseTraceUI("http://127.0.0.1:16686/")
	if err != nil {
		t.Fatal(err)
	}
	h := New(store, WithTraceUI(jaeger))

	code, body := get(t, h, "/")
	if code != http.StatusOK || !strings.Contains(body, `data-poll="1"`) {
		t.Fatalf("GET / = %d:\n%s", code, body)
	}
	for _, want := range []string{">488d20f6<", ">e92fbde9<", "(2 retried)"} {
		if !strings.Contains(body, want) {
			t.Errorf("sessions page lacks %q", want)
		}
	}
	sessionPath := "/sessions/488d20f6-3b70-45b7-b396-7a7317412c43"
	if !strings.Contains(body, `href="`+sessionPath+`"`) {
		t.Fatalf("sessions page does not link %s:\n%s", sessionPath, body)
	}

	code, body = get(t, h, sessionPath)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", sessionPath, code)
	}
	turn, _ := store.TurnsWhere(summary.Filter{Session: "488d20f6-3b70-45b7-b396-7a7317412c43"})[0], 0
	for _, want := range []string{
		`href="/turns/` + turn.TraceID + `"`,
		`href="http://127.0.0.1:16686/trace/` + turn.TraceID + `"`,
		"Agent×1 Bash×1", "1 subagent", "end_turn",
		"Messages: 2 prompts, 2 rounds of tool results · answers: 2 with text, 1 with tool calls, 1 with text and tool calls",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}

	code, body = get(t, h, "/turns/"+turn.TraceID)
	if code != http.StatusOK || !strings.Contains(body, `data-poll="0"`) || !strings.Contains(body, "open in Jaeger") {
		t.Fatalf("GET turn = %d:\n%s", code, body)
	}
	// The tree of the recorded subagent turn (see testdata/claude-code/subagent/want.tree).
	want := []string{
		"turn invoke_agent claude-code 0.6",
		"chat chat claude-opus-5-5 1.8",
		"tool execute_tool Agent 1.8",
		"subagent invoke_agent general-purpose 3.0",
		"chat chat claude-opus-5-5 4.2",
		"tool execute_tool Bash 4.2",
		"chat chat claude-opus-5-5 4.2",
		"chat chat claude-opus-5-5 1.8",
	}
	var got []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		got = append(got, m[2]+" "+m[3]+" "+m[4])
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("waterfall rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := strings.Count(body, `class="wf-n">$`); n != 4 {
		t.Errorf("%d spans show a cost, want the 4 chat spans", n)
	}

	// Nothing on any page comes from elsewhere: the page works offline.
	for _, page := range []string{"/", sessionPath, "/turns/" + turn.TraceID} {
		_, body := get(t, h, page)
		for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
			if u := m[1]; !strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "http://127.0.0.1:16686/trace/") {
				t.Errorf("%s refers to %q", page, u)
			}
		}
	}
}

func TestRetriesOnWaterfall(t *testing.T) {
	store := storeOf(t, "retry_529")
	turn := store.TurnsWhere(summary.Filter{})[0]
	_, body := get(t, New(store), "/turns/"+turn.TraceID)
	var classes []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		classes = append(classes, m[1])
	}
	want := []string{"k-turn", "k-chat failed", "k-chat failed retry", "k-chat retry"}
	if strings.Join(classes, ",") != strings.Join(want, ",") {
		t.Errorf("row classes %q, want %q", classes, want)
	}
	if !strings.Contains(body, "retry 2") || !strings.Contains(body, "overloaded_error") {
		t.Errorf("retries or their error not shown:\n%s", body)
	}
	if strings.Contains(body, "open in") {
		t.Error("a trace link without --trace-ui-url")
	}
}

// TestRunningTurn checks that a running turn is marked live, its running span reaches to now,
// and the page asks the script to keep refreshing.
func TestRunningTurn(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Second)
	clock := func() time.Time { return now }
	store := summary.New(summary.WithClock(clock))
	turn := &instrument.Span{TraceID: instrument.TraceID{7}, ID: instrument.SpanID{1}, Kind: instrument.KindTurn,
		Name: "invoke_agent claude-code", Start: t0, SessionID: "live-session", TurnIndex: 3}
	tool := &instrument.Span{TraceID: turn.TraceID, ID: instrument.SpanID{2}, Parent: turn.ID, Kind: instrument.KindTool,
		Name: "execute_tool Bash", Start: t0.Add(5 * time.Second), SessionID: "live-session", TurnIndex: 3, Tool: &instrument.Tool{Name: "Bash"}}
	store.SpanStarted(turn)
	store.SpanStarted(tool)
	h := New(store, WithClock(clock))

	_, body := get(t, h, "/")
	if !strings.Contains(body, `data-live="1"`) || !strings.Contains(body, `class="session live"`) {
		t.Errorf("sessions page does not show the live session:\n%s", body)
	}
	_, body = get(t, h, "/turns/"+turn.TraceID.String())
	for _, want := range []string{`data-poll="1"`, `data-live="1"`, `<div class="wf-row k-tool running"`, `style="left:50.000%;width:50.000%"`, "Turn 3"} {
		if !strings.Contains(body, want) {
			t.Errorf("running turn page lacks %q:\n%s", want, body)
		}
	}
}

// TestJoinedTurnOnWaterfall shows a turn that went into Claude Code's own trace: its root and
// its chat spans run under the client's spans, which cctrace never has; on the waterfall the
// chat spans still sit under the turn.
func TestJoinedTurnOnWaterfall(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	store := summary.New()
	client := instrument.SpanID{0xcc, 1}
	span := func(id byte, parent instrument.SpanID, kind instrument.SpanKind, name string) *instrument.Span {
		return &instrument.Span{TraceID: instrument.TraceID{9}, ID: instrument.SpanID{id}, Parent: parent, ClientParent: parent == client,
			Kind: kind, Name: name, Start: t0.Add(time.Duration(id) * time.Second), SessionID: "joined", TurnIndex: 1}
	}
	turn := span(1, client, instrument.KindTurn, "invoke_agent claude-code")
	chat := span(2, client, instrument.KindChat, "chat claude-opus-5-5")
	chat.Chat = &instrument.Chat{Kind: instrument.RequestTurn}
	tool := span(3, turn.ID, instrument.KindTool, "execute_tool Bash")
	tool.Tool = &instrument.Tool{Name: "Bash"}
	for _, sp := range []*instrument.Span{turn, chat, tool} {
		store.SpanStarted(sp)
	}
	for _, sp := range []*instrument.Span{chat, tool, turn} {
		sp.End = t0.Add(4 * time.Second)
		store.SpanEnded(sp)
	}
	_, body := get(t, New(store), "/turns/"+turn.TraceID.String())
	var got []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		got = append(got, m[2]+" "+m[4])
	}
	if want := []string{"turn 0.6", "chat 1.8", "tool 1.8"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("waterfall rows %q, want %q", got, want)
	}
}

func TestNotFound(t *testing.T) {
	h := New(storeOf(t, "tool_roundtrip"))
	for _, path := range []string{"/nope", "/sessions/unknown-session", "/turns/0123456789abcdef0123456789abcdef"} {
		t.Run(path, func(t *testing.T) {
			code, body := get(t, h, path)
			if code != http.StatusNotFound || !strings.Contains(body, "<h1>Not found</h1>") {
				t.Errorf("GET %s = %d:\n%s", path, code, body)
			}
		})
	}
}

func TestStaticAndHeaders(t *testing.T) {
	srv := httptest.NewServer(New(summary.New()))
	defer srv.Close()
	tests := []struct {
		path, contentType, contains string
	}{
		{"/static/ui.js", "text/javascript", "DOMParser"},
		{"/static/ui.css", "text/css", ".waterfall"},
		{"/", "text/html", "No Claude Code traffic yet"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.contentType) || !strings.Contains(string(b), tt.contains) {
				t.Errorf("GET %s = %d %q:\n%.300s", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
			if strings.Contains(string(b), "https://") || strings.Contains(string(b), "http://") {
				t.Errorf("%s refers to the network:\n%s", tt.path, b)
			}
		})
	}
}

func TestParseTraceUI(t *testing.T) {
	const id = "0af7651916cd43dd8448eb211c80319c"
	tests := []struct {
		raw, name, link, err string
	}{
		{raw: ""},
		{raw: "http://localhost:16686", name: "Jaeger", link: "http://localhost:16686/trace/" + id},
		{raw: "http://jaeger.local/ui/", name: "Jaeger", link: "http://jaeger.local/ui/trace/" + id},
		{raw: "http://localhost:3000/explore", name: "Grafana",
			link: "http://localhost:3000/explore?schemaVersion=1&panes=" + `%7B%22cctrace%22%3A%7B%22datasource%22%3A%22tempo%22%2C%22queries%22%3A%5B%7B%22datasource%22%3A%7B%22type%22%3A%22tempo%22%2C%22uid%22%3A%22tempo%22%7D%2C%22query%22%3A%22` + id + `%22%2C%22queryType%22%3A%22traceql%22%2C%22refId%22%3A%22A%22%7D%5D%2C%22range%22%3A%7B%22from%22%3A%22now-7d%22%2C%22to%22%3A%22now%22%7D%7D%7D`},
		{raw: "https://traces.example/t?id={trace_id}&x=1", name: "trace UI", link: "https://traces.example/t?id=" + id + "&x=1"},
		{raw: "localhost:16686", err: "invalid --trace-ui-url"},
		{raw: "ftp://x/", err: "invalid --trace-ui-url"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			ui, err := ParseTraceUI(tt.raw)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ui.Name() != tt.name || ui.Link(id) != tt.link {
				t.Errorf("Name %q Link %q, want %q %q", ui.Name(), ui.Link(id), tt.name, tt.link)
			}
		})
	}
}
