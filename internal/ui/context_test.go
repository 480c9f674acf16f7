package ui

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
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
	for _, want := range []string{`id="parts"`, "tool results: Bash", "Appended: earlier answers&#39; text (35 B), tool calls: Bash (46 B), tool results: Bash (", "Everything the previous request carried came again unchanged."} {
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
