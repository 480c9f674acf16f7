package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cctrace/cctrace/instrument/wire"
)

// testGate holds the requests of one identity, and refuses those whose body says "refuse".
type testGate struct {
	holds, refusals atomic.Int32
}

func (g *testGate) Hold(req *wire.Request) bool {
	g.holds.Add(1)
	return req.Identity.User == "over"
}

func (g *testGate) Refuse(_ context.Context, req *wire.Request, body []byte) *Refusal {
	if !bytes.Contains(body, []byte("refuse")) {
		return nil
	}
	g.refusals.Add(1)
	return &Refusal{Status: http.StatusForbidden, Type: "permission_error", Message: "budget spent"}
}

func TestIdentityAndGate(t *testing.T) {
	var upstreamSaw atomic.Int32
	var lastBody atomic.Value
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamSaw.Add(1)
		if v := r.Header.Get("X-Cctrace-User"); v != "" {
			t.Errorf("upstream got the identity header %q", v)
		}
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	gate := &testGate{}
	identify := func(h http.Header) wire.Identity {
		// Stands in for a fingerprint: the test checks the credential itself goes no further.
		id := wire.Identity{Header: h.Get("X-Cctrace-User")}
		if h.Get("X-Api-Key") != "" {
			id.Credential = "key-fingerprint"
		}
		id.User = id.Header
		return id
	}
	h := newHarness(t, upstream, WithIdentity(identify, "X-Cctrace-User"), WithGate(gate))

	post := func(user, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.proxyURL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", "sk-ant-api03-SECRETMARKER")
		req.Header.Set("X-Cctrace-User", user)
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res, readAll(t, res.Body)
	}

	tests := []struct {
		name, user, body string
		wantStatus       int
		forwarded        bool
	}{
		{"not held", "fine", `{"messages":"refuse"}`, 200, true},
		{"held, let through", "over", `{"messages":"tool results"}`, 200, true},
		{"held, refused", "over", `{"messages":"refuse"}`, 403, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := upstreamSaw.Load()
			res, body := post(tt.user, tt.body)
			if res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", res.StatusCode, tt.wantStatus, body)
			}
			if forwarded := upstreamSaw.Load() > before; forwarded != tt.forwarded {
				t.Errorf("forwarded %v, want %v", forwarded, tt.forwarded)
			}
			if tt.forwarded && lastBody.Load() != tt.body {
				t.Errorf("upstream got %q, want the body unchanged", lastBody.Load())
			}
			if retry := res.Header.Get("X-Should-Retry"); tt.forwarded != (retry == "") || (!tt.forwarded && retry != "false") {
				t.Errorf("x-should-retry %q", retry)
			}
			if !tt.forwarded {
				if e := decodeAPIError(t, body); e.Type != "error" || e.Error.Type != "permission_error" || e.Error.Message != "budget spent" {
					t.Errorf("refusal %+v", e)
				}
			}
			rec := h.rec.next(t)
			if rec.req.Identity.User != tt.user || rec.req.Identity.Credential != "key-fingerprint" {
				t.Errorf("observed identity %+v", rec.req.Identity)
			}
			if string(rec.reqBody) != tt.body {
				t.Errorf("observed body %q", rec.reqBody)
			}
			if !tt.forwarded && (rec.resp.Status != 403 || rec.resp.ErrorType != "permission_error") {
				t.Errorf("observed response %+v", rec.resp)
			}
		})
	}
	if gate.holds.Load() != 3 || gate.refusals.Load() != 1 {
		t.Errorf("holds %d refusals %d", gate.holds.Load(), gate.refusals.Load())
	}
}
