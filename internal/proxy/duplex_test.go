package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestEarlyAnswerDoesNotCutStream: an upstream that starts streaming its answer before it has
// read the request body (as a server may, e.g. to reject it early or to answer from the headers
// alone) must not make the proxy cut the request or the stream. Without full duplex, Go's HTTP/1
// server closes the request body as soon as the proxy's response headers go out, and the
// transport, still copying the body upstream, fails and closes the upstream connection.
func TestEarlyAnswerDoesNotCutStream(t *testing.T) {
	const events = 20
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("upstream: %v", err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := 0; i < events; i++ {
			fmt.Fprintf(w, "event: ping\ndata: {\"type\":\"ping\",\"n\":%d,\"read\":%d}\n\n", i, n)
			w.(http.Flusher).Flush()
		}
	})
	h := newHarness(t, upstream)
	// The client sends its body slowly, after the response headers have arrived.
	const size = 64 << 10 // under the 256 KiB the server would discard on its own
	body := bytes.Repeat([]byte("x"), size)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, pw := io.Pipe()
			go func() {
				for off := 0; off < size; off += 4 << 10 {
					if _, err := pw.Write(body[off : off+4<<10]); err != nil {
						return
					}
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", h.proxyURL+"/v1/messages", pr)
			req.ContentLength = size
			resp, err := h.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				errs <- fmt.Errorf("stream cut: %w", err)
				return
			}
			if c := strings.Count(string(got), fmt.Sprintf("\"read\":%d", size)); c != events {
				errs <- fmt.Errorf("got %d complete events with the whole body read upstream, want %d: %.200q", c, events, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
