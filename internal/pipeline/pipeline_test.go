package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/internal/replay"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Pipeline is what cctrace gives its proxy to observe exchanges with.
var _ proxy.Observer = (*pipeline.Pipeline)(nil)

// spans collects the tracker's output for the assertions below.
type spans struct {
	mu    sync.Mutex
	ended []*instrument.Span
}

func (s *spans) SpanStarted(*instrument.Span) {}
func (s *spans) SpanEnded(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *sp
	s.ended = append(s.ended, &c)
}
func (s *spans) SessionsActive(int) {}

// waitChat waits until the chat span of the proxy's exchange id has ended.
func (s *spans) waitChat(t *testing.T, id uint64) {
	t.Helper()
	deadline := time.Now().Add(harness.Patience)
	for {
		s.mu.Lock()
		for _, sp := range s.ended {
			if sp.Chat != nil && sp.Chat.Request.ExchangeID == id {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("exchange %d not reported within %v", id, harness.Patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRecordedSessionsThroughProxy sends the requests Claude Code made in each recorded session
// (testdata/claude-code) through the real proxy to the fake API running the same scenario, with
// the pipeline feeding a tracker and the Prometheus metrics. It checks that the metrics count
// exactly the tokens the fake served, and that the live path builds the same turns as replaying
// the recording does.
func TestRecordedSessionsThroughProxy(t *testing.T) {
	dirs, _ := replay.Sessions("../../testdata/claude-code")
	n := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if _, err := fakeapi.Scenario(name); err != nil {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) { throughProxy(t, dir, name) })
	}
	if n < 8 {
		t.Fatalf("ran %d recorded sessions, want every scenario of testdata/claude-code", n)
	}
}

func throughProxy(t *testing.T, dir, scenario string) {
	script, err := fakeapi.Scenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeapi.New(script, fakeapi.WithChunkSize(7))
	upstream := httptest.NewServer(fake)
	defer upstream.Close()

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &spans{}
	tr := instrument.New(instrument.Sinks{m, rec})
	pipe := pipeline.New(tr, pipeline.WithTickInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	go pipe.Run(ctx)

	u, _ := url.Parse(upstream.URL)
	p, err := proxy.New(u, pipe)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw := loadRaw(t, dir)
	client := front.Client()
	for i, ex := range exchanges {
		r := raw[ex.Seq]
		req, err := http.NewRequest(r.method, front.URL+r.pathQuery, bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range r.headers {
			if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Connection") {
				continue
			}
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		req.Header.Set("X-Api-Key", "sk-ant-pipeline-test-key")
		// A stream the client walked away from (the user pressed Escape) is cut again after as
		// long as it ran in the recording.
		ctx, cancelReq := context.WithCancel(context.Background())
		if r.clientCut > 0 {
			ctx, cancelReq = context.WithTimeout(context.Background(), r.clientCut)
		}
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			cancelReq()
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil && !(r.clientCut > 0 && errors.Is(err, context.DeadlineExceeded)) {
			cancelReq()
			t.Fatalf("reading response %d: %v", ex.Seq, err)
		}
		resp.Body.Close()
		cancelReq()
		if r.clientCut > 0 {
			// The user types the next prompt seconds after pressing Escape; by then the proxy has
			// seen the cut. Sending it at once would race the cut's report.
			rec.waitChat(t, uint64(i+1))
		}
	}
	front.Close() // every exchange has ended: the proxy has reported them all
	cancel()
	<-pipe.Done()

	var served fakeapi.Usage
	for _, sv := range fake.Served() {
		if sv.Path == "/v1/messages" {
			served = served.Add(sv.Usage)
			// A sub-inference's tokens (an advisor's) are billed beside the answer's own.
			for _, it := range sv.Iterations {
				if it.Type != "message" {
					served = served.Add(fakeapi.Usage{InputTokens: it.InputTokens, OutputTokens: it.OutputTokens,
						CacheReadInputTokens: it.CacheReadInputTokens, CacheCreationInputTokens: it.CacheCreationInputTokens})
				}
			}
		}
	}
	for typ, want := range map[string]int{
		"input":          served.InputTokens,
		"output":         served.OutputTokens,
		"cache_read":     served.CacheReadInputTokens,
		"cache_creation": served.CacheCreationInputTokens,
	} {
		got := sumMetric(t, reg, "cctrace_tokens_total", "type", typ)
		if got != float64(want) {
			t.Errorf("cctrace_tokens_total{type=%q} = %v, fake served %d", typ, got, want)
		}
	}

	// The live path and the replay of the recording agree on every turn.
	if got, want := shape(rec.ended), shape(replayed(t, dir)); got != want {
		t.Errorf("turns through the proxy:\n%s\nwant (replayed recording):\n%s", got, want)
	}
	requests := 0
	for _, sv := range fake.Served() {
		if sv.Path == "/v1/messages" {
			requests++
		}
	}
	if got := sumAll(t, reg, "cctrace_requests_total"); got < float64(requests) {
		t.Errorf("cctrace_requests_total = %v, want at least the %d Messages API requests", got, requests)
	}
}

type rawExchange struct {
	method, pathQuery string
	headers           http.Header
	body              []byte
	// clientCut is how long a 200 stream ran before the client went away in the recording
	// (no message_stop and no error event); zero for every complete exchange.
	clientCut time.Duration
}

// loadRaw reads the recorded requests as sent, for sending them again.
func loadRaw(t *testing.T, dir string) map[int]rawExchange {
	t.Helper()
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]rawExchange{}
	for _, ex := range exchanges {
		out[ex.Seq] = rawExchange{
			method:    ex.Request.Method,
			pathQuery: ex.Request.Path + queryOf(ex),
			headers:   ex.Header,
			body:      ex.Body,
			clientCut: clientCut(t, filepath.Join(dir, fmt.Sprintf("%03d.json", ex.Seq))),
		}
	}
	return out
}

// clientCut returns how long the recorded exchange in file ran when its stream ended without
// message_stop or an error event, that is when the client went away; else zero.
func clientCut(t *testing.T, file string) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Time, End time.Time
		Status    int
		Response  string
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if rec.Status != http.StatusOK || !strings.Contains(rec.Response, "event: message_start") ||
		strings.Contains(rec.Response, "event: message_stop") || strings.Contains(rec.Response, "event: error") {
		return 0
	}
	return rec.End.Sub(rec.Time)
}

func queryOf(ex *replay.Exchange) string {
	if ex.Query == "" {
		return ""
	}
	return "?" + ex.Query
}

func replayed(t *testing.T, dir string) []*instrument.Span {
	t.Helper()
	exchanges, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &spans{}
	tr := instrument.New(rec)
	replay.Play(tr, exchanges)
	tr.Close(exchanges[len(exchanges)-1].Response.End.Add(time.Minute))
	return rec.ended
}

// shape summarises turns: per turn root, its outcome and counts, in order of start.
func shape(ended []*instrument.Span) string {
	var turns []*instrument.Span
	for _, s := range ended {
		if s.Kind == instrument.KindTurn {
			turns = append(turns, s)
		}
	}
	sort.SliceStable(turns, func(i, j int) bool { return turns[i].Start.Before(turns[j].Start) })
	var b strings.Builder
	for _, s := range turns {
		tt := s.Turn
		fmt.Fprintf(&b, "turn %d %s trigger=%s compaction=%s requests=%d retries=%d tools=%v failures=%v subagents=%d usage=%+v\n",
			tt.Index, tt.Outcome, tt.Trigger, tt.Compaction, tt.Requests, tt.Retries, tt.ToolCounts, tt.ToolFailures, tt.Subagents, tt.Usage)
	}
	return b.String()
}

func sumMetric(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

func sumAll(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
