package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cctrace/cctrace/internal/fakeapi"
)

const recorded = "../../testdata/claude-code"

// TestSendAgainstItsScenario sends recorded sessions to the fake API playing their scenario: each
// request gets the status it got when recorded (a retry's 529s and a prompt-too-long 400 come in
// the recorded order only), under the new session id.
func TestSendAgainstItsScenario(t *testing.T) {
	for _, name := range []string{"subagent", "retry_529", "auto_compaction", "parallel_tools"} {
		t.Run(name, func(t *testing.T) {
			exchanges, err := Load(filepath.Join(recorded, name))
			if err != nil {
				t.Fatal(err)
			}
			script, err := fakeapi.Scenario(name)
			if err != nil {
				t.Fatal(err)
			}
			api := fakeapi.New(script)
			recordedID := exchanges[0].Request.Headers.SessionID
			var mu sync.Mutex
			var leaked int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(recordedID)) {
					mu.Lock()
					leaked++
					mu.Unlock()
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				api.ServeHTTP(w, r)
			}))
			defer srv.Close()
			const session = "00000000-1111-4222-8333-444444444444"
			if err := Send(context.Background(), srv.URL, exchanges, WithMaxGap(10*time.Millisecond), WithSessionID(session)); err != nil {
				t.Fatal(err)
			}
			if leaked > 0 {
				t.Errorf("%d bodies still carry the recorded session id", leaked)
			}
			served := api.Served()
			if len(served) != len(exchanges) {
				t.Fatalf("%d requests served, %d recorded", len(served), len(exchanges))
			}
			for i, sv := range served {
				if id := sv.Header.Get("X-Claude-Code-Session-Id"); id != session {
					t.Errorf("request %d: session %q, want %q", i+1, id, session)
				}
			}
		})
	}
}

// TestSendReportsAnotherStatus: a request answered otherwise than recorded is an error that
// names it.
func TestSendReportsAnotherStatus(t *testing.T) {
	exchanges, err := Load(filepath.Join(recorded, "retry_529"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := fakeapi.Scenario("tool_roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fakeapi.New(script))
	defer srv.Close()
	err = Send(context.Background(), srv.URL, exchanges, WithMaxGap(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "exchange 1: POST /v1/messages answered 200 OK, recorded 529") {
		t.Errorf("err = %v, want exchange 1's status named", err)
	}
}
