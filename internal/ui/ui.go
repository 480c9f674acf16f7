// Package ui is the built-in turns page: server-rendered HTML on the metrics listener that shows
// the sessions cctrace has seen, the turns of a session, and one turn as a waterfall of its spans,
// from the summary.Store and nothing else. It needs no backend, loads nothing from the network,
// and its only script (static/ui.js) refreshes the page while turns are running.
package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/history"
	"github.com/cctrace/cctrace/summary"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the turns page:
//
//	GET /                    the sessions
//	GET /sessions/{id}       the turns of one session ("-" for requests without a session id)
//	GET /turns/{trace_id}    one turn as a waterfall of its spans
//	GET /turns/{trace_id}/requests/{span_id}
//	                         one request: what filled its input, and what was new in it
//	GET /static/…            the page's stylesheet and script
//
// Mount it at "/" of the metrics listener; paths it does not know get a 404 page. The zero value
// is not usable; call New.
type Handler struct {
	store   *summary.Store
	traceUI TraceUI
	now     func() time.Time
	log     *slog.Logger
	people  func() bool
	history func() *history.DB // nil: memory only (WithHistory)
	pages   map[string]*template.Template
	mux     *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option func(*Handler)

// WithTraceUI links every turn to its trace in Jaeger or Grafana. Default: no links.
func WithTraceUI(t TraceUI) Option { return func(h *Handler) { h.traceUI = t } }

// WithClock sets the clock that places running spans. Default: time.Now.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithLogger sets where rendering errors are logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithPeople shows who each session and turn is from, and what people and teams spent, only
// while people reports true: a cctrace used by one person has no one to tell apart, and the
// fingerprint of their key would only be noise. Default: always shown.
func WithPeople(people func() bool) Option { return func(h *Handler) { h.people = people } }

// New returns the handler of the turns page of store.
func New(store *summary.Store, opts ...Option) *Handler {
	h := &Handler{store: store, now: time.Now, log: slog.Default(), people: func() bool { return true }, pages: make(map[string]*template.Template)}
	for _, o := range opts {
		o(h)
	}
	for _, name := range []string{"sessions", "session", "turn", "request", "notfound"} {
		h.pages[name] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	static, _ := fs.Sub(staticFS, "static")
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /{$}", h.sessions)
	h.mux.HandleFunc("GET /sessions/{id}", h.session)
	h.mux.HandleFunc("GET /turns/{trace}", h.turn)
	h.mux.HandleFunc("GET /turns/{trace}/requests/{span}", h.request)
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.render(w, http.StatusNotFound, "notfound", page{Title: "not found", Message: "No page at " + r.URL.Path + "."})
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// page is what every template gets.
type page struct {
	Title   string
	Poll    bool // refresh while the page is open: new turns or spans may appear
	Live    bool // something on the page is running
	Now     time.Time
	Message string
	TraceUI string // name of the linked trace UI, "" for none

	// People is true when who each session is from, and the spend of people and teams, are
	// shown (WithPeople).
	People   bool
	Sessions []sessionRow
	// Person, Team, Model and Project are what the sessions page is filtered by (?user=,
	// ?team=, ?model=, ?project=).
	Person, Team, Model, Project string
	// History is true when the page reads the history store too (WithHistory); HistoryError when
	// reading it failed.
	History, HistoryError bool
	// SpendDays and SpendWeeks are the history's spend, the latest first; TopTurns and
	// TopSessions its most expensive.
	SpendDays, SpendWeeks []history.SpendBucket
	TopTurns              []turnRow
	TopSessions           []sessionRow
	// Spend is what the people and teams the viewer may see spent; nil without budgets' ledger.
	Spend   *summary.Spend
	Session *summary.SessionTotals
	// Shares is the session's share of each window of its account's limits, the part of the
	// window's growth its requests caused (docs/limits.md); nil without any.
	Shares map[string]float64
	Turns  []turnRow
	// Chart is the session's context per request; nil when no request has an anatomy.
	Chart *contextChart
	// Request is the request page's request.
	Request *requestView
	Turn    *turnRow
	Spans   []spanRow
	Axis    []axisTick
}

type sessionRow struct {
	summary.SessionTotals
	Path      string
	Live      bool
	KeptTurns int
}

type turnRow struct {
	summary.Turn
	Path  string
	Trace string // link to Jaeger or Grafana, "" without one
	// Shares is the turn's share of each window of its account's limits; nil without any.
	Shares map[string]float64
}

// spanRow is one row of the waterfall.
type spanRow struct {
	*summary.Record
	Depth       int
	Left, Width string // CSS percentages of the bar
	Duration    float64
	Running     bool
	Class       string
}

type axisTick struct {
	Left  string
	Label string
}

func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scope := summary.ScopeFrom(r.Context())
	p := page{Title: "sessions", Poll: true, Now: h.now(), Person: q.Get("user"), Team: q.Get("team"), People: h.people(),
		Model: q.Get("model"), Project: q.Get("project"), History: h.history != nil}
	if sp, ok := h.store.Spend(); ok && p.People {
		sp = scope.Spend(sp)
		p.Spend = &sp
	}
	f, ok := scope.Narrow(summary.Filter{User: p.Person, Team: p.Team})
	if !ok {
		h.render(w, http.StatusOK, "sessions", p)
		return
	}
	live := map[string]bool{}
	kept := map[string]int{}
	turns := h.store.TurnsWhere(f)
	running := runningTotals(turns)
	for _, t := range turns {
		kept[t.SessionID]++
		if t.Running() {
			live[t.SessionID] = true
		}
	}
	for _, s := range h.store.SessionsWhere(f) {
		if s.Requests == 0 && kept[s.ID] == 0 || !picks(s, p.Model, p.Project) {
			continue
		}
		p.Sessions = append(p.Sessions, sessionRow{SessionTotals: s, Path: sessionPath(s.ID), Live: live[s.ID], KeptTurns: kept[s.ID]})
		p.Live = p.Live || live[s.ID]
	}
	if h.history != nil {
		p.Sessions = h.storedSessions(r.Context(), &p, p.Sessions, historyQuery(f, p.Model, p.Project), running)
	}
	h.render(w, http.StatusOK, "sessions", p)
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "-" {
		id = ""
	}
	s, ok := h.store.Session(id)
	scope := summary.ScopeFrom(r.Context())
	f, _ := scope.Narrow(summary.Filter{Session: id})
	turns := h.store.TurnsWhere(f)
	if h.history != nil {
		s, ok = h.storedSession(r.Context(), id, s, ok, runningTotals(turns)[id])
		turns = h.storedTurns(r.Context(), turns, historyQuery(f, "", ""))
	}
	if !ok || !scope.Allows(s.User, s.Team) {
		h.render(w, http.StatusNotFound, "notfound", page{Title: "not found", Message: fmt.Sprintf("No session %q: it was never seen, or cctrace restarted since.", id)})
		return
	}
	p := page{Title: "session " + summary.ShortID(id), Poll: true, Now: h.now(), Session: &s, TraceUI: h.traceUI.Name(), History: h.history != nil}
	var shares history.Shares
	if h.history != nil {
		shares = h.storedShares(r.Context(), id)
		p.Shares = shares.Session
	}
	p.Chart = chartOf(turns)
	for _, t := range turns {
		row := h.turnRow(t)
		row.Shares = shares.Turns[t.TraceID]
		p.Turns = append(p.Turns, row)
		p.Live = p.Live || t.Running()
	}
	h.render(w, http.StatusOK, "session", p)
}

// findTurn returns the turn of the request's {trace}, from memory or else from history, and
// false when neither holds it or the viewer may not see it.
func (h *Handler) findTurn(r *http.Request) (summary.Turn, bool) {
	t, ok := h.store.Turn(r.PathValue("trace"))
	if !ok && h.history != nil {
		db := h.history()
		var err error
		if t, ok, err = db.Turn(r.Context(), r.PathValue("trace")); err != nil {
			h.log.Warn("turns page: reading history", "store", db.Where(), "error", err)
		}
	}
	return t, ok && summary.ScopeFrom(r.Context()).Allows(t.User, t.Team)
}

func (h *Handler) turn(w http.ResponseWriter, r *http.Request) {
	t, ok := h.findTurn(r)
	if !ok {
		h.render(w, http.StatusNotFound, "notfound", page{Title: "not found", Message: "No such turn: it is not among the turns cctrace keeps."})
		return
	}
	now := h.now()
	row := h.turnRow(t)
	p := page{Title: fmt.Sprintf("turn %d · session %s", t.Index, summary.ShortID(t.SessionID)), Now: now, Turn: &row, TraceUI: h.traceUI.Name()}
	p.Spans, p.Axis = waterfall(t, now)
	for _, s := range p.Spans {
		p.Live = p.Live || s.Running
	}
	p.Poll = p.Live
	h.render(w, http.StatusOK, "turn", p)
}

// runningTotals are the totals of the running turns of turns, by session.
func runningTotals(turns []summary.Turn) map[string]*instrument.Totals {
	out := map[string]*instrument.Totals{}
	for i := range turns {
		t := &turns[i]
		if !t.Running() {
			continue
		}
		if out[t.SessionID] == nil {
			out[t.SessionID] = &instrument.Totals{}
		}
		out[t.SessionID].Merge(&t.Totals)
	}
	return out
}

// picks reports whether a session held in memory used model and is of project (each when set).
func picks(s summary.SessionTotals, model, project string) bool {
	return (model == "" || slices.Contains(s.Models, model)) && (project == "" || s.Project == project)
}

func (h *Handler) turnRow(t summary.Turn) turnRow {
	return turnRow{Turn: t, Path: "/turns/" + t.TraceID, Trace: h.traceUI.Link(t.TraceID)}
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, p page) {
	p.People = h.people()
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.log.Error("rendering turns page", "page", name, "err", err)
		http.Error(w, "cctrace: rendering the page failed; see the log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// waterfall orders the spans of t as a tree (children under their parent, by start time) and
// places each as a bar on the turn's time axis. Running spans reach to now.
func waterfall(t summary.Turn, now time.Time) ([]spanRow, []axisTick) {
	start, end := t.Start, t.Start
	endOf := func(r *summary.Record) time.Time {
		if r.End != nil {
			return *r.End
		}
		return now
	}
	ids := make(map[string]bool, len(t.Spans))
	for _, r := range t.Spans {
		ids[r.SpanID] = true
		if r.Start.Before(start) {
			start = r.Start
		}
		if e := endOf(r); e.After(end) {
			end = e
		}
	}
	// The root is the first span kept. Another span whose parent the turn does not hold goes
	// under it: its parent was dropped, or is the client's span that sent it (a turn that joined
	// Claude Code's own trace).
	root := ""
	if len(t.Spans) > 0 {
		root = t.Spans[0].SpanID
	}
	children := make(map[string][]*summary.Record)
	for _, r := range t.Spans {
		parent := r.ParentID
		switch {
		case r.SpanID == root:
			parent = ""
		case !ids[parent]:
			parent = root
		}
		children[parent] = append(children[parent], r)
	}
	for _, c := range children {
		sort.SliceStable(c, func(i, j int) bool { return c[i].Start.Before(c[j].Start) })
	}
	total := end.Sub(start)
	if total <= 0 {
		total = time.Millisecond
	}
	pct := func(d time.Duration) float64 { return 100 * float64(d) / float64(total) }
	var rows []spanRow
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, r := range children[parent] {
			e := endOf(r)
			width := max(pct(e.Sub(r.Start)), 0.4)
			left := min(pct(r.Start.Sub(start)), 100-width)
			rows = append(rows, spanRow{
				Record: r, Depth: depth,
				Left: fmt.Sprintf("%.3f%%", left), Width: fmt.Sprintf("%.3f%%", width),
				Duration: e.Sub(r.Start).Seconds(), Running: r.End == nil, Class: spanClass(r),
			})
			walk(r.SpanID, depth+1)
		}
	}
	walk("", 0)
	var axis []axisTick
	for i := 0; i <= 4; i++ {
		axis = append(axis, axisTick{Left: fmt.Sprintf("%d%%", i*25), Label: duration(total.Seconds() * float64(i) / 4)})
	}
	return rows, axis
}

func spanClass(r *summary.Record) string {
	c := "k-" + r.Kind
	if r.Status == "error" || r.Outcome == "error" {
		c += " failed"
	}
	switch {
	case r.Request == "compaction" || r.Compaction != "":
		c += " compaction"
	case r.Attempt > 0:
		c += " retry"
	case r.Request == "auxiliary" || r.Request == "count_tokens" || r.Request == "tool":
		c += " side"
	}
	if r.End == nil {
		c += " running"
	}
	return c
}

func sessionPath(id string) string {
	if id == "" {
		return "/sessions/-"
	}
	return "/sessions/" + id
}

// duration formats seconds for the page: milliseconds below one second, where summary.Seconds
// would round most spans of a fast turn to "0.0s".
func duration(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return summary.Seconds(s)
}

var funcs = template.FuncMap{
	"duration": duration,
	"short":    summary.ShortID,
	"count":    summary.Count,
	"dollars":  summary.Dollars,
	"percent":  summary.Percent,
	"tools":    summary.ToolList,
	"costText": summary.CostText,
	"tokens":   summary.TokenText,
	"inout":    summary.InputOutputText,
	"messages": summary.MessagesText,
	"hit": func(u wire.Usage) string {
		if r, ok := summary.CacheHitRatio(u); ok {
			return summary.Percent(r)
		}
		return "–"
	},
	// day is a time of day, with the date when it is not today's.
	"day": func(now, t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		t, now = t.Local(), now.Local()
		if y, m, d := t.Date(); y != now.Year() || m != now.Month() || d != now.Day() {
			return t.Format("2 Jan 15:04")
		}
		return t.Format("15:04:05")
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.Local().Format("15:04:05")
	},
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return summary.Seconds(now.Sub(t).Seconds()) + " ago"
	},
	"kb":     kilobytes,
	"part":   summary.PartLabel,
	"indent": func(depth int) string { return fmt.Sprintf("%.1fem", 0.6+float64(depth)*1.2) },
	"join":   strings.Join,
	// shares writes each window's share, "5h 1.2% · 7d 0.3%", the windows in order.
	"shares": func(m map[string]float64) string {
		var parts []string
		for _, w := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, w+" "+sharePercent(m[w]))
		}
		return strings.Join(parts, " · ")
	},
}

// sharePercent writes a share of a window, which is often a fraction of a percent: 1.2%, 0.35%.
func sharePercent(v float64) string {
	if v >= 0.01 {
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}
