package e2e

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// updateDocs makes TestDemo write the README's picture of the turns page.
var updateDocs = flag.Bool("update-docs", false, "write docs/turns-page.png from TestDemo's screenshot of a turn")

// docsScreenshot is the README's picture of the turns page, relative to this package.
const docsScreenshot = "../docs/turns-page.png"

// TestDemo runs `cctrace demo` as the README says, exporting to a real Jaeger: the recorded
// sessions must land there as turn traces, subagent, retries and compaction included; the
// turns page must show them in a real Chromium, a turn reached from the sessions page by
// clicking; and Ctrl-C must end it cleanly with the session summaries. The screenshot of the
// subagent turn is the README's picture (-update-docs).
func TestDemo(t *testing.T) {
	chromium := chromiumBin(t)
	artifacts := artifactsDir(t)
	jaeger := harness.StartJaeger(t)
	const demoService = "cctrace-e2e-demo"
	demo := harness.Start(t, "cctrace-demo", append(cleanEnv(),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint(), "OTEL_SERVICE_NAME="+demoService),
		cctraceBin, "demo", "--trace-ui-url", jaeger.QueryURL())
	harness.Eventually(t, "the demo to replay its sessions", func() error {
		select {
		case <-demo.Exited():
			return errors.New("the demo exited")
		default:
		}
		if !strings.Contains(demo.Output(), "Press Ctrl-C to stop") {
			return errors.New("not replayed yet")
		}
		return nil
	})
	out := demo.Output()
	m := regexp.MustCompile(`turns page  (http://127\.0\.0\.1:\d+)/\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo names no turns page:\n%s", out)
	}
	page := m[1]
	if !strings.Contains(out, "traces      exported over OTLP to "+jaeger.OTLPEndpoint()) {
		t.Errorf("the demo does not say where its traces go:\n%s", out)
	}

	t.Run("traces in jaeger", func(t *testing.T) {
		traces := jaeger.WaitTraces(t, demoService, 5)
		var roots, subagents, compactions, retried int
		for _, tr := range traces {
			if root, ok := tr.Root(); ok && root.OperationName == "invoke_agent claude-code" {
				roots++
			}
			subagents += len(tr.SpansNamed("invoke_agent general-purpose"))
			for _, sp := range tr.Spans {
				if sp.Tags["cctrace.request.kind"] == "compaction" {
					compactions++
				}
				if a, ok := sp.Tags["cctrace.retry.attempt"].(int64); ok && a > 0 {
					retried++
				}
			}
		}
		if roots != 5 || subagents != 1 || compactions != 1 || retried != 2 {
			t.Errorf("jaeger holds %d turn traces, %d subagents, %d compaction requests, %d retries; want 5, 1, 1, 2", roots, subagents, compactions, retried)
		}
	})

	t.Run("turns page in chromium", func(t *testing.T) {
		browser := newBrowser(t, chromium)
		do(t, browser, "open the sessions page", chromedp.Navigate(page+"/"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
		rows := run(t, browser, "count the sessions", chromedp.Evaluate[int](`document.querySelectorAll("#sessions tbody tr").length`))
		if rows != 4 {
			t.Errorf("%d sessions on the page, want 4", rows)
		}
		// The subagent session: the one with a turn of 4 requests and 2 tool calls.
		link := run(t, browser, "find the subagent session", chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#sessions tbody tr"))
			.filter(r => r.children[4].textContent.trim() === "4" && r.children[5].textContent.trim() === "2")
			.map(r => r.querySelector("a").getAttribute("href"))[0] || ""`))
		if link == "" {
			t.Fatal("no session of 4 requests and 2 tool calls on the sessions page")
		}
		do(t, browser, "open the session", chromedp.Click(chromedp.CSS(`#sessions a[href="`+link+`"]`)), chromedp.WaitVisible(chromedp.CSS("#turns")))
		trace := run(t, browser, "read the trace link", chromedp.AttributeValue(chromedp.CSS(`#turns a.ext`), "href"))
		if !strings.HasPrefix(trace.Value, jaeger.QueryURL()+"/trace/") {
			t.Errorf("trace link %q does not lead to the demo's Jaeger", trace.Value)
		}
		do(t, browser, "open the turn", chromedp.Click(chromedp.CSS(`#turns a[href^="/turns/"]`)), chromedp.WaitVisible(chromedp.CSS("#waterfall .wf-row")))
		kinds := run(t, browser, "read the waterfall", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#waterfall .wf-row")).map(r => r.dataset.kind)`))
		if want := []string{"turn", "chat", "tool", "subagent", "chat", "tool", "chat", "chat"}; !slices.Equal(kinds, want) {
			t.Errorf("waterfall rows %q, want %q", kinds, want)
		}
		shot := filepath.Join(artifacts, "turn-demo.png")
		screenshot(t, browser, shot)
		if *updateDocs {
			copyScreenshot(t, shot, docsScreenshot)
		}
	})

	if err := demo.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-demo.Exited()
	if err := demo.Err(); err != nil {
		t.Errorf("the demo ended with %v after Ctrl-C", err)
	}
	if n := strings.Count(demo.Output(), "cctrace session "); n < 4 {
		t.Errorf("%d session summary lines, want at least 4:\n%s", n, demo.Output())
	}
}

// copyScreenshot copies the screenshot shot to the docs' picture dest (-update-docs).
func copyScreenshot(t *testing.T, shot, dest string) {
	t.Helper()
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dest, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", dest)
}
