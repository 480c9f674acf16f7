package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestSessionsPageSoloAndTeam looks at the sessions page in Chromium twice, after real Claude
// Code sessions with API keys: on a cctrace nobody set up for a team it shows no person and no
// spend (one person's key fingerprint is nobody's name); on a cctrace with a directory and
// budgets it shows who each session is from and what people and teams spent. Both pages are
// kept as screenshots.
func TestSessionsPageSoloAndTeam(t *testing.T) {
	chromium := chromiumBin(t)
	claudeBin := harness.Claude(t)
	artifacts := artifactsDir(t)
	browser := newBrowser(t, chromium)

	dir := t.TempDir()
	directory := filepath.Join(dir, "directory.yaml")
	budgets := filepath.Join(dir, "budgets.yaml")
	for path, text := range map[string]string{
		directory: "people:\n  - name: alice\n    team: platform\n    identities: [alice]\n",
		budgets:   "people:\n  alice: {daily: 20, monthly: 300}\nteams:\n  platform: {daily: 100}\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// pageView is what sessionsPage reads of the page: the table's column headings, the person
	// cells, which spend tables are there and the page's text.
	type pageView struct {
		Headings []string `json:"headings"`
		People   []string `json:"people"`
		Spend    []string `json:"spend"`
		Text     string   `json:"text"`
	}
	// sessionsPage runs sessions through a cctrace serve with args and reads its sessions page.
	sessionsPage := func(t *testing.T, name string, sessions []*session, args ...string) pageView {
		api := &switchableAPI{}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
		go fake.Serve(ln)
		t.Cleanup(func() { fake.Close() })
		cc := startServe(t, "http://"+ln.Addr().String(), args...)
		st := &stack{claudeBin: claudeBin, proxyURL: cc.proxyURL, api: api}
		api.use(t, "tool_roundtrip")
		for _, sess := range sessions {
			if res := st.claude(t, sess, "Run echo hello-from-fakeapi", "--allowedTools", "Bash"); res.IsError {
				t.Fatalf("claude: %s", res.Result)
			}
		}
		do(t, browser, "open the sessions page", chromedp.Navigate(cc.metricsURL+"/"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
		screenshot(t, browser, filepath.Join(artifacts, "sessions-"+name+".png"))
		return run(t, browser, "read the sessions page", chromedp.Evaluate[pageView](`({
			headings: Array.from(document.querySelectorAll("#sessions thead th")).map(th => th.textContent.trim()),
			people: Array.from(document.querySelectorAll("#sessions tbody tr")).flatMap(r => {
				const i = Array.from(document.querySelectorAll("#sessions thead th")).findIndex(th => th.textContent.trim() === "person");
				return i < 0 ? [] : [r.children[i].textContent.trim()];
			}),
			spend: Array.from(document.querySelectorAll("table[id^=spend-]")).map(t => t.id),
			text: document.body.innerText,
		})`))
	}

	t.Run("solo", func(t *testing.T) {
		p := sessionsPage(t, "solo", []*session{newSession(t)})
		if slices.Contains(p.Headings, "person") || len(p.Spend) > 0 || strings.Contains(p.Text, "Spend") || strings.Contains(p.Text, "key-") {
			t.Errorf("one person's sessions page shows people or spend: headings %q, spend tables %q\n%s", p.Headings, p.Spend, p.Text)
		}
	})

	t.Run("team", func(t *testing.T) {
		alice, bob := newSession(t), newSession(t)
		alice.env = []string{"ANTHROPIC_API_KEY=" + aliceKey, "ANTHROPIC_CUSTOM_HEADERS=X-Cctrace-User: alice"}
		bob.env = []string{"ANTHROPIC_API_KEY=" + bobKey}
		p := sessionsPage(t, "team", []*session{alice, bob}, "--directory", directory, "--budgets", budgets)
		if !slices.Contains(p.Headings, "person") || !slices.Equal(p.Spend, []string{"spend-people", "spend-teams"}) {
			t.Errorf("a team's sessions page lacks people or spend: headings %q, spend tables %q", p.Headings, p.Spend)
		}
		slices.Sort(p.People)
		if len(p.People) != 2 || p.People[0] != "alice platform" || !strings.HasPrefix(p.People[1], "key-") {
			t.Errorf("person cells %q, want alice of platform and bob's key fingerprint", p.People)
		}
		for _, want := range []string{"of $20.00", "of $100.00"} {
			if !strings.Contains(p.Text, want) {
				t.Errorf("the spend tables lack the budget %q:\n%s", want, p.Text)
			}
		}
	})
}
