package metrics

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
)

const (
	sonnet = "claude-sonnet-4-5-20250929"
	haiku  = "claude-haiku-4-5-20251001"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// at is t0 plus a number of milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func traceID(b byte) instrument.TraceID {
	var t instrument.TraceID
	for i := range t {
		t[i] = b
	}
	return t
}

// chatSpec describes one API request attempt of a test scenario.
type chatSpec struct {
	trace        byte
	model        string // requested model; empty for a request whose body could not be decoded
	kind         instrument.RequestKind
	start, end   int // ms after t0
	firstChunk   int // ms after t0; 0 for none
	status       int
	err          string
	stop         string
	usage        *wire.Usage // nil for no message (errors, count_tokens)
	messages     int
	newBlocks    map[instrument.BlockKey]int
	compaction   *instrument.Compaction
	servedModel  string // model in the response; defaults to model
	inputTokens  int    // count_tokens' answer
	errorType    string
	attemptIndex int
	// reqParseError and respParseError are the request's and response's ParseError.
	reqParseError, respParseError string
	// context and cacheMiss are the tracker's estimate by part and the cache miss it named.
	context   *wire.Estimate
	cacheMiss *instrument.CacheMiss
}

func (c chatSpec) span() *instrument.Span {
	resp := &wire.Response{
		Status:      c.status,
		Err:         c.err,
		End:         at(c.end),
		InputTokens: c.inputTokens,
		ErrorType:   c.errorType,
		ParseError:  c.respParseError,
	}
	if c.firstChunk != 0 {
		resp.FirstChunk = at(c.firstChunk)
	}
	if c.usage != nil {
		resp.Message = &wire.MessageInfo{Model: cmpOr(c.servedModel, c.model), StopReason: c.stop, Usage: *c.usage}
	}
	req := wire.Request{Time: at(c.start), Method: http.MethodPost, Path: "/v1/messages", Endpoint: wire.EndpointMessages, ParseError: c.reqParseError}
	if c.kind == instrument.RequestCountTokens {
		req.Path, req.Endpoint = "/v1/messages/count_tokens", wire.EndpointCountTokens
	}
	if c.model != "" {
		req.Body = &wire.Body{Model: c.model}
	}
	chat := &instrument.Chat{
		Kind:       c.kind,
		Request:    req,
		Response:   resp,
		Attempt:    c.attemptIndex,
		Messages:   c.messages,
		Compaction: c.compaction,
		Context:    c.context,
		CacheMiss:  c.cacheMiss,
	}
	// As the tracker does: the assistant's blocks come from the answer, the rest from the
	// request; the answer is priced by the model requested, else by the one that answered.
	for k, n := range c.newBlocks {
		if k.Role == wire.RoleAssistant {
			if chat.ResponseBlocks == nil {
				chat.ResponseBlocks = map[wire.BlockType]int{}
			}
			chat.ResponseBlocks[k.Type] += n
			continue
		}
		if chat.NewBlocks == nil {
			chat.NewBlocks = map[instrument.BlockKey]int{}
		}
		chat.NewBlocks[k] += n
	}
	if m := resp.Message; m != nil {
		prices := DefaultPrices()
		if chat.Cost, chat.Priced = prices.Cost(c.model, m.Usage); !chat.Priced {
			chat.Cost, chat.Priced = prices.Cost(m.Model, m.Usage)
		}
	}
	return &instrument.Span{
		TraceID:   traceID(c.trace),
		ID:        instrument.SpanID{1},
		Kind:      instrument.KindChat,
		Name:      "chat " + c.model,
		Start:     at(c.start),
		End:       at(c.end),
		SessionID: "0b9c5c1e-6d7c-4f7e-9d51-3c2f5f0a9e11",
		Chat:      chat,
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func toolSpan(trace byte, name, outcome string, start, end int) *instrument.Span {
	return &instrument.Span{
		TraceID: traceID(trace), ID: instrument.SpanID{2}, Kind: instrument.KindTool,
		Name: "execute_tool " + name, Start: at(start), End: at(end),
		Tool: &instrument.Tool{Name: name, CallID: "toolu_01", Outcome: instrument.ToolOutcome(outcome)},
	}
}

func turnSpan(trace byte, outcome string, start, end int) *instrument.Span {
	return &instrument.Span{
		TraceID: traceID(trace), ID: instrument.SpanID{3}, Kind: instrument.KindTurn,
		Name: "invoke_agent claude-code", Start: at(start), End: at(end), TurnIndex: 1,
		Turn: &instrument.Turn{Index: 1, Outcome: instrument.Outcome(outcome)},
	}
}

func subagentSpan(trace byte, typ string, start, end int) *instrument.Span {
	return &instrument.Span{
		TraceID: traceID(trace), ID: instrument.SpanID{4}, Kind: instrument.KindSubagent,
		Name: "invoke_agent " + typ, Start: at(start), End: at(end),
		Subagent: &instrument.Subagent{Type: typ, AgentID: "a1b2c3"},
	}
}

func newMetrics(t *testing.T, opts ...Option) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

// feed hands spans to the sink as the tracker would: started, then ended.
func feed(m *Metrics, spans ...*instrument.Span) {
	for _, s := range spans {
		m.SpanStarted(s)
		m.SpanEnded(s)
	}
}

var (
	userText   = instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockText}
	toolUse    = instrument.BlockKey{Role: wire.RoleAssistant, Type: wire.BlockToolUse}
	toolResult = instrument.BlockKey{Role: wire.RoleUser, Type: wire.BlockToolResult}
)

// scenario is two turns of one session. Turn 1 (trace 0x01): a 529 and its successful retry, a
// Read and an Agent tool call, an Explore subagent with one request and a failed Bash call, and
// the final tool_results request. Turn 2 (trace 0x02): a count_tokens call, an auto compaction, the
// request after it, an auxiliary request to an unknown model and a transport failure.
func scenario() []*instrument.Span {
	return []*instrument.Span{
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 500,
			status: 529, errorType: "overloaded_error", messages: 1}.span(),
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 1000, end: 3000, firstChunk: 1300,
			status: 200, stop: "tool_use", messages: 1, attemptIndex: 1,
			usage:     &wire.Usage{InputTokens: 10, OutputTokens: 200, CacheCreationInputTokens: 20000, CacheCreation5m: 15000, CacheCreation1h: 5000},
			newBlocks: map[instrument.BlockKey]int{userText: 1}}.span(),
		toolSpan(1, "Read", "success", 3000, 3200),
		chatSpec{trace: 1, model: haiku, kind: instrument.RequestSubagent, start: 4000, end: 6000, firstChunk: 4500,
			status: 200, stop: "end_turn", messages: 1,
			usage:     &wire.Usage{InputTokens: 3000, OutputTokens: 500},
			newBlocks: map[instrument.BlockKey]int{userText: 1}}.span(),
		toolSpan(1, "Bash", "error", 5000, 5400),
		subagentSpan(1, "Explore", 3500, 9000),
		toolSpan(1, "Agent", "success", 3000, 10000),
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestToolResults, start: 10000, end: 12000, firstChunk: 10200,
			status: 200, stop: "end_turn", messages: 3,
			usage:     &wire.Usage{InputTokens: 5, OutputTokens: 100, CacheReadInputTokens: 20000, CacheCreationInputTokens: 300},
			newBlocks: map[instrument.BlockKey]int{toolUse: 2, toolResult: 2, {Role: wire.RoleUser, Type: wire.BlockImage}: 0},
			context: &wire.Estimate{Parts: []wire.PartTokens{
				{PartSize: wire.PartSize{Part: wire.Part{Kind: wire.PartBuiltinTools}}, CacheRead: 8000},
				{PartSize: wire.PartSize{Part: wire.Part{Kind: wire.PartMCPTools, Name: "github"}}, CacheRead: 4000},
				{PartSize: wire.PartSize{Part: wire.Part{Kind: wire.PartSystemPrompt}}, CacheRead: 7000},
				{PartSize: wire.PartSize{Part: wire.Part{Kind: wire.PartClient, Name: wire.ClientClaudeMd}}, CacheRead: 1000},
				{PartSize: wire.PartSize{Part: wire.Part{Kind: wire.PartToolResult, Name: "Read"}}, CacheWrite: 300, Uncached: 5},
			}}}.span(),
		turnSpan(1, "end_turn", 0, 12000),

		chatSpec{trace: 2, model: sonnet, kind: instrument.RequestCountTokens, start: 100000, end: 100100,
			status: 200, messages: 4, inputTokens: 1234}.span(),
		chatSpec{trace: 2, model: sonnet, kind: instrument.RequestCompaction, start: 100000, end: 130000, firstChunk: 101000,
			status: 200, stop: "end_turn", messages: 40,
			usage: &wire.Usage{InputTokens: 50000, OutputTokens: 2000}}.span(),
		chatSpec{trace: 2, model: sonnet, kind: instrument.RequestTurn, start: 131000, end: 133000, firstChunk: 131500,
			status: 200, stop: "end_turn", messages: 2,
			usage:      &wire.Usage{InputTokens: 8000, OutputTokens: 300},
			newBlocks:  map[instrument.BlockKey]int{userText: 2},
			compaction: &instrument.Compaction{Trigger: "auto", MessagesBefore: 40, MessagesAfter: 2, ContextBefore: 52000},
			cacheMiss:  &instrument.CacheMiss{Cause: instrument.CacheMissCompaction, Expected: 20300, Missed: 20300}}.span(),
		chatSpec{trace: 2, model: "mystery-model-1", kind: instrument.RequestAuxiliary, start: 134000, end: 135000,
			status: 200, stop: "end_turn", messages: 1,
			usage: &wire.Usage{InputTokens: 100, OutputTokens: 10}}.span(),
		chatSpec{trace: 2, model: sonnet, kind: instrument.RequestTurn, start: 136000, end: 136050,
			err: "dial tcp 127.0.0.1:1: connect: connection refused", messages: 2}.span(),
		turnSpan(2, "error", 100000, 140000),
		// A turn part this replica lost to another: counted there, not here.
		turnSpan(3, "handed_off", 150000, 160000),
	}
}

// The expected exposition of scenario, worked out by hand. Sonnet 4.5 costs $3 input, $15
// output, $0.30 cache read, $3.75 5m write and $6 1h write per million tokens; Haiku 4.5 $1 and
// $5. Request costs: 10·3 + 200·15 + 15000·3.75 + 5000·6 = 89280 µ$; 5·3 + 100·15 + 20000·0.3 +
// 300·3.75 = 8640 µ$; 50000·3 + 2000·15 = 180000 µ$; 8000·3 + 300·15 = 28500 µ$ (sonnet total
// 0.30642 $); haiku 3000·1 + 500·5 = 5500 µ$.
//
// Request durations (s): sonnet/turn 0.5, 2, 2, 0.05; haiku/subagent 2; sonnet/tool_results 2;
// sonnet/count_tokens 0.1; sonnet/compaction 30; mystery/auxiliary 1. Time to first token (s):
// sonnet 0.3, 0.2, 1, 0.5; haiku 0.5. Context tokens: sonnet 20010, 20305, 50000, 8000; haiku
// 3000; mystery 100. Messages: turn 1, 1, 2, 2; subagent 1; tool_results 3; count_tokens 4;
// compaction 40; auxiliary 1. Turn durations (s): 12 and 40. Tool durations (s): Read 0.2, Bash
// 0.4, Agent 7. Input by part (sonnet/tool_results): builtin tools 8000, github's MCP tools
// 4000, system prompt 7000, CLAUDE.md 1000 read; Read results 300 written, 5 uncached. One
// cache miss, after the compaction: 20300 tokens. The scenario carries no person and no cost, so the metrics of people, budgets
// and reloaded files hold only the series that exist from the start, at 0.
// scenarioFile holds the expected exposition of scenario: every family of MetricNames, every
// series and bucket.
const scenarioFile = "testdata/scenario.prom"

var update = flag.Bool("update", false, "rewrite "+scenarioFile+" from what the metrics expose")

// TestScenario compares what the metrics expose after scenario with scenarioFile. Run with
// -update after checking a change by eye.
func TestScenario(t *testing.T) {
	m, reg := newMetrics(t, WithReplica(), WithBudgetEnforcement())
	m.SessionsActive(2)
	feed(m, scenario()...)
	m.SessionsActive(1)

	// The float sum of the four sonnet costs, 0.08928 + 0.00864 + 0.18 + 0.0285 = 0.30642 $, as
	// the counter adds them.
	sonnetCost := 0.08928
	for _, c := range []float64{0.00864, 0.18, 0.0285} {
		sonnetCost += c
	}
	if d := sonnetCost - 0.30642; d > 1e-15 || d < -1e-15 {
		t.Fatalf("hand sum %v is not 0.30642", sonnetCost)
	}
	if *update {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if slices.Contains(MetricNames, mf.GetName()) {
				if err := enc.Encode(mf); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(scenarioFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(scenarioFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, bytes.NewReader(want), MetricNames...); err != nil {
		t.Errorf("%v (run go test ./metrics -run TestScenario -update)", err)
	}
	cost := regexp.MustCompile(`(?m)^` + nameCost + `\{[^}]*model="` + sonnet + `"[^}]*\} (\S+)$`).FindSubmatch(want)
	if cost == nil || string(cost[1]) != formatFloat(sonnetCost) {
		t.Errorf("%s holds sonnet's cost as %q, want the hand sum %v", scenarioFile, cost, formatFloat(sonnetCost))
	}
}

// TestFamilies is the metrics a reader of a dashboard meets: each family's type, labels and, for
// a histogram, its buckets' upper bounds.
func TestFamilies(t *testing.T) {
	want := []struct {
		name    string
		typ     dto.MetricType
		labels  string
		buckets []float64
	}{
		{nameTokens, dto.MetricType_COUNTER, "model team type user", nil},
		{nameCacheCreation, dto.MetricType_COUNTER, "model ttl", nil},
		{nameCost, dto.MetricType_COUNTER, "model team user", nil},
		{nameUnpriced, dto.MetricType_COUNTER, "model", nil},
		{nameRequests, dto.MetricType_COUNTER, "code kind model stop_reason", nil},
		{nameRequestDuration, dto.MetricType_HISTOGRAM, "kind model", durationBuckets},
		{nameTTFT, dto.MetricType_HISTOGRAM, "model", durationBuckets},
		{nameContextTokens, dto.MetricType_HISTOGRAM, "model", contextBuckets},
		{nameRequestMessages, dto.MetricType_HISTOGRAM, "kind", messagesBuckets},
		{nameContentBlocks, dto.MetricType_COUNTER, "role type", nil},
		{nameCompactions, dto.MetricType_COUNTER, "trigger", nil},
		{nameTurns, dto.MetricType_COUNTER, "outcome", nil},
		{nameTurnsHandedOff, dto.MetricType_COUNTER, "", nil},
		{nameTurnDuration, dto.MetricType_HISTOGRAM, "", turnDurationBuckets},
		{nameTurnCost, dto.MetricType_HISTOGRAM, "", turnCostBuckets},
		{nameToolCalls, dto.MetricType_COUNTER, "outcome tool", nil},
		{nameToolDuration, dto.MetricType_HISTOGRAM, "tool", toolDurationBuckets},
		{nameSubagents, dto.MetricType_COUNTER, "type", nil},
		{nameSessionsActive, dto.MetricType_GAUGE, "", nil},
		{nameNotDecoded, dto.MetricType_COUNTER, "body reason", nil},
		{nameLabelOverflow, dto.MetricType_COUNTER, "label", nil},
		{nameReloads, dto.MetricType_COUNTER, "file result", nil},
		{nameReloadOK, dto.MetricType_GAUGE, "file", nil},
		{nameBudgetRefusals, dto.MetricType_COUNTER, "scope window", nil},
		{nameServerTools, dto.MetricType_COUNTER, "tool", nil},
		{nameInputByPart, dto.MetricType_COUNTER, "cache name part", nil},
		{nameCacheMisses, dto.MetricType_COUNTER, "cause", nil},
		{nameCacheMissed, dto.MetricType_COUNTER, "cause", nil},
		{nameCacheMissCost, dto.MetricType_COUNTER, "cause", nil},
	}
	// A cap of one tool name, so that a label overflows.
	m, reg := newMetrics(t, WithReplica(), WithBudgetEnforcement(), WithMaxToolNames(1))
	feed(m, scenario()...)
	m.ConfigLoaded("budgets", nil)
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mustGather(t, reg) {
		got[mf.GetName()] = mf
	}
	var names []string
	for _, w := range want {
		names = append(names, w.name)
		mf := got[w.name]
		if mf == nil {
			t.Errorf("%s: not exposed", w.name)
			continue
		}
		if mf.GetType() != w.typ {
			t.Errorf("%s: type %v, want %v", w.name, mf.GetType(), w.typ)
		}
		labels := map[string]bool{}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		if got := strings.Join(slices.Sorted(maps.Keys(labels)), " "); got != w.labels {
			t.Errorf("%s: labels %q, want %q", w.name, got, w.labels)
		}
		if w.buckets == nil {
			continue
		}
		for _, s := range mf.GetMetric() {
			var bounds []float64
			for _, b := range s.GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, w.buckets) {
				t.Errorf("%s: buckets %v, want %v", w.name, bounds, w.buckets)
			}
		}
	}
	if !slices.Equal(names, MetricNames) {
		t.Errorf("families %v, want MetricNames %v", names, MetricNames)
	}
}

// formatFloat prints v as the text exposition does.
func formatFloat(v float64) string { return fmt.Sprint(v) }

// wantNotDecodedHeader is the HELP and TYPE lines of cctrace_bodies_not_decoded_total.
const wantNotDecodedHeader = `# HELP cctrace_bodies_not_decoded_total Request and response bodies forwarded but not decoded because one of cctrace's memory budgets was full (reason: copy_budget, too many bodies arriving at once; decode_queue, decoding falling behind): load shed, their requests tracked without what the bodies say.
# TYPE cctrace_bodies_not_decoded_total counter
`

// TestBodiesNotDecoded checks that cctrace_bodies_not_decoded_total counts the bodies cctrace
// shed under load, by body and budget, and not those that failed to decode for any other reason.
func TestBodiesNotDecoded(t *testing.T) {
	m, reg := newMetrics(t)
	feed(m,
		chatSpec{trace: 1, kind: instrument.RequestTurn, start: 0, end: 100, status: 200,
			reqParseError: wire.NotDecodedQueueFull}.span(),
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 200, end: 300, status: 200,
			respParseError: wire.NotDecodedCopyBudget + "9 bytes of other bodies (copy budget of 8 bytes)"}.span(),
		chatSpec{trace: 1, kind: instrument.RequestTurn, start: 400, end: 500, status: 200,
			reqParseError: wire.NotDecodedCopyBudget + "1 bytes", respParseError: wire.NotDecodedQueueFull}.span(),
		chatSpec{trace: 1, kind: instrument.RequestTurn, start: 500, end: 600, status: 200,
			reqParseError: wire.NotDecoded + "a budget this test does not know"}.span(),
		chatSpec{trace: 2, kind: instrument.RequestTurn, start: 600, end: 700, status: 400,
			reqParseError: "decoding request body: not a JSON object", respParseError: "decoding response body: unexpected EOF"}.span(),
		chatSpec{trace: 2, model: sonnet, kind: instrument.RequestTurn, start: 800, end: 900, status: 200}.span(),
	)
	want := wantNotDecodedHeader + `cctrace_bodies_not_decoded_total{body="request",reason="copy_budget"} 1
cctrace_bodies_not_decoded_total{body="request",reason="decode_queue"} 1
cctrace_bodies_not_decoded_total{body="request",reason="unknown"} 1
cctrace_bodies_not_decoded_total{body="response",reason="copy_budget"} 1
cctrace_bodies_not_decoded_total{body="response",reason="decode_queue"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameNotDecoded); err != nil {
		t.Error(err)
	}
}

// TestCostIsTheTrackers checks that cctrace_cost_usd_total adds the cost the tracker put on each
// chat span (instrument.WithPricing), and that an answer with usage it could not price is counted
// in cctrace_unpriced_requests_total instead.
func TestCostIsTheTrackers(t *testing.T) {
	m, reg := newMetrics(t)
	priced := chatSpec{trace: 1, model: "mystery-model-1", kind: instrument.RequestTurn, start: 0, end: 100,
		status: 200, stop: "end_turn", usage: &wire.Usage{InputTokens: 3}}.span()
	priced.Chat.Cost, priced.Chat.Priced = 3, true
	unpriced := chatSpec{trace: 1, model: "mystery-model-2", kind: instrument.RequestTurn, start: 0, end: 100,
		status: 200, stop: "end_turn", usage: &wire.Usage{InputTokens: 3}}.span()
	feed(m, priced, unpriced)
	const want = `
# HELP cctrace_cost_usd_total Estimated cost in US dollars from the price table, by model, person and team.
# TYPE cctrace_cost_usd_total counter
cctrace_cost_usd_total{model="mystery-model-1",team="none",user="unknown"} 3
# HELP cctrace_unpriced_requests_total Requests with usage whose model is not in the price table, so their cost is not counted.
# TYPE cctrace_unpriced_requests_total counter
cctrace_unpriced_requests_total{model="mystery-model-2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameCost, nameUnpriced); err != nil {
		t.Error(err)
	}
}

func TestExemplarsOnOpenMetricsScrape(t *testing.T) {
	m, reg := newMetrics(t)
	feed(m,
		chatSpec{trace: 0xab, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 2000, firstChunk: 300,
			status: 200, stop: "end_turn", messages: 1, usage: &wire.Usage{InputTokens: 10, OutputTokens: 20}}.span(),
		toolSpan(0xab, "Read", "success", 2000, 2100),
		turnSpan(0xab, "end_turn", 0, 3000),
	)
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()

	scrape := func(t *testing.T, accept string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		return string(body)
	}

	const trace = `trace_id="abababababababababababababababab"`
	om := scrape(t, "application/openmetrics-text; version=1.0.0; charset=utf-8")
	for _, pattern := range []string{
		`cctrace_requests_total\{code="200",kind="turn",model="` + sonnet + `",stop_reason="end_turn"\} 1(\.0)? # \{` + trace + `\} 1(\.0)? `,
		`cctrace_tokens_total\{model="` + sonnet + `",team="none",type="output",user="unknown"\} 20(\.0)? # \{` + trace + `\} 20(\.0)? `,
		`cctrace_cost_usd_total\{model="` + sonnet + `",team="none",user="unknown"\} \S+ # \{` + trace + `\} `,
		`cctrace_request_duration_seconds_bucket\{kind="turn",model="` + sonnet + `",le="2.56"\} 1 # \{` + trace + `\} 2(\.0)? `,
		`cctrace_time_to_first_token_seconds_bucket\{model="` + sonnet + `",le="0.32"\} 1 # \{` + trace + `\} 0.3 `,
		`cctrace_tool_calls_total\{outcome="success",tool="Read"\} 1(\.0)? # \{` + trace + `\} 1(\.0)? `,
		`cctrace_turn_duration_seconds_bucket\{le="5(\.0)?"\} 1 # \{` + trace + `\} 3(\.0)? `,
	} {
		if !regexp.MustCompile(`(?m)^` + pattern).MatchString(om) {
			t.Errorf("OpenMetrics scrape has no line matching %s", pattern)
		}
	}
	if !strings.HasSuffix(om, "# EOF\n") {
		t.Error("OpenMetrics scrape does not end with # EOF")
	}

	if text := scrape(t, "text/plain"); strings.Contains(text, "trace_id") {
		t.Error("the Prometheus text format cannot carry exemplars, yet a trace id appears in it")
	}
}

func TestNoExemplarWithoutTraceID(t *testing.T) {
	m, reg := newMetrics(t)
	s := toolSpan(0, "Read", "success", 0, 100)
	feed(m, s)
	if ex := gatherFamily(t, reg, nameToolCalls).GetMetric()[0].GetCounter().GetExemplar(); ex != nil {
		t.Errorf("exemplar %v on a span without a trace id", ex)
	}
}

// gatherFamily gathers reg and returns the metric family called name, failing t without it.
func gatherFamily(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	for _, mf := range mustGather(t, reg) {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("%s not gathered", name)
	return nil
}

// TestExemplarFollowsTrace checks that spans of different traces, ending interleaved, each carry
// the trace id of their own trace, though spans of the same trace share their exemplar labels.
func TestExemplarFollowsTrace(t *testing.T) {
	m, reg := newMetrics(t)
	for _, tc := range []struct {
		trace byte
		tool  string
	}{{1, "Read"}, {1, "Read"}, {2, "Grep"}, {1, "Edit"}, {2, "Bash"}, {0, "Write"}, {3, "Glob"}} {
		feed(m, toolSpan(tc.trace, tc.tool, "success", 0, 100))
	}
	want := map[string]string{
		"Read": traceID(1).String(), "Grep": traceID(2).String(), "Edit": traceID(1).String(),
		"Bash": traceID(2).String(), "Write": "", "Glob": traceID(3).String(),
	}
	series := gatherFamily(t, reg, nameToolCalls).GetMetric()
	if len(series) != len(want) {
		t.Fatalf("%d tool series, want %d", len(series), len(want))
	}
	for _, mt := range series {
		tool := ""
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == "tool" {
				tool = lp.GetValue()
			}
		}
		got := ""
		if ex := mt.GetCounter().GetExemplar(); ex != nil {
			for _, lp := range ex.GetLabel() {
				got += lp.GetName() + "=" + lp.GetValue()
			}
		}
		if w := want[tool]; (w == "" && got != "") || (w != "" && got != "trace_id="+w) {
			t.Errorf("tool %s: exemplar labels %q, want trace_id=%s", tool, got, w)
		}
	}
}

func TestStatusCodeLabel(t *testing.T) {
	for s := -1; s <= 1000; s++ {
		want := strconv.Itoa(s)
		if s == 0 {
			want = codeError
		}
		if got := statusCode(&wire.Response{Status: s}); got != want {
			t.Errorf("statusCode(%d) = %q, want %q", s, got, want)
		}
	}
	if got := statusCode(&wire.Response{Status: 200, Err: "stream cut"}); got != codeError {
		t.Errorf("statusCode of a failed transport = %q, want %q", got, codeError)
	}
	if got := statusCode(nil); got != codeError {
		t.Errorf("statusCode(nil) = %q, want %q", got, codeError)
	}
}

func TestLabelCaps(t *testing.T) {
	m, reg := newMetrics(t, WithMaxToolNames(2), WithMaxModels(1))
	feed(m,
		toolSpan(1, "Read", "success", 0, 100),
		toolSpan(1, "mcp__github__create_issue", "success", 0, 100),
		toolSpan(1, "mcp__slack__post", "error", 0, 100),
		toolSpan(1, "Read", "error", 0, 100),
		toolSpan(1, "Write", "success", 0, 100),
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 100, status: 200}.span(),
		chatSpec{trace: 1, model: haiku, kind: instrument.RequestAuxiliary, start: 0, end: 100, status: 200}.span(),
		chatSpec{trace: 1, model: sonnet, kind: instrument.RequestTurn, start: 0, end: 100, status: 200}.span(),
	)
	const want = `
# HELP cctrace_tool_calls_total Tool calls by tool and outcome.
# TYPE cctrace_tool_calls_total counter
cctrace_tool_calls_total{outcome="error",tool="Read"} 1
cctrace_tool_calls_total{outcome="error",tool="other"} 1
cctrace_tool_calls_total{outcome="success",tool="Read"} 1
cctrace_tool_calls_total{outcome="success",tool="mcp__github__create_issue"} 1
cctrace_tool_calls_total{outcome="success",tool="other"} 1
# HELP cctrace_requests_total API request attempts by model, request kind, HTTP status ("error" when none or the transport failed) and stop reason.
# TYPE cctrace_requests_total counter
cctrace_requests_total{code="200",kind="auxiliary",model="other",stop_reason="none"} 1
cctrace_requests_total{code="200",kind="turn",model="claude-sonnet-4-5-20250929",stop_reason="none"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameToolCalls, nameRequests); err != nil {
		t.Error(err)
	}
}

func TestLabelValuesAreCleaned(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  Read ", "Read"},
		{"bad\xff\xfeutf8", "bad\uFFFDutf8"}, // one replacement per run of invalid bytes
		{strings.Repeat("a", 200), strings.Repeat("a", maxLabelBytes)},
		{strings.Repeat("é", 100), strings.Repeat("é", maxLabelBytes/2)},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := cleanLabel(tc.in); got != tc.want {
				t.Errorf("cleanLabel(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("a sink fed garbage does not panic", func(t *testing.T) {
		m, reg := newMetrics(t)
		feed(m,
			toolSpan(1, "\xff\xfe", "\xff", 0, 100),
			&instrument.Span{Kind: instrument.KindChat}, // no Chat
			&instrument.Span{Kind: instrument.KindTool}, // no Tool
			&instrument.Span{Kind: instrument.KindTurn, Start: at(100), End: at(0)},
			&instrument.Span{Kind: instrument.KindSubagent},
			&instrument.Span{Kind: instrument.KindChat, Chat: &instrument.Chat{Messages: -1}},
			nil,
		)
		const want = `
# HELP cctrace_tool_calls_total Tool calls by tool and outcome.
# TYPE cctrace_tool_calls_total counter
cctrace_tool_calls_total{outcome="unknown",tool="unknown"} 1
cctrace_tool_calls_total{outcome="�",tool="�"} 1
# HELP cctrace_turns_total Finished agentic turns by outcome.
# TYPE cctrace_turns_total counter
cctrace_turns_total{outcome="unknown"} 1
# HELP cctrace_subagents_total Subagent runs by subagent type.
# TYPE cctrace_subagents_total counter
cctrace_subagents_total{type="unknown"} 1
# HELP cctrace_requests_total API request attempts by model, request kind, HTTP status ("error" when none or the transport failed) and stop reason.
# TYPE cctrace_requests_total counter
cctrace_requests_total{code="error",kind="other",model="unknown",stop_reason="none"} 1
# HELP cctrace_turn_duration_seconds Duration of agentic turns, from the human prompt to the final response.
# TYPE cctrace_turn_duration_seconds histogram
cctrace_turn_duration_seconds_bucket{le="1"} 0
cctrace_turn_duration_seconds_bucket{le="2.5"} 0
cctrace_turn_duration_seconds_bucket{le="5"} 0
cctrace_turn_duration_seconds_bucket{le="10"} 0
cctrace_turn_duration_seconds_bucket{le="30"} 0
cctrace_turn_duration_seconds_bucket{le="60"} 0
cctrace_turn_duration_seconds_bucket{le="120"} 0
cctrace_turn_duration_seconds_bucket{le="300"} 0
cctrace_turn_duration_seconds_bucket{le="600"} 0
cctrace_turn_duration_seconds_bucket{le="1200"} 0
cctrace_turn_duration_seconds_bucket{le="1800"} 0
cctrace_turn_duration_seconds_bucket{le="3600"} 0
cctrace_turn_duration_seconds_bucket{le="+Inf"} 0
cctrace_turn_duration_seconds_sum 0
cctrace_turn_duration_seconds_count 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			nameToolCalls, nameTurns, nameSubagents, nameRequests, nameTurnDuration); err != nil {
			t.Error(err)
		}
	})
}

func TestPromlint(t *testing.T) {
	m, reg := newMetrics(t)
	m.SessionsActive(1)
	feed(m, scenario()...)
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestFeaturesOff: the families of features that are off (replicas, budget enforcement) and
// label overflow before any label overflows carry no series, not a row of zeros.
func TestFeaturesOff(t *testing.T) {
	m, reg := newMetrics(t)
	feed(m, scenario()...)
	for _, mf := range mustGather(t, reg) {
		switch mf.GetName() {
		case nameTurnsHandedOff, nameBudgetRefusals, nameLabelOverflow:
			t.Errorf("%s exposed without its feature: %d series", mf.GetName(), len(mf.GetMetric()))
		}
	}
}

func mustGather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func TestMetricNames(t *testing.T) {
	m, reg := newMetrics(t, WithReplica(), WithBudgetEnforcement(), WithMaxToolNames(1))
	m.SessionsActive(1)
	feed(m, scenario()...)
	m.ConfigLoaded("directory", nil)
	var gathered []string
	for _, mf := range mustGather(t, reg) {
		if strings.HasPrefix(mf.GetName(), "cctrace_") {
			gathered = append(gathered, mf.GetName())
		}
	}
	want := m.Names()
	slices.Sort(want)
	if !slices.Equal(gathered, want) {
		t.Errorf("gathered cctrace families %v, Names() %v", gathered, want)
	}
	if !slices.Equal(m.Names(), MetricNames) {
		t.Error("Names() differs from MetricNames")
	}
	for _, prefix := range []string{"go_", "process_"} {
		found := false
		for _, mf := range mustGather(t, reg) {
			found = found || strings.HasPrefix(mf.GetName(), prefix)
		}
		if !found {
			t.Errorf("no %s* metrics: New must register the runtime collectors", prefix)
		}
	}
}

func TestNew(t *testing.T) {
	t.Run("nil registerer", func(t *testing.T) {
		if _, err := New(nil); err == nil {
			t.Error("New(nil): no error")
		}
	})
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"zero tool names", WithMaxToolNames(0), "max tool names must be at least 1, got 0"},
		{"negative models", WithMaxModels(-3), "max models must be at least 1, got -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(prometheus.NewRegistry(), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("registered twice", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := New(reg); err != nil {
			t.Fatal(err)
		}
		_, err := New(reg)
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			t.Errorf("second New on one registry: %v, want a wrapped AlreadyRegisteredError", err)
		}
	})
	t.Run("runtime collectors already registered", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if _, err := New(reg); err != nil {
			t.Errorf("New: %v", err)
		}
	})
}

func TestCacheCreationSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		usage wire.Usage
		want  string
	}{
		{"no split reported: no series", wire.Usage{CacheCreationInputTokens: 700}, ""},
		{"1h only", wire.Usage{CacheCreationInputTokens: 700, CacheCreation1h: 700}, `
# HELP cctrace_cache_creation_tokens_total Cache write tokens by TTL (5m or 1h), when the upstream reports the split.
# TYPE cctrace_cache_creation_tokens_total counter
cctrace_cache_creation_tokens_total{model="claude-haiku-4-5-20251001",ttl="1h"} 700
cctrace_cache_creation_tokens_total{model="claude-haiku-4-5-20251001",ttl="5m"} 0
`},
		{"5m only", wire.Usage{CacheCreationInputTokens: 700, CacheCreation5m: 700}, `
# HELP cctrace_cache_creation_tokens_total Cache write tokens by TTL (5m or 1h), when the upstream reports the split.
# TYPE cctrace_cache_creation_tokens_total counter
cctrace_cache_creation_tokens_total{model="claude-haiku-4-5-20251001",ttl="1h"} 0
cctrace_cache_creation_tokens_total{model="claude-haiku-4-5-20251001",ttl="5m"} 700
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t)
			u := tc.usage
			feed(m, chatSpec{trace: 1, model: haiku, kind: instrument.RequestAuxiliary, start: 0, end: 100,
				status: 200, stop: "end_turn", usage: &u}.span())
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), nameCacheCreation); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRequestWithoutBody(t *testing.T) {
	// A body over the parse limit: no model in the request, no message count, and a transport
	// failure, so no model in the response either.
	m, reg := newMetrics(t)
	feed(m, chatSpec{trace: 1, kind: instrument.RequestOther, start: 0, end: 100, status: 200,
		err: "unexpected EOF"}.span())
	const want = `
# HELP cctrace_request_messages Messages carried by each API request.
# TYPE cctrace_request_messages histogram
cctrace_request_messages_bucket{kind="other",le="1"} 1
cctrace_request_messages_bucket{kind="other",le="2"} 1
cctrace_request_messages_bucket{kind="other",le="5"} 1
cctrace_request_messages_bucket{kind="other",le="10"} 1
cctrace_request_messages_bucket{kind="other",le="20"} 1
cctrace_request_messages_bucket{kind="other",le="50"} 1
cctrace_request_messages_bucket{kind="other",le="100"} 1
cctrace_request_messages_bucket{kind="other",le="200"} 1
cctrace_request_messages_bucket{kind="other",le="500"} 1
cctrace_request_messages_bucket{kind="other",le="1000"} 1
cctrace_request_messages_bucket{kind="other",le="+Inf"} 1
cctrace_request_messages_sum{kind="other"} 0
cctrace_request_messages_count{kind="other"} 1
# HELP cctrace_requests_total API request attempts by model, request kind, HTTP status ("error" when none or the transport failed) and stop reason.
# TYPE cctrace_requests_total counter
cctrace_requests_total{code="error",kind="other",model="unknown",stop_reason="none"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), nameRequestMessages, nameRequests, nameTokens, nameCost); err != nil {
		t.Error(err)
	}
}
