package ui

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/cctrace/cctrace/summary"
)

var barRE = regexp.MustCompile(`<a class="req" href="(/turns/\w+/requests/\w+)" data-turn="(\d+)"([^>]*)>`)

// TestContextChart draws the long recorded session: a bar per main-agent request, three turns
// marked, and each bar's request view lists its parts adding up to its input and says what was
// new; the session with the model change shows its cache miss.
func TestContextChart(t *testing.T) {
	store := storeOf(t, "long_session", "cache_model_change")
	h := New(store)
	sessions := map[string]string{}
	for _, s := range store.Sessions() {
		if s.Turns == 3 {
			sessions["long"] = s.ID
		} else {
			sessions["model"] = s.ID
		}
	}

	// The sessions page says which model each session used.
	if _, body := get(t, h, "/"); !strings.Contains(body, `<span class="dim">claude-opus-5-5, claude-sonnet-4-5</span>`) {
		t.Errorf("sessions page does not name the models:\n%s", body)
	}

	code, body := get(t, h, "/sessions/"+sessions["long"])
	if code != http.StatusOK || !strings.Contains(body, `id="context-chart"`) {
		t.Fatalf("GET session = %d, no chart:\n%s", code, body)
	}
	bars := barRE.FindAllStringSubmatch(body, -1)
	turns := 0
	for _, b := range bars {
		if b[2] != "0" {
			turns++
		}
	}
	// Three turns of eight tool calls and a final answer each.
	if len(bars) != 27 || turns != 3 {
		t.Fatalf("%d bars, %d turn starts; want 27 and 3", len(bars), turns)
	}
	for _, want := range []string{"tool results", "system prompt", "built-in tool definitions", `class="c-read"`, `class="c-write"`} {
		if !strings.Contains(body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}

	code, body = get(t, h, bars[len(bars)-2][1])
	if code != http.StatusOK {
		t.Fatalf("GET request = %d:\n%s", code, body)
	}
	for _, want := range []string{`id="parts"`, "tool results: Bash", "system[1] (5m), system[2] (5m), messages[51].content[0] (5m)", "Appended: earlier answers&#39; text (35 B), tool calls: Bash (46 B), tool results: Bash (", "Everything the previous request carried came again unchanged."} {
		if !strings.Contains(body, want) {
			t.Errorf("request page lacks %q", want)
		}
	}

	_, body = get(t, h, "/sessions/"+sessions["model"])
	bars = barRE.FindAllStringSubmatch(body, -1)
	if len(bars) != 2 || !strings.Contains(bars[1][3], `data-miss="model"`) {
		t.Fatalf("model change session bars %v", bars)
	}
	_, body = get(t, h, bars[1][1])
	for _, want := range []string{"cache miss: model", "The model changed from claude-opus-5-5 to claude-sonnet-4-5.", "The cache missed (model"} {
		if !strings.Contains(body, want) {
			t.Errorf("request page after the model change lacks %q", want)
		}
	}
	if code, _ := get(t, h, strings.Replace(bars[1][1], "/requests/", "/requests/0", 1)); code != http.StatusNotFound {
		t.Errorf("an unknown request: %d", code)
	}
}

// TestSubagentOwnTotals: a subagent's row of the waterfall shows its own requests' tokens and
// cost, apart from the turn's.
func TestSubagentOwnTotals(t *testing.T) {
	store := storeOf(t, "subagent")
	h := New(store)
	turn := store.TurnsWhere(summary.Filter{})[0]
	_, body := get(t, h, "/turns/"+turn.TraceID)
	for _, row := range strings.Split(body, `<div class="wf-row `)[1:] {
		if !strings.Contains(row, `data-kind="subagent"`) {
			continue
		}
		if !regexp.MustCompile(`class="own" title="the subagent.s own requests: input [\d.k]+`).MatchString(row) || !strings.Contains(row, `<span class="own">· $0.`) {
			t.Errorf("subagent row without its own tokens and cost:\n%s", row)
		}
		return
	}
	t.Fatal("no subagent row")
}
