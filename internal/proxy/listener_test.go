package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	testharness "github.com/cctrace/cctrace/internal/testkit/harness"
)

// testHeaderTimeout stands for cctrace's ReadHeaderTimeout (30 s) in these tests.
const testHeaderTimeout = 200 * time.Millisecond

// serveProxy serves a proxy to an upstream that reads the request body and answers "ok", with
// testHeaderTimeout, on the listener wrap makes of a 127.0.0.1 one. The server stops when the
// test ends.
func serveProxy(t *testing.T, wrap func(net.Listener) net.Listener) (addr string, srv *httptest.Server) {
	t.Helper()
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(up, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewUnstartedServer(p)
	srv.Config.ReadHeaderTimeout, srv.Config.IdleTimeout = testHeaderTimeout, time.Minute
	srv.Listener = wrap(srv.Listener)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		p.cfg.transport.(*http.Transport).CloseIdleConnections()
	})
	return srv.Listener.Addr().String(), srv
}

func firstByte(idle time.Duration) func(net.Listener) net.Listener {
	return func(ln net.Listener) net.Listener { return AcceptOnFirstByte(ln, idle) }
}

// TestConnectionOpenedAheadOfUse is the bench's lost requests: a client opens a
// connection, uses it for a POST only after the server's header timeout, and must get its
// answer. Go's client does not retry a POST on a connection it never used, so a server that
// closed the connection at its header timeout fails the request.
func TestConnectionOpenedAheadOfUse(t *testing.T) {
	addr, _ := serveProxy(t, firstByte(time.Minute))
	spare, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * testHeaderTimeout)
	ct := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		if spare == nil {
			return nil, errors.New("test: one connection only")
		}
		c := spare
		spare = nil
		return c, nil
	}}
	defer ct.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 1<<20)
	res, err := (&http.Client{Transport: ct}).Post("http://"+addr+"/v1/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST on a connection opened %v earlier: %v", 3*testHeaderTimeout, err)
	}
	if got := string(readAll(t, res.Body)); res.StatusCode != http.StatusOK || got != "ok" {
		t.Errorf("answer %d %q, want 200 \"ok\"", res.StatusCode, got)
	}
}

// closedWithin reports whether the server closes c within d (a read returns EOF or a reset,
// not a timeout).
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c) // the server may answer before it closes (408)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// dialRaw opens a TCP connection to addr, closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestAcceptOnFirstByteBounds(t *testing.T) {
	t.Run("headers still timed", func(t *testing.T) {
		// The header timeout starts at the first byte: a client sending its headers slowly is
		// still cut off.
		addr, _ := serveProxy(t, firstByte(time.Minute))
		c := dialRaw(t, addr)
		if _, err := io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(t, c, testharness.Patience) {
			t.Error("a connection whose headers never end is not closed")
		}
	})
	t.Run("idle connection closed", func(t *testing.T) {
		addr, _ := serveProxy(t, firstByte(3*testHeaderTimeout))
		c := dialRaw(t, addr)
		if !closedWithin(t, c, testharness.Patience) {
			t.Error("a connection that sends nothing is not closed after the idle time")
		}
	})
	t.Run("close", func(t *testing.T) {
		// Closing the server closes the connections still waiting for their first byte.
		addr, srv := serveProxy(t, firstByte(time.Minute))
		c := dialRaw(t, addr)
		time.Sleep(50 * time.Millisecond) // accepted
		srv.Close()
		if !closedWithin(t, c, testharness.Patience) {
			t.Error("a waiting connection outlives the server")
		}
	})
	t.Run("request bytes intact", func(t *testing.T) {
		// The byte read ahead is the request's first: a raw request gets its answer.
		addr, _ := serveProxy(t, firstByte(time.Minute))
		c := dialRaw(t, addr)
		if _, err := io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(got), "\r\n\r\nok") {
			t.Errorf("answer %q", got)
		}
	})
}
