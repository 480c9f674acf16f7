package stack

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/instrument"
	"github.com/cctrace/cctrace/instrument/wire"
	"github.com/cctrace/cctrace/internal/budget"
	"github.com/cctrace/cctrace/internal/pipeline"
	"github.com/cctrace/cctrace/internal/proxy"
	"github.com/cctrace/cctrace/internal/testkit/harness"
)

// TestNewRejectsUpstream checks that New reports what the proxy refuses, and builds nothing then.
func TestNewRejectsUpstream(t *testing.T) {
	u, _ := url.Parse("ftp://api.example.com")
	p, pipe, err := New(u, instrument.New(instrument.Sinks{}), slog.New(slog.DiscardHandler), nil)
	if err == nil || p != nil || pipe != nil {
		t.Fatalf("New(%s) = %v, %v, %v; want an error and nothing built", u, p, pipe, err)
	}
}

// spanUsers records who each ended span was attributed to.
type spanUsers struct {
	mu    sync.Mutex
	users []string
}

func (s *spanUsers) SpanStarted(*instrument.Span) {}
func (s *spanUsers) SpanEnded(sp *instrument.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = append(s.users, sp.User+"/"+sp.Team)
}
func (s *spanUsers) SessionsActive(int) {}

// TestResolve checks the path of an identity: the proxy reads it from the headers, the
// pipeline resolves it with the decoded body (here the account in metadata.user_id), and the
// tracker's spans carry the result.
func TestResolve(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","model":"claude-sonnet-4-5","stop_reason":"end_turn","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":2}}`)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	sink := &spanUsers{}
	resolve := func(req *wire.Request) {
		if req.Body != nil && req.Body.AccountUUID == "acct-1" {
			req.Identity.User, req.Identity.Team = "alice", "platform"
		}
	}
	identify := func(h http.Header) wire.Identity { return wire.Identity{Header: h.Get("X-Cctrace-User")} }
	p, pipe, err := New(u, instrument.New(sink), slog.New(slog.DiscardHandler), resolve, proxy.WithIdentity(identify))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go pipe.Run(ctx)
	srv := httptest.NewServer(p)
	defer srv.Close()
	body := `{"model":"claude-sonnet-4-5","stream":false,"tools":[{"name":"Bash"}],` +
		`"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"acct-1\",\"session_id\":\"s-1\"}"},` +
		`"messages":[{"role":"user","content":"hello"}]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	cancel()
	select {
	case <-pipe.Done():
	case <-time.After(harness.Patience):
		t.Fatal("pipeline did not stop")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.users) != 2 || sink.users[0] != "alice/platform" || sink.users[1] != "alice/platform" {
		t.Errorf("spans attributed to %v, want the chat span and its turn to alice/platform", sink.users)
	}
}

// TestBudgetGate checks the budget gate on the assembled stack: a held request is decided once
// the pipeline has decoded it, even behind a queue over its budget, and what the gate cannot
// decide from (a body that does not decode) is forwarded.
func TestBudgetGate(t *testing.T) {
	var forwarded sync.Map
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		forwarded.Store(string(b), true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","model":"claude-sonnet-4-5","stop_reason":"end_turn","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":2}}`)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	budgets, err := budget.Parse("budgets.yaml", []byte("people:\n  alice: {daily: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ledger := budget.NewLedger(time.Now)
	ledger.Add("alice", "", time.Now(), 6)
	fast := func(id *wire.Identity) bool { id.User = id.Header; return id.User != "" }
	var pipe *pipeline.Pipeline
	decode := func(ctx context.Context, req *wire.Request, body []byte) error { return pipe.Decode(ctx, req, body) }
	gate := budget.NewEnforcer(func() *budget.Budgets { return budgets }, ledger, fast, decode, nil)
	identify := func(h http.Header) wire.Identity { return wire.Identity{Header: h.Get("X-Cctrace-User")} }
	p, pipe, err := New(u, instrument.New(instrument.Sinks{}), slog.New(slog.DiscardHandler), nil,
		proxy.WithIdentity(identify), proxy.WithGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	// Over the decode queue's budget before the pipeline starts: the held request waits behind it.
	pipe.RequestRead(&wire.Request{ExchangeID: 1 << 40, Endpoint: wire.EndpointMessages},
		[]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"`+
			strings.Repeat("x", pipeline.DefaultQueueBudget)+`"}]}]}`))
	type answer struct {
		status int
		err    error
	}
	send := func(user, body string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
			req.Header.Set("X-Cctrace-User", user)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- answer{err: err}
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			out <- answer{status: res.StatusCode}
		}()
		return out
	}
	const prompt = `{"model":"claude-sonnet-4-5","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"do it"}]}`
	const cut = `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"do`
	const other = `{"model":"claude-sonnet-4-5","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"do that"}]}`
	held := send("alice", prompt)
	ctx, cancel := context.WithCancel(context.Background())
	go pipe.Run(ctx)
	defer func() { cancel(); <-pipe.Done() }()

	for _, tt := range []struct {
		name    string
		answer  <-chan answer
		body    string
		status  int
		reaches bool
	}{
		{"a new prompt over budget, behind a full queue", held, prompt, http.StatusPaymentRequired, false},
		{"a body that does not decode", send("alice", cut), cut, http.StatusOK, true},
		{"a person under budget", send("bob", other), other, http.StatusOK, true},
	} {
		select {
		case a := <-tt.answer:
			if a.err != nil || a.status != tt.status {
				t.Errorf("%s: answered %d, %v; want %d", tt.name, a.status, a.err, tt.status)
			}
		case <-time.After(harness.Patience):
			t.Fatalf("%s: no answer", tt.name)
		}
		if _, ok := forwarded.Load(tt.body); ok != tt.reaches {
			t.Errorf("%s: reached the upstream %v, want %v", tt.name, ok, tt.reaches)
		}
	}
}
