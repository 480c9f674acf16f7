package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// failingReader returns its data, then err.
type failingReader struct {
	data string
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestRequestTapFinish(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-6"}`
	cut := errors.New("connection reset by peer")
	tests := []struct {
		name          string
		src           io.Reader
		contentLength int64
		limit         int64
		readBytes     int // how much the transport reads before finish; -1 for all
		wantBody      string
		wantSize      int64
		wantErr       string // substring of ParseError; "" for none
		wantEnds      int    // calls of onEnd before finish
	}{
		{name: "read to EOF", src: strings.NewReader(body), contentLength: -1, limit: 1 << 10, readBytes: -1, wantBody: body, wantSize: int64(len(body)), wantEnds: 1},
		{name: "known length complete before EOF", src: strings.NewReader(body), contentLength: int64(len(body)), limit: 1 << 10, readBytes: len(body), wantBody: body, wantSize: int64(len(body)), wantEnds: 1},
		{name: "known length cut short", src: strings.NewReader(body), contentLength: int64(len(body)), limit: 1 << 10, readBytes: 5, wantSize: 5, wantErr: "not read to its end"},
		{name: "unknown length before EOF", src: strings.NewReader(body), contentLength: -1, limit: 1 << 10, readBytes: len(body), wantSize: int64(len(body)), wantErr: "not read to its end"},
		{name: "read error", src: &failingReader{data: body[:10], err: cut}, contentLength: -1, limit: 1 << 10, readBytes: -1, wantSize: 10, wantErr: "connection reset", wantEnds: 1},
		{name: "over the limit", src: strings.NewReader(body), contentLength: -1, limit: 8, readBytes: -1, wantSize: int64(len(body)), wantErr: "parse limit of 8 bytes", wantEnds: 1},
		{name: "no limit", src: strings.NewReader(body), contentLength: -1, limit: 0, readBytes: -1, wantSize: int64(len(body)), wantErr: "parse limit of 0 bytes", wantEnds: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ends := 0
			tap := newRequestTap(io.NopCloser(tt.src), tt.contentLength, tt.limit, 0, nil, func() { ends++ })
			var r io.Reader = tap
			if tt.readBytes >= 0 {
				r = io.LimitReader(tap, int64(tt.readBytes))
			}
			_, _ = io.Copy(io.Discard, r)
			if ends != tt.wantEnds {
				t.Errorf("onEnd called %d times before finish, want %d", ends, tt.wantEnds)
			}
			body, size, parseErr := tap.finish()
			if string(body) != tt.wantBody || size != tt.wantSize {
				t.Errorf("finish = %q, %d; want %q, %d", body, size, tt.wantBody, tt.wantSize)
			}
			if (tt.wantErr == "") != (parseErr == "") || !strings.Contains(parseErr, tt.wantErr) {
				t.Errorf("parse error %q, want one containing %q", parseErr, tt.wantErr)
			}
			if tt.wantBody != "" {
				// Bytes read after finish belong to nobody: the copy handed out must not change.
				_, _ = io.Copy(io.Discard, tap)
				if string(body) != tt.wantBody {
					t.Errorf("the copy changed after finish: %q", body)
				}
			}
		})
	}
}

// closedAfterBody is a client body that the server closes once it has been read: every read
// after the data fails, as Go's HTTP/1 server does once the response headers went out.
type closedAfterBody struct {
	data    string
	withEOF bool // return io.EOF together with the last bytes
}

func (c *closedAfterBody) Read(p []byte) (int, error) {
	if c.data == "" {
		return 0, http.ErrBodyReadAfterClose
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	if c.withEOF && c.data == "" {
		return n, io.EOF
	}
	return n, nil
}

// TestRequestTapNeverReadsPastTheEnd pins the fix for a race a bare httputil.ReverseProxy has:
// the transport's read past Content-Length, made after the server closed the body, must not
// fail, or the transport drops the upstream connection mid-response.
func TestRequestTapNeverReadsPastTheEnd(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-6","stream":true}`
	tests := []struct {
		name          string
		withEOF       bool
		contentLength int64
	}{
		{name: "EOF with the last bytes", withEOF: true, contentLength: -1},
		{name: "Content-Length reached without EOF", contentLength: int64(len(body))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ends := 0
			tap := newRequestTap(io.NopCloser(&closedAfterBody{data: body, withEOF: tt.withEOF}), tt.contentLength, 1<<10, 0, nil, func() { ends++ })
			buf := make([]byte, 1<<10)
			n, err := tap.Read(buf)
			if n != len(body) || err != io.EOF {
				t.Fatalf("first read = %d, %v; want %d, EOF", n, err, len(body))
			}
			for range 2 {
				if n, err := tap.Read(buf); n != 0 || err != io.EOF {
					t.Errorf("read after the end = %d, %v; want 0, EOF", n, err)
				}
			}
			got, size, parseErr := tap.finish()
			if string(got) != body || size != int64(len(body)) || parseErr != "" {
				t.Errorf("finish = %q, %d, %q", got, size, parseErr)
			}
			if ends == 0 {
				t.Error("onEnd was not called")
			}
		})
	}
}

// readSizes is a client body that remembers the largest buffer it was asked to fill.
type readSizes struct {
	io.ReadCloser
	mu      sync.Mutex
	largest int
}

func (r *readSizes) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.largest = max(r.largest, len(p))
	r.mu.Unlock()
	return r.ReadCloser.Read(p)
}

// TestRequestBodiesThroughProxy sends bodies of many sizes, around the transport's 32 KiB copy
// buffer and sendChunk, through the proxy to a plain-HTTP upstream: each must arrive byte for
// byte, and the Observer must get the same bytes. The bodies over 32 KiB must have been read in
// pieces larger than the transport's own loop asks for: that is how it shows that the transport
// still hands them to upstreamConn.ReadFrom.
func TestRequestBodiesThroughProxy(t *testing.T) {
	var mu sync.Mutex
	received := map[string]uint32{}
	up, err := url.Parse(startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		received[r.URL.Query().Get("n")] = crc32.ChecksumIEEE(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"type":"message","id":"msg_%d"}`, len(b))
	})))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p, err := New(up, rec)
	if err != nil {
		t.Fatal(err)
	}
	var reads []*readSizes
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs := &readSizes{ReadCloser: r.Body}
		mu.Lock()
		reads = append(reads, rs)
		mu.Unlock()
		r.Body = rs
		p.ServeHTTP(w, r)
	}))
	defer front.Close()
	defer p.cfg.transport.(*http.Transport).CloseIdleConnections()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	sizes := []int{1, 100, 32<<10 - 1, 32 << 10, 32<<10 + 1, sendChunk - 1, sendChunk, sendChunk + 1, 1<<20 + 3, 3 << 20}
	send := func(t *testing.T, seed uint64, n int) (largestRead int) {
		t.Helper()
		body := numberedBody(seed, n)
		res, err := client.Post(fmt.Sprintf("%s/v1/messages?n=%d", front.URL, n), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got := readAll(t, res.Body)
		if want := fmt.Sprintf(`{"type":"message","id":"msg_%d"}`, n); string(got) != want {
			t.Errorf("%d bytes: the upstream answered %q, want %q", n, got, want)
		}
		ex := rec.next(t)
		mu.Lock()
		crc, largest := received[fmt.Sprint(n)], reads[len(reads)-1].largest
		mu.Unlock()
		if crc != crc32.ChecksumIEEE(body) {
			t.Errorf("%d bytes: the upstream did not receive the body that was sent", n)
		}
		if !bytes.Equal(ex.reqBody, body) || ex.req.BodySize != int64(n) || ex.req.ParseError != "" {
			t.Errorf("%d bytes: the Observer got %d bytes (equal: %v), size %d, parse error %q", n,
				len(ex.reqBody), bytes.Equal(ex.reqBody, body), ex.req.BodySize, ex.req.ParseError)
		}
		return largest
	}
	t.Run("send buffers free", func(t *testing.T) {
		for i, n := range sizes {
			if largest := send(t, uint64(i+1), n); n > 64<<10 && largest <= 32<<10 {
				t.Errorf("%d bytes: the client's body was read at most %d bytes at a time: not through upstreamConn.ReadFrom", n, largest)
			}
		}
	})
	t.Run("every send buffer in use", func(t *testing.T) {
		var held [][]byte
		for range cap(sendBuffers) {
			held = append(held, <-sendBuffers)
		}
		defer func() {
			for _, b := range held {
				sendBuffers <- b
			}
		}()
		for i, n := range sizes {
			if largest := send(t, uint64(100+i), n); largest > 32<<10 {
				t.Errorf("%d bytes: the client's body was read %d bytes at a time with no send buffer free", n, largest)
			}
		}
	})
}
