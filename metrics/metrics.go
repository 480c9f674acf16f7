// Package metrics is the Prometheus sink of cctrace: it turns the tracker's ended spans into
// token, cost, request, latency, tool, subagent and turn metrics. It also holds the price table
// (an embedded, versioned prices.json; see LoadPrices for the format of an override) that the
// tracker prices answers with (instrument.WithPricing and Prices.Cost).
//
// Labels come only from small sets: model (capped, see WithMaxModels), request kind, HTTP status,
// stop reason, token type, tool name (capped, see WithMaxToolNames), outcome, body (request or
// response) and the budget it was shed by (copy_budget or decode_queue), user and team (capped,
// see WithMaxUsers and WithMaxTeams), the capped label that overflowed (label), a reread file
// and the result of loading it (file, result), a refused budget's scope and window, a part of
// the input (part), its name (an MCP server, capped at 20; a tool; a kind of text) and how the
// cache read it (cache), and a cache miss's cause. Session,
// turn and request ids never become labels; the trace id of the turn rides on counters and
// histograms as an exemplar ({trace_id="<32 hex>"}), visible on an OpenMetrics scrape of Handler, renewed at
// most once a second per series and bucket (WithExemplarInterval).
//
// Model label values are the model id as the client requested it (falling back to the id in the
// response), case and date suffix kept, so that dashboards can tell claude-sonnet-4-5-20250929
// from claude-sonnet-4-5; pricing reduces ids to their family separately (see Family).
package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

// Metric names, exact: dashboards and alerts depend on them.
const (
	nameTokens          = "cctrace_tokens_total"
	nameCacheCreation   = "cctrace_cache_creation_tokens_total"
	nameCost            = "cctrace_cost_usd_total"
	nameUnpriced        = "cctrace_unpriced_requests_total"
	nameRequests        = "cctrace_requests_total"
	nameRequestDuration = "cctrace_request_duration_seconds"
	nameTTFT            = "cctrace_time_to_first_token_seconds"
	nameContextTokens   = "cctrace_context_tokens"
	nameRequestMessages = "cctrace_request_messages"
	nameContentBlocks   = "cctrace_content_blocks_total"
	nameCompactions     = "cctrace_compactions_total"
	nameTurns           = "cctrace_turns_total"
	nameTurnsHandedOff  = "cctrace_turns_handed_off_total"
	nameTurnDuration    = "cctrace_turn_duration_seconds"
	nameToolCalls       = "cctrace_tool_calls_total"
	nameToolDuration    = "cctrace_tool_duration_seconds"
	nameSubagents       = "cctrace_subagents_total"
	nameSessionsActive  = "cctrace_sessions_active"
	nameNotDecoded      = "cctrace_bodies_not_decoded_total"
	nameTurnCost        = "cctrace_turn_cost_usd"
	nameLabelOverflow   = "cctrace_label_overflow_total"
	nameReloads         = "cctrace_config_reloads_total"
	nameReloadOK        = "cctrace_config_last_reload_successful"
	nameBudgetRefusals  = "cctrace_budget_refusals_total"
	nameServerTools     = "cctrace_server_tool_requests_total"
	nameInputByPart     = "cctrace_input_tokens_by_part_total"
	nameCacheMisses     = "cctrace_cache_misses_total"
	nameCacheMissed     = "cctrace_cache_missed_tokens_total"
	nameCacheMissCost   = "cctrace_cache_miss_cost_usd_total"
)

// MetricNames lists every cctrace metric family that New registers, in a stable order. Histograms
// appear under their family name (their series add _bucket, _sum and _count). The process_* and
// go_* families of the standard collectors that New also registers are not listed.
var MetricNames = []string{
	nameTokens, nameCacheCreation, nameCost, nameUnpriced,
	nameRequests, nameRequestDuration, nameTTFT, nameContextTokens, nameRequestMessages,
	nameContentBlocks, nameCompactions,
	nameTurns, nameTurnsHandedOff, nameTurnDuration, nameTurnCost,
	nameToolCalls, nameToolDuration,
	nameSubagents, nameSessionsActive,
	nameNotDecoded, nameLabelOverflow,
	nameReloads, nameReloadOK, nameBudgetRefusals, nameServerTools,
	nameInputByPart, nameCacheMisses, nameCacheMissed, nameCacheMissCost,
}

// Histogram buckets.
var (
	// durationBuckets are the GenAI semantic conventions' advice for
	// gen_ai.client.operation.duration; time to first token uses them too, because the
	// conventions' server-side TTFT buckets stop at 10 s and a queued or thinking request can
	// wait longer.
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// contextBuckets are finer around 100k-200k tokens, where Claude Code auto-compacts.
	contextBuckets = []float64{
		1000, 2500, 5000, 10000, 20000, 40000, 60000, 80000, 100000, 125000, 150000, 175000,
		200000, 300000, 400000, 500000, 750000, 1000000,
	}
	messagesBuckets     = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
	turnDurationBuckets = []float64{1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	// toolDurationBuckets span fast reads to long builds and permission prompts.
	toolDurationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// turnCostBuckets span a one-line answer to a long agentic turn with subagents, in USD.
	turnCostBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50}
)

// Token types of cctrace_tokens_total.
const (
	tokenInput         = "input"
	tokenOutput        = "output"
	tokenCacheRead     = "cache_read"
	tokenCacheCreation = "cache_creation"
)

// Cache labels of cctrace_input_tokens_by_part_total: how the API read a part's tokens.
const (
	cacheRead     = "read"
	cacheWrite    = "write"
	cacheUncached = "uncached"
)

// maxMCPServers bounds the MCP servers cctrace_input_tokens_by_part_total names: a team's
// servers are a handful, and a client that invents tool names cannot grow the series count.
const maxMCPServers = 20

// Tools of cctrace_server_tool_requests_total.
const (
	toolWebSearch     = "web_search"
	toolWebFetch      = "web_fetch"
	toolCodeExecution = "code_execution"
)

// Labels of cctrace_bodies_not_decoded_total: which body, and which budget was full.
const (
	bodyRequest       = "request"
	bodyResponse      = "response"
	reasonCopyBudget  = "copy_budget"
	reasonDecodeQueue = "decode_queue"
)

// notDecodedReason is the reason label of a ParseError that says the body was not decoded
// because a budget was full (wire.NotDecoded), "" for any other.
func notDecodedReason(parseError string) string {
	switch {
	case strings.HasPrefix(parseError, wire.NotDecodedCopyBudget):
		return reasonCopyBudget
	case strings.HasPrefix(parseError, wire.NotDecodedQueueFull):
		return reasonDecodeQueue
	case wire.IsNotDecoded(parseError):
		return labelUnknown
	}
	return ""
}

// codeError is the code label of a request that got no HTTP status or failed in transport.
const codeError = "error"

// Metrics is the Prometheus sink: an instrument.Sink that records ended spans. Build it with New;
// the zero value is not usable. Its methods are safe for concurrent use.
type Metrics struct {
	models, tools, users, teams                       *cappedLabel
	kinds, stopReasons, turnOutcomes, toolOutcomes    *cappedLabel
	subagentTypes, triggers, blockRoles, blockTypes   *cappedLabel
	mcpServers, textKinds                             *cappedLabel
	inputByPart, cacheMisses, cacheMissed, missCost   *prometheus.CounterVec
	tokens, cacheCreation, cost, unpriced, requests   *prometheus.CounterVec
	contentBlocks, compactions, turns, toolCalls      *prometheus.CounterVec
	subagents, notDecoded, serverTools                *prometheus.CounterVec
	requestDuration, ttft, contextTokens, requestMsgs *prometheus.HistogramVec
	toolDuration                                      *prometheus.HistogramVec
	turnDuration, turnCost                            prometheus.Histogram
	labelOverflow, reloads, budgetRefusals            *prometheus.CounterVec
	reloadOK                                          *prometheus.GaugeVec
	genAI                                             *genAI
	turnsHandedOff                                    prometheus.Counter
	sessionsActive                                    prometheus.Gauge

	// lastTrace and lastExemplar are the exemplar labels of the trace a span last ended in. The
	// spans of a turn end close together (a chat span and its turn in the same response, tool
	// spans one after another), so most spans reuse them instead of building a map and a hex
	// string of their own. client_golang only reads the labels it is given. One entry: it never
	// grows.
	exemplarMu   sync.Mutex
	lastTrace    instrument.TraceID
	lastExemplar prometheus.Labels
	// exemplars decides which observations carry them (WithExemplarInterval); now is its clock.
	exemplars *exemplarGate
	now       func() time.Time
}

var _ instrument.Sink = (*Metrics)(nil)

// New builds the metrics and registers them, with the process and Go runtime collectors, on reg.
// The runtime collectors are skipped without error when reg already has them. New fails when reg
// is nil, an option is out of range, or a cctrace metric is already registered on reg.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxToolNames < 1 {
		return nil, fmt.Errorf("metrics: max tool names must be at least 1, got %d", cfg.maxToolNames)
	}
	if cfg.maxModels < 1 {
		return nil, fmt.Errorf("metrics: max models must be at least 1, got %d", cfg.maxModels)
	}
	if cfg.maxUsers < 1 || cfg.maxTeams < 1 {
		return nil, fmt.Errorf("metrics: max users and teams must be at least 1, got %d and %d", cfg.maxUsers, cfg.maxTeams)
	}

	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &Metrics{
		exemplars:     newExemplarGate(cfg.exemplarInterval),
		now:           cfg.now,
		models:        newCappedLabel(cfg.maxModels),
		tools:         newCappedLabel(cfg.maxToolNames),
		users:         newCappedLabel(cfg.maxUsers),
		teams:         newCappedLabel(cfg.maxTeams),
		kinds:         newCappedLabel(defaultLabelCap),
		stopReasons:   newCappedLabel(defaultLabelCap),
		turnOutcomes:  newCappedLabel(defaultLabelCap),
		toolOutcomes:  newCappedLabel(defaultLabelCap),
		subagentTypes: newCappedLabel(defaultLabelCap),
		triggers:      newCappedLabel(defaultLabelCap),
		blockRoles:    newCappedLabel(defaultLabelCap),
		blockTypes:    newCappedLabel(defaultLabelCap),
		mcpServers:    newCappedLabel(maxMCPServers),
		textKinds:     newCappedLabel(defaultLabelCap),

		tokens: counter(nameTokens,
			"Tokens billed by the upstream, by model, type (input is uncached input; input+cache_read+cache_creation is the whole prompt), person and team.",
			"model", "type", "user", "team"),
		cacheCreation: counter(nameCacheCreation,
			"Cache write tokens by TTL (5m or 1h), when the upstream reports the split.",
			"model", "ttl"),
		cost: counter(nameCost,
			"Estimated cost in US dollars from the price table, by model, person and team.",
			"model", "user", "team"),
		unpriced: counter(nameUnpriced,
			"Requests with usage whose model is not in the price table, so their cost is not counted.",
			"model"),
		requests: counter(nameRequests,
			`API request attempts by model, request kind, HTTP status ("error" when none or the transport failed) and stop reason.`,
			"model", "kind", "code", "stop_reason"),
		serverTools: counter(nameServerTools,
			"Requests of the API's own tools that answers ran and billed (usage.server_tool_use), by tool: web_search, web_fetch, code_execution.",
			"tool"),
		requestDuration: histogram(nameRequestDuration,
			"Duration of API request attempts, from the request to the end of the response body.",
			durationBuckets, "model", "kind"),
		ttft: histogram(nameTTFT,
			"Time from the request to the first content delta of the response.",
			durationBuckets, "model"),
		contextTokens: histogram(nameContextTokens,
			"Prompt size of each request in tokens: uncached input, cache reads and cache writes.",
			contextBuckets, "model"),
		requestMsgs: histogram(nameRequestMessages,
			"Messages carried by each API request.",
			messagesBuckets, "kind"),
		contentBlocks: counter(nameContentBlocks,
			"Content blocks sent for the first time in their conversation, by role and type.",
			"role", "type"),
		compactions: counter(nameCompactions,
			"Context compactions by trigger (manual or auto).",
			"trigger"),
		turns: counter(nameTurns,
			"Finished agentic turns by outcome.",
			"outcome"),
		turnsHandedOff: prometheus.NewCounter(prometheus.CounterOpts{
			Name: nameTurnsHandedOff,
			Help: "Parts of turns this replica ended as handed_off: its session went on on another replica (or stopped), which counts the turn in cctrace_turns_total.",
		}),
		turnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    nameTurnDuration,
			Help:    "Duration of agentic turns, from the human prompt to the final response.",
			Buckets: turnDurationBuckets,
		}),
		turnCost: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    nameTurnCost,
			Help:    "Estimated cost of each finished turn in US dollars, subagents included; its exemplars are the turns' trace ids.",
			Buckets: turnCostBuckets,
		}),
		labelOverflow: counter(nameLabelOverflow,
			`Observations whose label value was past its label's cap and counted as "other", by label.`,
			"label"),
		reloads: counter(nameReloads,
			"Loads of the files cctrace rereads while running (directory, budgets, access), by file and result (success, failure: the previous one stays in force).",
			"file", "result"),
		reloadOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: nameReloadOK,
			Help: "Whether the last load of each file cctrace rereads succeeded (1) or was refused (0).",
		}, []string{"file"}),
		budgetRefusals: counter(nameBudgetRefusals,
			"New turns refused because a budget was spent (--enforce-budgets), by scope (person, team) and window (daily, monthly).",
			"scope", "window"),
		toolCalls: counter(nameToolCalls,
			"Tool calls by tool and outcome.",
			"tool", "outcome"),
		toolDuration: histogram(nameToolDuration,
			"Tool round trips, from the end of the tool_use block to the arrival of its result.",
			toolDurationBuckets, "tool"),
		subagents: counter(nameSubagents,
			"Subagent runs by subagent type.",
			"type"),
		sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: nameSessionsActive,
			Help: "Claude Code sessions the tracker currently holds.",
		}),
		inputByPart: counter(nameInputByPart,
			"Input tokens by what they carried (estimated, docs/wire.md §9): part (system_prompt, mcp_tools, tool_result, …), name (the MCP server of mcp_tools and deferred_tools, the tool of tool_use and tool_result, the kind of client and system_message text; capped, the rest \"other\"), and cache (read, write, uncached). Per request the parts add up exactly to its input, cache reads and cache writes.",
			"part", "name", "cache"),
		cacheMisses: counter(nameCacheMisses,
			"Requests that read at least 1,024 tokens less from the prompt cache than the previous request of their chain left there, by cause: model, tools, system, compaction, history, ttl, unexplained.",
			"cause"),
		cacheMissed: counter(nameCacheMissed,
			"Tokens the cache misses did not read that the previous request of their chain left cached, by cause.",
			"cause"),
		missCost: counter(nameCacheMissCost,
			"What the cache misses cost beyond a hit, in US dollars from the price table (the answer's price less its price with the missed tokens read from the cache), by cause.",
			"cause"),
		notDecoded: counter(nameNotDecoded,
			"Request and response bodies forwarded but not decoded because one of cctrace's memory budgets was full (reason: copy_budget, too many bodies arriving at once; decode_queue, decoding falling behind): load shed, their requests tracked without what the bodies say.",
			"body", "reason"),
	}
	for name, l := range map[string]*cappedLabel{
		"model": m.models, "tool": m.tools, "user": m.users, "team": m.teams,
		"kind": m.kinds, "stop_reason": m.stopReasons, "outcome": m.turnOutcomes,
		"tool_outcome": m.toolOutcomes, "subagent_type": m.subagentTypes, "trigger": m.triggers,
		"role": m.blockRoles, "block_type": m.blockTypes,
		"mcp_server": m.mcpServers, "text_kind": m.textKinds,
	} {
		l.overflow, l.name = m.labelOverflow, name
	}
	// Every series exists from the start, so that a rate over them is 0 rather than absent.
	for _, tool := range []string{toolWebSearch, toolWebFetch, toolCodeExecution} {
		m.serverTools.WithLabelValues(tool)
	}
	for _, cause := range instrument.CacheMisses {
		m.cacheMisses.WithLabelValues(string(cause))
		m.cacheMissed.WithLabelValues(string(cause))
		m.missCost.WithLabelValues(string(cause))
	}
	for _, body := range []string{bodyRequest, bodyResponse} {
		for _, reason := range []string{reasonCopyBudget, reasonDecodeQueue} {
			m.notDecoded.WithLabelValues(body, reason)
		}
	}

	for _, c := range []prometheus.Collector{
		m.tokens, m.cacheCreation, m.cost, m.unpriced, m.requests, m.requestDuration, m.ttft,
		m.contextTokens, m.requestMsgs, m.contentBlocks, m.compactions, m.turns, m.turnDuration,
		m.toolCalls, m.toolDuration, m.subagents, m.sessionsActive, m.notDecoded,
		m.turnCost, m.labelOverflow, m.reloads, m.reloadOK, m.serverTools,
		m.inputByPart, m.cacheMisses, m.cacheMissed, m.missCost,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering cctrace metrics: %w", err)
		}
	}
	// The series of features that are off would only ever say 0.
	if cfg.replica {
		if err := reg.Register(m.turnsHandedOff); err != nil {
			return nil, fmt.Errorf("registering cctrace metrics: %w", err)
		}
	}
	if cfg.budgetEnforcement {
		if err := reg.Register(m.budgetRefusals); err != nil {
			return nil, fmt.Errorf("registering cctrace metrics: %w", err)
		}
		for _, scope := range []string{"person", "team"} {
			for _, window := range []string{"daily", "monthly"} {
				m.budgetRefusals.WithLabelValues(scope, window)
			}
		}
	}
	for _, c := range []prometheus.Collector{
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				return nil, fmt.Errorf("registering runtime collectors: %w", err)
			}
		}
	}
	genAI, err := newGenAI(reg, cfg.genAILatest)
	if err != nil {
		return nil, err
	}
	m.genAI = genAI
	return m, nil
}

// ConfigLoaded records a load of one of the files cctrace rereads while running: kind names it
// ("directory", "budgets", "access"), err is nil or why it was refused. Its signature is
// configfile.WithReport's.
func (m *Metrics) ConfigLoaded(kind string, err error) {
	result, ok := "success", 1.0
	if err != nil {
		result, ok = "failure", 0
	}
	m.reloads.WithLabelValues(kind, result).Inc()
	m.reloadOK.WithLabelValues(kind).Set(ok)
}

// BudgetRefused counts a new turn refused because the budget of scope ("person" or "team") for
// window ("daily" or "monthly") was spent.
func (m *Metrics) BudgetRefused(scope, window string) {
	m.budgetRefusals.WithLabelValues(scope, window).Inc()
}

// Names returns MetricNames: every cctrace metric family the sink exposes.
func (m *Metrics) Names() []string { return slices.Clone(MetricNames) }

// Handler serves the metrics of g, in the OpenMetrics format when the scraper asks for it (which
// is what carries exemplars) and in the Prometheus text format otherwise.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// SpanStarted does nothing: metrics are recorded when spans end.
func (m *Metrics) SpanStarted(*instrument.Span) {}

// SessionsActive sets cctrace_sessions_active.
func (m *Metrics) SessionsActive(n int) { m.sessionsActive.Set(float64(n)) }

// SpanEnded records an ended span.
func (m *Metrics) SpanEnded(s *instrument.Span) {
	if s == nil {
		return
	}
	ex := m.exemplar(s.TraceID)
	var now time.Time
	if ex != nil {
		now = m.now()
	}
	o := observer{gate: m.exemplars, ex: ex, now: now}
	switch s.Kind {
	case instrument.KindChat:
		if s.Chat != nil {
			m.chatEnded(s, s.Chat, o)
		}
	case instrument.KindTool:
		name, outcome := "", instrument.ToolOutcome("")
		if s.Tool != nil {
			name, outcome = s.Tool.Name, s.Tool.Outcome
		}
		tool := m.tools.value(name, labelUnknown)
		o.add(m.toolCalls.WithLabelValues(tool, m.toolOutcomes.value(string(outcome), labelUnknown)), 1)
		o.observeDuration(m.toolDuration.WithLabelValues(tool), toolDurationBuckets, s)
	case instrument.KindSubagent:
		typ := ""
		if s.Subagent != nil {
			typ = s.Subagent.Type
		}
		o.add(m.subagents.WithLabelValues(m.subagentTypes.value(typ, labelUnknown)), 1)
	case instrument.KindTurn:
		outcome := ""
		if s.Turn != nil {
			outcome = string(s.Turn.Outcome)
		}
		if outcome == string(instrument.OutcomeHandedOff) {
			// The replica that carries the turn on counts it, so that a turn counts once
			// summed over replicas.
			o.add(m.turnsHandedOff, 1)
			return
		}
		o.add(m.turns.WithLabelValues(m.turnOutcomes.value(outcome, labelUnknown)), 1)
		o.observeDuration(m.turnDuration, turnDurationBuckets, s)
		if s.Turn != nil && s.Turn.Cost > 0 {
			// Each bucket keeps the trace of a turn of its cost as exemplar: the top buckets'
			// are the expensive turns the dashboard links to.
			o.observe(m.turnCost, turnCostBuckets, s.Turn.Cost)
		}
	}
}

// chatEnded records one API request attempt.
func (m *Metrics) chatEnded(s *instrument.Span, c *instrument.Chat, o observer) {
	requested, served := "", ""
	if c.Request.Body != nil {
		requested = c.Request.Body.Model
	}
	resp := c.Response
	var msg *wire.MessageInfo
	if resp != nil {
		msg = resp.Message
	}
	if msg != nil {
		served = msg.Model
	}
	model := m.models.value(cmp.Or(requested, served), labelUnknown)
	kind := m.kinds.value(string(c.Kind), string(instrument.RequestOther))

	stop := ""
	if msg != nil {
		stop = msg.StopReason
	}
	o.add(m.requests.WithLabelValues(model, kind, statusCode(resp), m.stopReasons.value(stop, labelNone)), 1)
	o.observeDuration(m.requestDuration.WithLabelValues(model, kind), durationBuckets, s)
	o.observe(m.requestMsgs.WithLabelValues(kind), messagesBuckets, float64(max(c.Messages, 0)))
	if resp != nil && !resp.FirstChunk.IsZero() && !resp.FirstChunk.Before(s.Start) {
		o.observe(m.ttft.WithLabelValues(model), durationBuckets, resp.FirstChunk.Sub(s.Start).Seconds())
	}

	m.genAI.request(model, s, msg)
	if msg != nil {
		u := msg.Usage
		user, team := m.users.value(s.User, labelUnknown), m.teams.value(s.Team, labelNone)
		m.addTokens(o, model, user, team, u)
		o.observe(m.contextTokens.WithLabelValues(model), contextBuckets, float64(u.TotalInput()))
		for _, it := range msg.Iterations {
			// A sub-inference's tokens count under the model that ran it.
			im := model
			if it.Model != "" {
				im = m.models.value(it.Model, labelUnknown)
			}
			m.addTokens(o, im, user, team, it.Usage)
		}
		for tool, n := range map[string]int{toolWebSearch: u.ServerToolUse.WebSearch, toolWebFetch: u.ServerToolUse.WebFetch, toolCodeExecution: u.ServerToolUse.CodeExecution} {
			if n > 0 {
				o.add(m.serverTools.WithLabelValues(tool), float64(n))
			}
		}
		if c.Priced {
			o.add(m.cost.WithLabelValues(model, user, team), c.Cost)
		} else {
			o.add(m.unpriced.WithLabelValues(model), 1)
		}
		m.context(o, c)
	}

	if r := notDecodedReason(c.Request.ParseError); r != "" {
		o.add(m.notDecoded.WithLabelValues(bodyRequest, r), 1)
	}
	if resp != nil {
		if r := notDecodedReason(resp.ParseError); r != "" {
			o.add(m.notDecoded.WithLabelValues(bodyResponse, r), 1)
		}
	}

	if cp := c.Compaction; cp != nil {
		o.add(m.compactions.WithLabelValues(m.triggers.value(cp.Trigger, labelUnknown)), 1)
	}
	type blockCount struct {
		key instrument.BlockKey
		n   int
	}
	var blocks []blockCount
	c.EachFirstSeenBlock(func(k instrument.BlockKey, n int) { blocks = append(blocks, blockCount{k, n}) })
	// Sorted so that which values a full cap admits does not depend on map order.
	slices.SortFunc(blocks, func(a, b blockCount) int {
		return cmp.Or(cmp.Compare(a.key.Role, b.key.Role), cmp.Compare(a.key.Type, b.key.Type))
	})
	for _, b := range blocks {
		role := m.blockRoles.value(string(b.key.Role), labelUnknown)
		typ := m.blockTypes.value(string(b.key.Type), labelUnknown)
		o.add(m.contentBlocks.WithLabelValues(role, typ), float64(b.n))
	}
}

// context counts a request's input tokens by part and its cache miss, if it had one.
func (m *Metrics) context(o observer, c *instrument.Chat) {
	if c.Context != nil {
		for _, p := range c.Context.Parts {
			part, name := string(p.Kind), m.partName(p.Part)
			for _, v := range [...]struct {
				cache  string
				tokens int
			}{{cacheRead, p.CacheRead}, {cacheWrite, p.CacheWrite}, {cacheUncached, p.Uncached}} {
				if v.tokens > 0 {
					o.add(m.inputByPart.WithLabelValues(part, name, v.cache), float64(v.tokens))
				}
			}
		}
	}
	if miss := c.CacheMiss; miss != nil {
		cause := string(miss.Cause)
		o.add(m.cacheMisses.WithLabelValues(cause), 1)
		o.add(m.cacheMissed.WithLabelValues(cause), float64(miss.Missed))
		if miss.Priced {
			o.add(m.missCost.WithLabelValues(cause), miss.Cost)
		}
	}
}

// partName is the name label of a part: its MCP server, tool or kind of text, capped; "" for
// the kinds that have no name.
func (m *Metrics) partName(p wire.Part) string {
	switch p.Kind {
	case wire.PartMCPTools, wire.PartDeferredTools:
		return m.mcpServers.value(p.Name, "")
	case wire.PartToolUse, wire.PartToolResult:
		return m.tools.value(p.Name, labelUnknown)
	case wire.PartClient, wire.PartSystemMessage:
		return m.textKinds.value(p.Name, labelUnknown)
	}
	return ""
}

// addTokens counts u's tokens of model.
func (m *Metrics) addTokens(o observer, model, user, team string, u wire.Usage) {
	o.add(m.tokens.WithLabelValues(model, tokenInput, user, team), float64(u.InputTokens))
	o.add(m.tokens.WithLabelValues(model, tokenOutput, user, team), float64(u.OutputTokens))
	o.add(m.tokens.WithLabelValues(model, tokenCacheRead, user, team), float64(u.CacheReadInputTokens))
	o.add(m.tokens.WithLabelValues(model, tokenCacheCreation, user, team), float64(u.CacheCreationInputTokens))
	if u.CacheCreation5m > 0 || u.CacheCreation1h > 0 {
		o.add(m.cacheCreation.WithLabelValues(model, "5m"), float64(u.CacheCreation5m))
		o.add(m.cacheCreation.WithLabelValues(model, "1h"), float64(u.CacheCreation1h))
	}
}

// statusCode is the code label: the HTTP status, or "error" when no response arrived or its
// transport failed (upstream unreachable, stream cut, client gone), or the error's type when an
// error event cut a stream the status began (types the API does not document are "error").
func statusCode(r *wire.Response) string {
	if r == nil || r.Status == 0 || r.Err != "" {
		return codeError
	}
	if r.ErrorType != "" && r.Status < 400 {
		if apiErrorTypes[r.ErrorType] {
			return r.ErrorType
		}
		return codeError
	}
	if s := r.Status; s >= firstStatus && s < firstStatus+len(statusDigits)/3 {
		i := (s - firstStatus) * 3
		return statusDigits[i : i+3]
	}
	return strconv.Itoa(r.Status)
}

// apiErrorTypes are the error types the Messages API documents.
var apiErrorTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "billing_error": true,
	"permission_error": true, "not_found_error": true, "request_too_large": true,
	"rate_limit_error": true, "api_error": true, "overloaded_error": true, "timeout_error": true,
}

// firstStatus is the first HTTP status in statusDigits.
const firstStatus = 100

// statusDigits is "100101102…599": the code labels of three-digit statuses, sliced from one
// string rather than formatted per request.
var statusDigits = func() string {
	b := make([]byte, 0, 3*500)
	for s := firstStatus; s < 600; s++ {
		b = strconv.AppendInt(b, int64(s), 10)
	}
	return string(b)
}()

// exemplar returns the exemplar labels for a trace, nil for an invalid trace id. Callers must
// not modify them: spans of the same trace share them.
func (m *Metrics) exemplar(t instrument.TraceID) prometheus.Labels {
	if !t.IsValid() {
		return nil
	}
	m.exemplarMu.Lock()
	defer m.exemplarMu.Unlock()
	if m.lastExemplar == nil || m.lastTrace != t {
		m.lastTrace, m.lastExemplar = t, prometheus.Labels{"trace_id": t.String()}
	}
	return m.lastExemplar
}

// observer records one span's observations, with its trace's exemplar labels where the gate
// admits them.
type observer struct {
	gate *exemplarGate
	ex   prometheus.Labels // nil: no trace id, no exemplar
	now  time.Time
}

// add adds v, with the exemplar if the gate admits it; negative values (which a counter rejects)
// are dropped.
func (o observer) add(c prometheus.Counter, v float64) {
	if v < 0 {
		return
	}
	if ea, ok := c.(prometheus.ExemplarAdder); ok && o.ex != nil && o.gate.admit(c, -1, o.now) {
		ea.AddWithExemplar(v, o.ex)
		return
	}
	c.Add(v)
}

// observe records v in a histogram with upper bounds buckets, with the exemplar if the gate
// admits it for v's bucket.
func (o observer) observe(h prometheus.Observer, buckets []float64, v float64) {
	if eo, ok := h.(prometheus.ExemplarObserver); ok && o.ex != nil && o.gate.admit(h, bucketOf(buckets, v), o.now) {
		eo.ObserveWithExemplar(v, o.ex)
		return
	}
	h.Observe(v)
}

// observeDuration records the span's duration, unless its clock went backwards or it never ended.
func (o observer) observeDuration(h prometheus.Observer, buckets []float64, s *instrument.Span) {
	if s.End.IsZero() || s.End.Before(s.Start) {
		return
	}
	o.observe(h, buckets, s.End.Sub(s.Start).Seconds())
}
