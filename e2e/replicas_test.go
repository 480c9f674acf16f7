package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
	"github.com/cctrace/cctrace/internal/testkit/harness"
	"github.com/cctrace/cctrace/internal/testkit/nginxconf"
)

// replicaService is the OTel service name of the replicas in TestReplicasBehindNginx.
const replicaService = "cctrace-replicas"

// The prompts of the replica test's sessions; the fake API picks its reply by them.
const (
	// failoverToolPrompt gets a Bash call that runs for failoverToolTime: the replica holding
	// the session is killed while it runs.
	failoverToolPrompt = "Run a slow command."
	// failoverStreamPrompt gets, the first time, an answer that pings for failoverStreamTime
	// before it says anything: it is in flight on the killed replica. Its retry gets a quick one.
	failoverStreamPrompt = "Tell me a slow story."
	failoverToolTime     = 40 * time.Second
	failoverStreamTime   = 60 * time.Second
)

// failoverToolCommand waits without the word sleep, which Claude Code may refuse to run in the
// foreground, and succeeds.
var failoverToolCommand = fmt.Sprintf("timeout %d tail -f /dev/null || true", int(failoverToolTime.Seconds()))

// exchangeHeader numbers each request the fake upstream gets, so that what fakeapi served can be
// joined with which replica sent it and when it ended.
const exchangeHeader = "X-Cctrace-Test-Exchange"

// replicasScript answers the replica test's sessions: failoverToolPrompt and failoverStreamPrompt
// as above, any other prompt with one Bash call, and every tool result with a closing answer.
func replicasScript() fakeapi.Script {
	return fakeapi.Script{
		Name: "replicas",
		Rules: []fakeapi.Rule{
			{Name: "title", Match: fakeapi.IsTitle, Replies: []fakeapi.Reply{{
				Text: `{"title":"Fake replicas session"}`, Usage: fakeapi.Usage{InputTokens: 157, OutputTokens: 13},
			}}},
			{Name: "side", Match: fakeapi.IsSide, Replies: []fakeapi.Reply{{
				Text: "OK", Usage: fakeapi.Usage{InputTokens: 59, OutputTokens: 5},
			}}},
			{Name: "slow_tool", Match: lastUserSaysText(failoverToolPrompt), Replies: []fakeapi.Reply{{
				Text: "I'll wait for it.",
				ToolCalls: []fakeapi.ToolCall{{Name: "Bash", Input: map[string]any{
					"command": failoverToolCommand, "description": "Wait a while",
				}}},
				Usage: fakeapi.Usage{InputTokens: 131, CacheCreationInputTokens: 4111, CacheCreation5m: 4111, OutputTokens: 61},
			}}},
			{Name: "slow_stream", Match: lastUserSaysText(failoverStreamPrompt), Replies: []fakeapi.Reply{
				{
					Text:      "Once upon a time a replica went away mid-sentence.",
					Usage:     fakeapi.Usage{InputTokens: 137, CacheCreationInputTokens: 4127, CacheCreation5m: 4127, OutputTokens: 19},
					Pings:     int(failoverStreamTime.Seconds()),
					PingEvery: time.Second,
				},
				{
					Text:  "Once upon a time another replica told the story.",
					Usage: fakeapi.Usage{InputTokens: 139, CacheReadInputTokens: 4127, OutputTokens: 17},
				},
			}},
			{Name: "main_result", Match: fakeapi.HasToolResults, Replies: []fakeapi.Reply{{
				Text:  "The command finished.",
				Usage: fakeapi.Usage{InputTokens: 149, CacheReadInputTokens: 4111, CacheCreationInputTokens: 223, CacheCreation5m: 223, OutputTokens: 11},
			}}},
			{Name: "main", Replies: []fakeapi.Reply{{
				Text: "I'll run it.",
				ToolCalls: []fakeapi.ToolCall{{Name: "Bash", Input: map[string]any{
					"command": "echo hello-from-a-replica", "description": "Print a greeting",
				}}},
				Usage: fakeapi.Usage{InputTokens: 127, CacheCreationInputTokens: 4099, CacheCreation5m: 4099, OutputTokens: 43},
			}}},
		},
		Default: fakeapi.Reply{Text: "OK.", Usage: fakeapi.Usage{InputTokens: 17, OutputTokens: 2}},
	}
}

// lastUserSaysText matches requests whose last message is a user message with text containing s.
func lastUserSaysText(s string) fakeapi.Matcher {
	return func(r *fakeapi.Request) bool {
		m := r.Last()
		if m == nil || m.Role != "user" {
			return false
		}
		for _, t := range m.Texts {
			if strings.Contains(t, s) {
				return true
			}
		}
		return false
	}
}

// replicaSession is one Claude Code session of the replica test and the prompts it runs, one
// `claude -p` after another.
type replicaSession struct {
	name    string
	id      string // chosen up front (--session-id), so that the test knows where nginx sends it
	replica int    // the replica nginx's ring names for id
	prompts []string
	turns   int // the turns its prompts make
	results []claudeResult
	err     error
}

// TestReplicasBehindNginx runs the team gateway as deploy/ ships it: three cctrace replicas
// behind nginx with deploy/nginx/cctrace.conf (consistent hashing on the session header), traces
// through the collector gateway (deploy/otel-collector/gateway.yaml, load balancing on the trace
// id) to two tail-sampling collectors (sampler.yaml) and on to Jaeger. Four real Claude Code
// sessions run at once against the fake API; two of them share a replica, and that replica is
// killed (SIGKILL) while one of its sessions waits for a slow tool and the other's answer is
// streaming. Both sessions must finish through another replica. Then:
//   - affinity: every request of a session went to the replica nginx's ring names for it, until
//     that replica died, and to one other replica after;
//   - failures: no request failed but those in flight on the killed replica, and each of those
//     Claude Code sent again and got answered;
//   - counters: the replicas' request, token and turn counters (the killed one's as read just
//     before it died), summed, equal what the upstream served;
//   - traces: every turn is one trace, even the one that moved between replicas, and every
//     span's parent is in its trace.
func TestReplicasBehindNginx(t *testing.T) {
	claudeBin := harness.Claude(t)
	harness.Require(t, harness.EnvNginx, "nginx")
	harness.Require(t, harness.EnvOtelcol, "OpenTelemetry Collector (ocb, tools/otelcol)")
	jaeger := harness.StartJaeger(t)

	// The trace path: sampler tier first, then the gateway that routes to it. Every turn is
	// kept (100 % of the rest), and decisions come soon after a turn's root arrives.
	var samplers []string
	for i := range 2 {
		c := harness.StartCollector(t, fmt.Sprintf("sampler-%d", i), "../deploy/otel-collector/sampler.yaml",
			"OTELCOL_BACKEND_ENDPOINT="+strings.TrimPrefix(jaeger.OTLPEndpoint(), "http://"),
			"OTELCOL_SAMPLE_PERCENT=100",
			"OTELCOL_DECISION_WAIT=15s",
			"OTELCOL_DECISION_WAIT_AFTER_ROOT=1s",
		)
		samplers = append(samplers, c.OTLPAddress())
	}
	gateway := harness.StartCollector(t, "gateway", "../deploy/otel-collector/gateway.yaml",
		"OTELCOL_SAMPLERS=["+strings.Join(samplers, ", ")+"]")

	// The fake upstream: one fakeapi server behind one listener per replica, so that each
	// exchange is known by the replica that forwarded it.
	api := fakeapi.New(replicasScript())
	up := &taggedUpstream{api: api}
	var upstreams []string
	for i := range 3 {
		upstreams = append(upstreams, up.listen(t, i))
	}

	// nginx with the shipped config. Before the replicas start, three placeholders on their
	// ports tell which replica nginx's ring names for a session id; the test then picks the ids
	// of its sessions so that two share a replica.
	proxyPorts := []int{harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)}
	nginxPort := harness.FreePort(t)
	nginxDir := t.TempDir()
	site := nginxSite(t, proxyPorts, nginxPort, filepath.Join(nginxDir, "access.log"))
	placeholders := startPlaceholders(t, proxyPorts)
	nginxURL := "http://127.0.0.1:" + strconv.Itoa(nginxPort)
	harness.StartNginx(t, nginxDir, site, nginxURL+"/placement")
	ring := placements(t, nginxURL, 90)
	placeholders.close()

	victim := mostPopulated(ring)
	ids := func(replica, n int) []string {
		var out []string
		for id, r := range ring {
			if r == replica && len(out) < n {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	shared := ids(victim, 2)
	sessions := []*replicaSession{
		{name: "slow-tool", id: shared[0], replica: victim, prompts: []string{failoverToolPrompt}, turns: 1},
		{name: "slow-stream", id: shared[1], replica: victim, prompts: []string{failoverStreamPrompt}, turns: 1},
		{name: "other-1", id: ids((victim+1)%3, 1)[0], replica: (victim + 1) % 3, prompts: []string{"Run echo one", "Run echo two"}, turns: 2},
		{name: "other-2", id: ids((victim+2)%3, 1)[0], replica: (victim + 2) % 3, prompts: []string{"Run echo one", "Run echo two"}, turns: 2},
	}
	slowTool, slowStream := sessions[0], sessions[1]
	t.Logf("killing replica %d later; sessions: %s %s (replica %d), %s (replica %d), %s (replica %d)",
		victim, slowTool.id, slowStream.id, victim, sessions[2].id, sessions[2].replica, sessions[3].id, sessions[3].replica)

	replicas := make([]*replica, 3)
	for i := range replicas {
		replicas[i] = startReplica(t, i, proxyPorts[i], upstreams[i], gateway.OTLPEndpoint())
	}
	accessLogStart := fileSize(t, filepath.Join(nginxDir, "access.log"))

	// The sessions, all at once.
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			home, dir := t.TempDir(), t.TempDir()
			for i, prompt := range s.prompts {
				args := []string{"--allowedTools", "Bash"}
				if i == 0 {
					args = append(args, "--session-id", s.id)
				} else {
					args = append(args, "--resume", s.id)
				}
				res, err := claudePrompt(claudeBin, home, dir, nginxURL, prompt, args...)
				if err != nil {
					s.err = fmt.Errorf("prompt %d: %w", i+1, err)
					return
				}
				s.results = append(s.results, res)
			}
		}()
	}

	// The kill: once the slow tool runs, the slow answer streams, and the replica has counted
	// everything else it forwarded, read its counters and SIGKILL it.
	killedAt, killedCounts, killErr := killWhenReady(t, replicas[victim], up, api, jaeger, sessions, slowTool.id, slowStream.id)
	wg.Wait()
	if killErr != nil {
		t.Fatalf("killing replica %d: %v", victim, killErr)
	}
	t.Logf("killed replica %d at %s", victim, killedAt.Format(time.RFC3339Nano))
	for _, s := range sessions {
		if s.err != nil {
			t.Fatalf("session %s (%s): %v", s.name, s.id, s.err)
		}
		for i, r := range s.results {
			if r.IsError || r.SessionID != s.id {
				t.Fatalf("session %s prompt %d: is_error %v, session %s: %s", s.name, i+1, r.IsError, r.SessionID, r.Result)
			}
		}
	}

	exchanges := up.joined(api.Served())

	t.Run("affinity", func(t *testing.T) {
		for _, s := range sessions {
			var before, after []int
			for _, ex := range exchanges {
				if ex.session != s.id {
					continue
				}
				if ex.start.Before(killedAt) {
					before = append(before, ex.replica)
				} else {
					after = append(after, ex.replica)
				}
			}
			if len(before) == 0 {
				t.Errorf("session %s: no request reached the upstream before the kill", s.name)
			}
			for _, r := range before {
				if r != s.replica {
					t.Errorf("session %s: a request went through replica %d before the kill, want %d (the ring's): %v", s.name, r, s.replica, before)
					break
				}
			}
			if s.replica == victim {
				if len(after) == 0 {
					t.Errorf("session %s: no request after the kill", s.name)
				}
				for _, r := range after {
					if r == victim || r != after[0] {
						t.Errorf("session %s: after the kill its requests went through replicas %v, want one replica other than %d", s.name, after, victim)
						break
					}
				}
			} else {
				for _, r := range after {
					if r != s.replica {
						t.Errorf("session %s: a request went through replica %d after the kill, want %d", s.name, r, s.replica)
						break
					}
				}
			}
		}
	})

	t.Run("failures", func(t *testing.T) {
		inFlight := func(replica int, start, end time.Time) bool {
			return replica == victim && start.Before(killedAt) && !end.Before(killedAt)
		}
		cut := 0
		for _, ex := range exchanges {
			if !ex.served.Cut {
				continue
			}
			cut++
			if !inFlight(ex.replica, ex.start, ex.end) {
				t.Errorf("exchange %d (session %s, rule %s) was cut, but it was not in flight on replica %d when it was killed",
					ex.id, ex.session, ex.served.Rule, victim)
			}
		}
		// The slow answer was in flight on the killed replica: cut there, then sent again by
		// Claude Code and answered through another replica.
		var slowCut, slowDone bool
		for _, ex := range exchanges {
			if ex.session == slowStream.id && ex.served.Rule == "slow_stream" {
				slowCut = slowCut || (ex.served.Cut && ex.replica == victim)
				slowDone = slowDone || (!ex.served.Cut && ex.replica != victim)
			}
		}
		if !slowCut || !slowDone {
			t.Errorf("the slow answer: cut on the killed replica %v, answered through another %v; want both", slowCut, slowDone)
		}
		// What nginx answered: nothing failed but requests in flight on the killed replica.
		entries := readAccessLog(t, filepath.Join(nginxDir, "access.log"), accessLogStart)
		failedOver := 0
		victimAddr := "127.0.0.1:" + strconv.Itoa(proxyPorts[victim])
		for _, e := range entries {
			if strings.Contains(e.upstreamAddr, victimAddr+", ") {
				failedOver++
			}
			if e.status < 500 {
				continue
			}
			if !strings.HasSuffix(e.upstreamAddr, victimAddr) || !inFlight(victim, e.start, e.end) {
				t.Errorf("nginx answered %d to %s (session %s, upstream %s %s) at %s: not a request in flight on the killed replica",
					e.status, e.request, e.session, e.upstreamAddr, e.upstreamStatus, e.end.Format(time.RFC3339Nano))
			}
		}
		t.Logf("%d requests cut on the killed replica, %d moved by nginx to the next replica", cut, failedOver)
	})

	t.Run("counters", func(t *testing.T) {
		var want counts
		for _, ex := range exchanges {
			if ex.served.Path != "/v1/messages" || ex.served.Cut {
				continue
			}
			want.requests++
			u := ex.served.Usage
			want.usage = want.usage.Add(fakeapi.Usage{
				InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
			})
		}
		for _, s := range sessions {
			want.turns += s.turns
		}
		got := killedCounts
		for i, r := range replicas {
			if i == victim {
				continue
			}
			c, err := r.counts()
			if err != nil {
				t.Fatal(err)
			}
			got = got.add(c)
		}
		if got != want {
			t.Errorf("the replicas' counters summed (the killed one's as read before it died):\n%+v\nwant what the upstream served:\n%+v", got, want)
		}
	})

	t.Run("traces", func(t *testing.T) {
		turns := 0
		for _, s := range sessions {
			turns += s.turns
		}
		traces := waitTurnTraces(t, jaeger, sessions)
		bySession := map[string][]harness.Trace{}
		for _, tr := range traces {
			ids := map[string]bool{}
			for _, sp := range tr.Spans {
				ids[sp.SpanID] = true
			}
			for _, sp := range tr.Spans {
				if sp.ParentSpanID != "" && !ids[sp.ParentSpanID] {
					t.Errorf("trace %s: span %s %q (from %v) has parent %s, which is not in the trace",
						tr.TraceID, sp.SpanID, sp.OperationName, sp.Process["service.instance.id"], sp.ParentSpanID)
				}
			}
			if session := traceSession(tr); session != "" {
				bySession[session] = append(bySession[session], tr)
			}
		}
		for _, s := range sessions {
			got := bySession[s.id]
			if len(got) != s.turns {
				t.Errorf("session %s: %d traces, want one per turn, %d:\n%s", s.name, len(got), s.turns, describeTraces(got))
				continue
			}
			for _, tr := range got {
				if roots := turnRoots(tr); len(roots) == 0 {
					t.Errorf("session %s: trace %s has no invoke_agent root:\n%s", s.name, tr.TraceID, describeTraces([]harness.Trace{tr}))
				}
			}
		}
		// The turn that moved: one trace, whose root is the part the surviving replica carried
		// on (it did not see the turn's start, and saw its end). The killed replica held its
		// part of the turn until the turn's end (a cctrace exports a turn's spans together), so
		// it died with them: nothing of it is in the trace, rather than spans whose parent never
		// came.
		if got := bySession[slowTool.id]; len(got) == 1 {
			from := map[any]bool{}
			for _, sp := range got[0].Spans {
				from[sp.Process["service.instance.id"]] = true
			}
			if from[replicaInstance(victim)] || len(from) != 1 {
				t.Errorf("the moved turn's trace has spans from %v, want only the replica that took it over", keys(from))
			}
			for _, root := range turnRoots(got[0]) {
				if root.Tags["cctrace.turn.trigger"] == "prompt" || root.Tags["cctrace.turn.outcome"] != "end_turn" {
					t.Errorf("the moved turn's root: trigger %v, outcome %v; want the part that went on from the middle to the end",
						root.Tags["cctrace.turn.trigger"], root.Tags["cctrace.turn.outcome"])
				}
			}
		}
	})
}

// nginxSite is deploy/nginx/cctrace.conf with its replicas on 127.0.0.1 at ports, its listener
// on 127.0.0.1:listen and its access log at accessLog.
func nginxSite(t *testing.T, ports []int, listen int, accessLog string) string {
	t.Helper()
	raw, err := os.ReadFile("../" + nginxconf.Path)
	if err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for _, p := range ports {
		replicas = append(replicas, "127.0.0.1:"+strconv.Itoa(p))
	}
	site, err := nginxconf.Site(string(raw), "127.0.0.1:"+strconv.Itoa(listen), accessLog, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return site
}

// placeholdersT stands in for the replicas on their ports while the test learns nginx's ring.
type placeholdersT struct{ servers []*http.Server }

func startPlaceholders(t *testing.T, ports []int) *placeholdersT {
	t.Helper()
	p := &placeholdersT{}
	for i, port := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("placeholder on %d: %v", port, err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, i)
		})}
		go srv.Serve(ln)
		p.servers = append(p.servers, srv)
	}
	t.Cleanup(p.close)
	return p
}

func (p *placeholdersT) close() {
	for _, s := range p.servers {
		s.Close()
	}
}

// placements asks nginx where n new session ids go: placeholder i answers "i".
func placements(t *testing.T, nginxURL string, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	client := &http.Client{Timeout: 5 * time.Second}
	for range n {
		id := newUUID(t)
		req, err := http.NewRequest(http.MethodGet, nginxURL+"/placement", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Claude-Code-Session-Id", id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var replica int
		_, err = fmt.Fscan(resp.Body, &replica)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("placement of %s: status %d, %v", id, resp.StatusCode, err)
		}
		out[id] = replica
	}
	return out
}

// mostPopulated returns the replica the most ids landed on.
func mostPopulated(ring map[string]int) int {
	n := map[int]int{}
	best := 0
	for _, r := range ring {
		n[r]++
		if n[r] > n[best] {
			best = r
		}
	}
	return best
}

func newUUID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/uuid")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// replica is one `cctrace serve` process of the replica test.
type replica struct {
	*harness.Process
	index      int
	metricsURL string
}

func replicaInstance(i int) string { return "replica-" + strconv.Itoa(i) }

// startReplica starts replica i on proxyPort, forwarding to upstream and exporting to otlp, and
// waits for its /healthz. t.Cleanup stops it (SIGTERM) unless it was killed.
func startReplica(t *testing.T, i, proxyPort int, upstream, otlp string) *replica {
	t.Helper()
	metricsPort := harness.FreePort(t)
	return &replica{
		Process: serveCctrace(t, []string{
			"--listen", "127.0.0.1:" + strconv.Itoa(proxyPort),
			"--metrics-listen", "127.0.0.1:" + strconv.Itoa(metricsPort),
			"--upstream", upstream,
			"--turn-idle-timeout", "2m",
			"--shutdown-grace", "5s",
			"--replica"},
			"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp,
			"OTEL_SERVICE_NAME="+replicaService,
			"OTEL_RESOURCE_ATTRIBUTES=service.instance.id="+replicaInstance(i),
			"OTEL_BSP_SCHEDULE_DELAY=100",
		),
		index:      i,
		metricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort),
	}
}

// counts is what the test compares between the replicas' counters and the upstream.
type counts struct {
	requests int // Messages API requests (cctrace_requests_total, kind other than "other")
	turns    int
	usage    fakeapi.Usage // only the four totals: input, output, cache read, cache creation
}

func (c counts) add(d counts) counts {
	return counts{requests: c.requests + d.requests, turns: c.turns + d.turns, usage: c.usage.Add(d.usage)}
}

// counts reads the replica's counters from its /metrics.
func (r *replica) counts() (counts, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(r.metricsURL + "/metrics")
	if err != nil {
		return counts{}, fmt.Errorf("scraping replica %d: %w", r.index, err)
	}
	defer resp.Body.Close()
	var c counts
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		n := int(v)
		name, labels, _ := strings.Cut(series, "{")
		switch name {
		case "cctrace_requests_total":
			if !strings.Contains(labels, `kind="other"`) {
				c.requests += n
			}
		case "cctrace_turns_total":
			c.turns += n
		case "cctrace_tokens_total":
			switch {
			case strings.Contains(labels, `type="input"`):
				c.usage.InputTokens += n
			case strings.Contains(labels, `type="output"`):
				c.usage.OutputTokens += n
			case strings.Contains(labels, `type="cache_read"`):
				c.usage.CacheReadInputTokens += n
			case strings.Contains(labels, `type="cache_creation"`):
				c.usage.CacheCreationInputTokens += n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return counts{}, fmt.Errorf("reading replica %d's metrics: %w", r.index, err)
	}
	return c, nil
}

// killWhenReady waits until every session has reached the upstream, the slow tool of session
// toolSession runs, the slow answer of session streamSession is streaming, the replica has
// counted every Messages API request it forwarded that ended, and Jaeger holds every turn it
// ended; then it reads the replica's counters and SIGKILLs it.
func killWhenReady(t *testing.T, r *replica, up *taggedUpstream, api *fakeapi.Server, jaeger *harness.Jaeger, sessions []*replicaSession, toolSession, streamSession string) (time.Time, counts, error) {
	deadline := time.Now().Add(harness.Patience)
	for {
		if time.Now().After(deadline) {
			return time.Time{}, counts{}, errors.New("the slow tool and the slow answer were never under way together")
		}
		select {
		case <-r.Exited():
			return time.Time{}, counts{}, fmt.Errorf("replica %d exited by itself:\n%s", r.index, r.Output())
		case <-time.After(100 * time.Millisecond):
		}
		exchanges := up.joined(api.Served())
		var toolSince time.Time
		toolDone, streaming, ended := false, false, 0
		reached := map[string]bool{}
		for _, ex := range exchanges {
			reached[ex.session] = true
			switch {
			case ex.session == toolSession && ex.served.Rule == "slow_tool" && !ex.end.IsZero():
				toolSince = ex.end
			case ex.session == toolSession && ex.served.Rule == "main_result":
				toolDone = true
			case ex.session == streamSession && ex.served.Rule == "slow_stream" && ex.end.IsZero():
				streaming = true
			}
			if ex.replica == r.index && ex.served.Path == "/v1/messages" && !ex.end.IsZero() {
				ended++
			}
		}
		if toolDone {
			return time.Time{}, counts{}, errors.New("the slow tool finished before the kill")
		}
		all := true
		for _, s := range sessions {
			all = all && reached[s.id]
		}
		if toolSince.IsZero() || !streaming || !all {
			continue
		}
		c, err := r.counts()
		if err != nil {
			return time.Time{}, counts{}, err
		}
		if c.requests != ended || exportedTurns(t, jaeger, r.index) < c.turns {
			continue
		}
		killedAt := time.Now()
		if err := r.Signal(syscall.SIGKILL); err != nil {
			return time.Time{}, counts{}, fmt.Errorf("killing replica %d: %w", r.index, err)
		}
		<-r.Exited()
		return killedAt, c, nil
	}
}

// exportedTurns counts the turn roots replica i exported that Jaeger holds.
func exportedTurns(t *testing.T, jaeger *harness.Jaeger, i int) int {
	n := 0
	for _, tr := range jaeger.Traces(t, replicaService) {
		for _, root := range turnRoots(tr) {
			if root.Process["service.instance.id"] == replicaInstance(i) && root.Tags["cctrace.turn.outcome"] != nil {
				n++
			}
		}
	}
	return n
}

// taggedUpstream serves the fake API on one listener per replica, and notes which replica sent
// each exchange and when it started and ended.
type taggedUpstream struct {
	api *fakeapi.Server

	mu   sync.Mutex
	next int
	log  map[int]*tagged // by exchange number
}

// tagged is one exchange as the test sees it: who forwarded it, when, and what fakeapi served.
type tagged struct {
	id         int
	replica    int
	session    string
	start, end time.Time // end is zero while it runs
	served     fakeapi.Served
}

func (u *taggedUpstream) listen(t *testing.T, replica int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.next++
		ex := &tagged{id: u.next, replica: replica, session: r.Header.Get("X-Claude-Code-Session-Id"), start: time.Now()}
		if u.log == nil {
			u.log = map[int]*tagged{}
		}
		u.log[ex.id] = ex
		u.mu.Unlock()
		r.Header.Set(exchangeHeader, strconv.Itoa(ex.id))
		u.api.ServeHTTP(w, r)
		u.mu.Lock()
		ex.end = time.Now()
		u.mu.Unlock()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// joined returns every exchange with what fakeapi served for it, in the order they started.
func (u *taggedUpstream) joined(served []fakeapi.Served) []tagged {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []tagged
	for _, sv := range served {
		id, err := strconv.Atoi(sv.Header.Get(exchangeHeader))
		if err != nil {
			continue
		}
		if ex, ok := u.log[id]; ok {
			c := *ex
			c.served = sv
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// accessEntry is one line of the cctrace log_format of deploy/nginx/cctrace.conf.
type accessEntry struct {
	start, end     time.Time
	status         int
	upstreamAddr   string
	upstreamStatus string
	session        string
	request        string
}

var accessLine = regexp.MustCompile(`^(\d+\.\d+) (\d+\.\d+) (\d+) "([^"]*)" "([^"]*)" "[^"]*" "([^"]*)" "([^"]*)"$`)

// readAccessLog parses the access log from byte offset from on.
func readAccessLog(t *testing.T, path string, from int64) []accessEntry {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []accessEntry
	for _, line := range strings.Split(strings.TrimSpace(string(raw[from:])), "\n") {
		if line == "" {
			continue
		}
		m := accessLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("access log line not in the cctrace format: %q", line)
		}
		end, _ := strconv.ParseFloat(m[1], 64)
		took, _ := strconv.ParseFloat(m[2], 64)
		status, _ := strconv.Atoi(m[3])
		e := accessEntry{
			end: time.UnixMicro(int64(end * 1e6)), status: status,
			upstreamAddr: m[4], upstreamStatus: m[5], session: m[6], request: m[7],
		}
		e.start = e.end.Add(-time.Duration(took * float64(time.Second)))
		out = append(out, e)
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// claudePrompt runs one `claude -p` prompt against baseURL with HOME home in dir, and returns
// its result; it is safe off the test goroutine.
func claudePrompt(bin, home, dir, baseURL, prompt string, args ...string) (claudeResult, error) {
	argv := append([]string{"-p", prompt, "--output-format", "json"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(),
		"HOME="+home,
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY="+apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return claudeResult{}, fmt.Errorf("claude %q: %w\nstdout: %s\nstderr: %s", argv, err, stdout.String(), stderr.String())
	}
	var res claudeResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(stdout.Bytes())), &res); err != nil {
		return claudeResult{}, fmt.Errorf("claude output is not JSON: %w\n%s", err, stdout.String())
	}
	return res, nil
}

// waitTurnTraces waits until Jaeger holds a turn root for every turn of sessions and no new span
// has arrived for three seconds, and returns every trace of the replicas.
func waitTurnTraces(t *testing.T, jaeger *harness.Jaeger, sessions []*replicaSession) []harness.Trace {
	t.Helper()
	deadline := time.Now().Add(harness.Patience)
	lastSpans, stableSince := -1, time.Now()
	for {
		traces := jaeger.Traces(t, replicaService)
		roots := map[string]int{}
		spans := 0
		for _, tr := range traces {
			spans += len(tr.Spans)
			for _, r := range turnRoots(tr) {
				if r.Tags["cctrace.turn.outcome"] != nil {
					roots[fmt.Sprint(r.Tags["gen_ai.conversation.id"])]++
				}
			}
		}
		if spans != lastSpans {
			lastSpans, stableSince = spans, time.Now()
		}
		complete := true
		for _, s := range sessions {
			complete = complete && roots[s.id] >= s.turns
		}
		if complete && time.Since(stableSince) >= 3*time.Second {
			return traces
		}
		if time.Now().After(deadline) {
			t.Logf("waiting %v for every turn's root in Jaeger: have %v", harness.Patience, roots)
			return traces
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// turnRoots returns the main agent's turn spans that have no parent.
func turnRoots(tr harness.Trace) []harness.Span {
	var out []harness.Span
	for _, sp := range tr.Spans {
		if sp.ParentSpanID == "" && sp.OperationName == "invoke_agent claude-code" {
			out = append(out, sp)
		}
	}
	return out
}

// traceSession returns the session (gen_ai.conversation.id) the trace's spans name.
func traceSession(tr harness.Trace) string {
	for _, sp := range tr.Spans {
		if id, ok := sp.Tags["gen_ai.conversation.id"].(string); ok && id != "" {
			return id
		}
	}
	return ""
}

// describeTraces lists each trace's spans: name, parent, the replica that sent it.
func describeTraces(traces []harness.Trace) string {
	var b strings.Builder
	for _, tr := range traces {
		fmt.Fprintf(&b, "trace %s\n", tr.TraceID)
		spans := slices.Clone(tr.Spans)
		sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime.Before(spans[j].StartTime) })
		for _, sp := range spans {
			fmt.Fprintf(&b, "  %s %s parent=%s from=%v %s\n", sp.SpanID, sp.OperationName, sp.ParentSpanID,
				sp.Process["service.instance.id"], facts(sp, 0))
		}
	}
	return b.String()
}

func keys(m map[any]bool) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	sort.Strings(out)
	return out
}
