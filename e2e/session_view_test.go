package e2e

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// sessionScreenshot is docs/turns.md's picture of a session's context (-update-docs).
const sessionScreenshot = "../docs/session-context.png"

// TestSessionViewInChromium sends two recorded Claude Code sessions through a cctrace serve
// process, a long one (three turns of eight tool calls) and one with a /compact, and looks at
// their session pages in a real headless Chromium: the context chart has a bar per request of the
// main agent, its turns and compaction marked, every bar drawn inside the chart, and a click on a
// bar opens that request's anatomy and what was new in it. Screenshots are kept.
func TestSessionViewInChromium(t *testing.T) {
	chromium := chromiumBin(t)
	artifacts := artifactsDir(t)

	api := &switchableAPI{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })
	cc := startServe(t, "http://"+ln.Addr().String())
	browser := newBrowser(t, chromium)

	for _, tc := range []struct {
		scenario, session string
		bars, turns       int
		compaction        bool
	}{
		{"long_session", "e2e0c0de-0000-4000-8000-000000000001", 27, 3, false},
		{"compaction", "e2e0c0de-0000-4000-8000-000000000002", 0, 0, true},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			api.use(t, tc.scenario)
			exchanges, err := replay.Load(filepath.Join("..", "testdata", "claude-code", tc.scenario))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), harness.Patience)
			defer cancel()
			if err := replay.Send(ctx, cc.proxyURL, exchanges, replay.WithMaxGap(50*time.Millisecond), replay.WithSessionID(tc.session)); err != nil {
				t.Fatal(err)
			}

			do(t, browser, "open the session", chromedp.Navigate(cc.metricsURL+"/sessions/"+tc.session))
			// The tracker may still be ending the last turn: the page refreshes itself until then.
			do(t, browser, "see the chart", chromedp.Poll[chromedp.Void](`document.querySelector("#context-chart a.req") !== null && document.body.dataset.live === "0"`,
				chromedp.WithPollingTimeout(harness.Patience)))
			do(t, browser, "load the page again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#context-chart")))
			type bars struct {
				Bars, Turns, Compactions int
				Outside                  []string
			}
			got := run(t, browser, "read the chart", chromedp.Evaluate[bars](`(() => {
				const svg = document.querySelector("#context-chart"), box = svg.getBoundingClientRect();
				const reqs = Array.from(svg.querySelectorAll("a.req"));
				const outside = [];
				for (const r of svg.querySelectorAll("a.req rect")) {
					const b = r.getBoundingClientRect();
					if (b.height <= 0 || b.top < box.top - 1 || b.bottom > box.bottom + 1 || b.left < box.left - 1 || b.right > box.right + 1) outside.push(r.closest("a").getAttribute("href"));
				}
				return {Bars: reqs.length, Turns: reqs.filter(a => a.dataset.turn !== "0").length,
					Compactions: reqs.filter(a => a.dataset.compaction === "1").length, Outside: outside};
			})()`))
			if len(got.Outside) > 0 {
				t.Errorf("bars drawn outside the chart: %q", got.Outside)
			}
			if tc.bars > 0 && (got.Bars != tc.bars || got.Turns != tc.turns) {
				t.Errorf("%d bars, %d turns marked; want %d and %d", got.Bars, got.Turns, tc.bars, tc.turns)
			}
			if tc.compaction && got.Compactions == 0 {
				t.Errorf("no compaction marked among %d bars", got.Bars)
			}
			legend := run(t, browser, "read the legend", chromedp.Text(chromedp.CSS(".legend")))
			for _, want := range []string{"system prompt", "built-in tool definitions", "typed by a person"} {
				if !strings.Contains(legend, want) {
					t.Errorf("legend lacks %q: %s", want, legend)
				}
			}
			shot := filepath.Join(artifacts, "session-context-"+tc.scenario+".png")
			screenshot(t, browser, shot)
			if *updateDocs && tc.scenario == "long_session" {
				copyScreenshot(t, shot, sessionScreenshot)
			}

			// The last request of the session: what filled it, and what it added.
			do(t, browser, "open the last request", chromedp.Evaluate[chromedp.Void](`(() => { const a = document.querySelectorAll("#context-chart a.req"); location.href = a[a.length - 1].getAttribute("href"); })()`),
				chromedp.WaitVisible(chromedp.CSS("#parts")))
			parts := run(t, browser, "read the parts", chromedp.Text(chromedp.CSS("#parts")))
			news := run(t, browser, "read what is new", chromedp.Text(chromedp.CSS("#new")))
			for _, want := range []string{"system prompt", "all input", "100%"} {
				if !strings.Contains(parts, want) {
					t.Errorf("request parts lack %q:\n%s", want, parts)
				}
			}
			if !strings.Contains(news, "Appended: ") {
				t.Errorf("what is new says nothing appended:\n%s", news)
			}
			screenshot(t, browser, filepath.Join(artifacts, "request-"+tc.scenario+".png"))
		})
	}
}
