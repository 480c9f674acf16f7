package ui

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/summary"
)

// The session's context chart: one bar per request of the main agent, its height the request's
// whole input, stacked by part in prompt order; beside it a strip of how the API read that input
// (from the cache, written to it, uncached). A dashed line starts each turn, and a compaction's
// requests are marked. Inline SVG, drawn on the server: the page loads nothing.

// Sizes of the chart, in SVG user units (pixels at 100%).
const (
	chartHeight = 180 // of the bars' area
	chartTop    = 16  // room for turn labels above it
	chartLeft   = 48  // room for the axis labels
	barWidth    = 10
	stripWidth  = 3
	barStep     = 16 // from one bar to the next
)

type contextChart struct {
	Width, Height int
	// The geometry the template draws with: the bars' and strips' widths, where the axis
	// labels end, and the top and bottom of the bars' area.
	BarW, StripW, AxisX, Top, Bottom int
	Bars                             []chartBar
	Ticks                            []chartTick
	Legend                           []legendItem
	// Requests counts the bars; Subagents the subagents' requests left out of the chart.
	Requests, Subagents int
}

type chartBar struct {
	X, StripX  int
	Parts      []chartSeg
	Cache      []chartSeg
	Href       string
	Title      string
	Compaction bool
	Miss       string // the cause of a cache miss, "" for none
	// Turn is the turn index when the bar is the first of its turn, 0 otherwise; Label is
	// "#index" when there is room to write it.
	Turn  int
	Label string
}

type chartSeg struct {
	Y, H  float64
	Class string
}

type chartTick struct {
	Y     float64
	Label string
}

type legendItem struct {
	Class, Label string
}

// partGroups are the colours of the chart: a part kind each, in prompt order.
var partGroups = []wire.PartKind{
	wire.PartBuiltinTools, wire.PartMCPTools, wire.PartDeferredTools,
	wire.PartBillingHeader, wire.PartIdentity, wire.PartSystemPrompt, wire.PartAppendedPrompt,
	wire.PartSystemMessage, wire.PartClient, wire.PartHuman, wire.PartAssistantText, wire.PartThinking,
	wire.PartToolUse, wire.PartToolResult, wire.PartImage, wire.PartDocument, wire.PartOther,
}

// sideRequests are the request kinds that are not the main conversation: their context is
// another prompt's.
var sideRequests = []string{"auxiliary", "count_tokens", "tool", "other"}

// chartOf draws the context chart of a session's turns (newest first, as the store gives them).
func chartOf(turns []summary.Turn) *contextChart {
	type req struct {
		turn  *summary.Turn
		rec   *summary.Record
		first bool
	}
	var reqs []req
	subagents := 0
	for i := len(turns) - 1; i >= 0; i-- {
		t := &turns[i]
		first := true
		main := "" // the main agent's name, as the turn's root span carries it
		if len(t.Spans) > 0 {
			main = t.Spans[0].Agent
		}
		for _, r := range t.Spans {
			if r.Kind != "chat" || r.Anatomy == nil || slices.Contains(sideRequests, r.Request) {
				continue
			}
			if r.Agent != main {
				subagents++
				continue
			}
			reqs = append(reqs, req{turn: t, rec: r, first: first && t.Root == "turn"})
			first = false
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	peak := 1
	for _, q := range reqs {
		peak = max(peak, q.rec.Anatomy.Total())
	}
	scale := niceCeil(peak)
	c := &contextChart{
		Width:     chartLeft + len(reqs)*barStep + 8,
		Height:    chartTop + chartHeight + 4,
		BarW:      barWidth,
		StripW:    stripWidth,
		AxisX:     chartLeft - 4,
		Top:       chartTop,
		Bottom:    chartTop + chartHeight,
		Requests:  len(reqs),
		Subagents: subagents,
	}
	for i := 0; i <= 4; i++ {
		v := scale * i / 4
		c.Ticks = append(c.Ticks, chartTick{Y: y(v, scale), Label: summary.Count(v)})
	}
	used := map[wire.PartKind]bool{}
	labelled := -barStep * 2 // where the last turn label went: labels of one-request turns would overlap
	for i, q := range reqs {
		a := q.rec.Anatomy
		x := chartLeft + i*barStep
		b := chartBar{X: x, StripX: x + barWidth, Href: "/turns/" + q.turn.TraceID + "/requests/" + q.rec.SpanID,
			Compaction: q.rec.Compaction != "" || q.rec.Request == "compaction", Miss: a.CacheMiss}
		if q.first {
			b.Turn = q.turn.Index
			if x-labelled >= 2*barStep {
				b.Label = "#" + strconv.Itoa(q.turn.Index)
				labelled = x
			}
		}
		// Stacked in prompt order from the bottom: what the cache reads first at the base.
		total := 0
		for _, p := range a.Parts {
			n := p.Tokens()
			if n == 0 {
				continue
			}
			kind := wire.PartKind(p.Kind)
			used[kind] = true
			b.Parts = append(b.Parts, chartSeg{Y: y(total+n, scale), H: y(total, scale) - y(total+n, scale), Class: "p-" + p.Kind})
			total += n
		}
		var read, write, uncached int
		for _, p := range a.Parts {
			read, write, uncached = read+p.Read, write+p.Write, uncached+p.Uncached
		}
		at := 0
		for _, s := range []struct {
			n     int
			class string
		}{{read, "c-read"}, {write, "c-write"}, {uncached, "c-uncached"}} {
			if s.n > 0 {
				b.Cache = append(b.Cache, chartSeg{Y: y(at+s.n, scale), H: y(at, scale) - y(at+s.n, scale), Class: s.class})
				at += s.n
			}
		}
		b.Title = fmt.Sprintf("turn %d, request %d: %s input tokens (%s read from the cache, %s written, %s uncached)",
			q.turn.Index, i+1, summary.Count(total), summary.Count(read), summary.Count(write), summary.Count(uncached))
		if b.Miss != "" {
			b.Title += "; cache miss: " + b.Miss
		}
		c.Bars = append(c.Bars, b)
	}
	for _, k := range partGroups {
		if used[k] {
			c.Legend = append(c.Legend, legendItem{Class: "p-" + string(k), Label: summary.PartLabel(string(k), "")})
		}
	}
	return c
}

// y places v tokens on the chart's vertical axis, scale at the top.
func y(v, scale int) float64 {
	return float64(chartTop) + float64(chartHeight)*(1-float64(v)/float64(scale))
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten, a round top for the axis.
func niceCeil(n int) int {
	p := 1
	for p*10 <= n {
		p *= 10
	}
	for _, m := range []int{1, 2, 5, 10} {
		if m*p >= n {
			return m * p
		}
	}
	return 10 * p
}

// requestRow is one part of a request, as the request view lists it.
type requestRow struct {
	summary.AnatomyPart
	Share string
}

// requestView is what the request page shows of one chat span.
type requestView struct {
	Turn     turnRow
	Record   *summary.Record
	Anatomy  *summary.Anatomy
	Rows     []requestRow
	Total    int
	New      []summary.AnatomyPart
	NewBytes int
}

func (h *Handler) request(w http.ResponseWriter, r *http.Request) {
	t, ok := h.findTurn(r)
	if !ok {
		h.render(w, http.StatusNotFound, "notfound", page{Title: "not found", Message: "No such turn: it is not among the turns cctrace keeps."})
		return
	}
	var rec *summary.Record
	for _, s := range t.Spans {
		if s.SpanID == r.PathValue("span") && s.Kind == "chat" {
			rec = s
		}
	}
	if rec == nil || rec.Anatomy == nil {
		h.render(w, http.StatusNotFound, "notfound", page{Title: "not found", Message: "No such request with an anatomy in this turn: it got no answer with usage, or it is not kept."})
		return
	}
	a := rec.Anatomy
	v := &requestView{Turn: h.turnRow(t), Record: rec, Anatomy: a, Total: a.Total(), New: a.New}
	for _, p := range a.Parts {
		share := "–"
		if v.Total > 0 {
			share = summary.Percent(float64(p.Tokens()) / float64(v.Total))
		}
		v.Rows = append(v.Rows, requestRow{AnatomyPart: p, Share: share})
	}
	for _, p := range a.New {
		v.NewBytes += p.Bytes
	}
	p := page{Title: fmt.Sprintf("request · turn %d · session %s", t.Index, summary.ShortID(t.SessionID)), Now: h.now(), Request: v}
	h.render(w, http.StatusOK, "request", p)
}

// kilobytes writes a size for the request view: 812 B, 14.2 KB.
func kilobytes(n int) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1000), ".0") + " KB"
}
