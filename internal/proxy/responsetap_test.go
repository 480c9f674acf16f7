package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// hijackRecorder is a ResponseRecorder that can also be hijacked and given deadlines, like the
// server's own ResponseWriter.
type hijackRecorder struct {
	*httptest.ResponseRecorder
	hijacked      bool
	writeDeadline time.Time
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.hijacked = true
	return nil, nil, nil
}

func (h *hijackRecorder) SetWriteDeadline(d time.Time) error {
	h.writeDeadline = d
	return nil
}

// TestResponseTapKeepsInterfaces checks that wrapping the client's ResponseWriter loses none of
// what ReverseProxy and the server rely on.
func TestResponseTapKeepsInterfaces(t *testing.T) {
	tests := []struct {
		name  string
		use   func(w http.ResponseWriter) error
		check func(r *hijackRecorder) bool
	}{
		{
			name: "http.Flusher",
			use: func(w http.ResponseWriter) error {
				f, ok := w.(http.Flusher)
				if !ok {
					return errors.New("not an http.Flusher")
				}
				f.Flush()
				return nil
			},
			check: func(r *hijackRecorder) bool { return r.Flushed },
		},
		{
			name:  "ResponseController.Flush",
			use:   func(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() },
			check: func(r *hijackRecorder) bool { return r.Flushed },
		},
		{
			name: "ResponseController.Hijack",
			use: func(w http.ResponseWriter) error {
				_, _, err := http.NewResponseController(w).Hijack()
				return err
			},
			check: func(r *hijackRecorder) bool { return r.hijacked },
		},
		{
			name: "ResponseController.SetWriteDeadline",
			use: func(w http.ResponseWriter) error {
				return http.NewResponseController(w).SetWriteDeadline(time.Unix(1, 0))
			},
			check: func(r *hijackRecorder) bool { return r.writeDeadline.Equal(time.Unix(1, 0)) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &hijackRecorder{ResponseRecorder: httptest.NewRecorder()}
			tap := newResponseTap(rec, &exchange{p: &Proxy{}})
			if err := tt.use(tap); err != nil {
				t.Fatal(err)
			}
			if !tt.check(rec) {
				t.Error("the call did not reach the wrapped ResponseWriter")
			}
		})
	}
}

func TestResponseTapCounts(t *testing.T) {
	rec := httptest.NewRecorder()
	tap := newResponseTap(rec, &exchange{p: &Proxy{}})
	for _, s := range []string{"event: ping\n", "data: {}\n\n"} {
		if _, err := tap.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if !tap.wroteHeader || tap.written != 22 || rec.Body.String() != "event: ping\ndata: {}\n\n" {
		t.Errorf("wroteHeader %v, written %d, body %q", tap.wroteHeader, tap.written, rec.Body.String())
	}
}
