package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answerings counts WithAnswering calls and what Waiting said at each.
type answerings struct {
	calls   atomic.Int64
	nonzero atomic.Int64 // calls made while Waiting was not zero
	p       atomic.Pointer[Proxy]
	ch      chan struct{}
}

func newAnswerings() *answerings { return &answerings{ch: make(chan struct{}, 16)} }

func (a *answerings) answering() {
	a.calls.Add(1)
	if p := a.p.Load(); p != nil && p.Waiting() != 0 {
		a.nonzero.Add(1)
	}
	a.ch <- struct{}{}
}

func (a *answerings) wait(t *testing.T) {
	t.Helper()
	select {
	case <-a.ch:
	case <-time.After(waitTimeout):
		t.Fatal("WithAnswering's function was not called")
	}
}

// TestWaiting checks that a request counts in Waiting from its arrival until the first byte of
// its answer's body went to the client (not its headers alone), and that WithAnswering's function
// is called then, with nothing waiting any more.
func TestWaiting(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
	}{
		{"event stream", "text/event-stream"},
		{"JSON body", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headersOut, firstByte, rest := make(chan struct{}), make(chan struct{}), make(chan struct{})
			ans := newAnswerings()
			h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				close(headersOut)
				<-firstByte
				_, _ = w.Write([]byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
				w.(http.Flusher).Flush()
				<-rest
				_, _ = w.Write([]byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
			}), WithAnswering(ans.answering))
			ans.p.Store(h.proxy)
			// Let the upstream finish should the test fail before it does.
			var release sync.Once
			releaseAll := func() {
				release.Do(func() {
					for _, c := range []chan struct{}{firstByte, rest} {
						select {
						case <-c:
						default:
							close(c)
						}
					}
				})
			}
			t.Cleanup(releaseAll)

			done := make(chan error, 1)
			go func() {
				res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[]}`))
				if err == nil {
					_, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				done <- err
			}()
			<-headersOut
			if n := h.proxy.Waiting(); n != 1 {
				t.Errorf("Waiting = %d with the headers out and no body byte yet, want 1", n)
			}
			if n := ans.calls.Load(); n != 0 {
				t.Errorf("answering called %d times before any body byte", n)
			}
			close(firstByte)
			// The rest of the answer is held back until then: this is the first byte's doing.
			ans.wait(t)
			if n := h.proxy.Waiting(); n != 0 {
				t.Errorf("Waiting = %d after the first byte, want 0", n)
			}
			releaseAll()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			h.rec.next(t)
			if n := ans.calls.Load(); n != 1 {
				t.Errorf("answering called %d times for one exchange, want 1", n)
			}
			if n := ans.nonzero.Load(); n != 0 {
				t.Errorf("answering called %d times with requests still waiting", n)
			}
		})
	}
}

// TestWaitingEndsWithoutAnswer checks that an exchange with no body forwarded (the upstream
// unreachable, answered 502 by the proxy) stops counting in Waiting too.
func TestWaitingEndsWithoutAnswer(t *testing.T) {
	ans := newAnswerings()
	h := newHarnessTo(t, deadUpstream(t), WithAnswering(ans.answering))
	res, err := h.client.Post(h.proxyURL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res.Body)
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.StatusCode)
	}
	ans.wait(t)
	h.rec.next(t)
	if n := h.proxy.Waiting(); n != 0 {
		t.Errorf("Waiting = %d after a 502, want 0", n)
	}
	if n := ans.calls.Load(); n != 1 {
		t.Errorf("answering called %d times, want 1", n)
	}
}
