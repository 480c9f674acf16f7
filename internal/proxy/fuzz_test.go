package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunkedSource serves data in chunks of the sizes the fuzzer chose, then ends with end.
type chunkedSource struct {
	data   []byte
	sizes  []byte
	end    error
	served int
}

func (s *chunkedSource) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, s.end
	}
	n := len(p)
	if len(s.sizes) > 0 {
		n = min(n, int(s.sizes[0])+1)
		s.sizes = s.sizes[1:]
	}
	n = copy(p, s.data[:min(n, len(s.data))])
	s.data = s.data[n:]
	s.served += n
	return n, nil
}

// FuzzRequestTap reads fuzzed bodies through the request tap in fuzzed chunk and buffer sizes,
// with a known, unknown or unmet Content-Length and fuzzed parse and size limits. What the
// transport reads must be the body (never past the declared length or the size limit), and the
// Observer's copy must be the whole body exactly when it is whole and within the parse limit.
func FuzzRequestTap(f *testing.F) {
	f.Add([]byte(`{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`), []byte{3, 200, 0, 7}, uint8(0), uint16(1024), uint16(0), []byte{16, 1, 255})
	f.Add([]byte(strings.Repeat("x", 5000)), []byte{255}, uint8(1), uint16(100), uint16(4000), []byte{0})
	f.Add([]byte("short"), []byte{}, uint8(2), uint16(0), uint16(3), []byte{1})
	f.Fuzz(func(t *testing.T, body, chunks []byte, clMode uint8, limit, maxBody uint16, bufSizes []byte) {
		src := &chunkedSource{data: bytes.Clone(body), sizes: chunks, end: io.EOF}
		contentLength := int64(-1)
		switch clMode % 3 {
		case 1:
			contentLength = int64(len(body))
		case 2:
			// The client declared more than it sent and went away.
			contentLength = int64(len(body)) + 10
			src.end = io.ErrUnexpectedEOF
		}
		if contentLength == 0 {
			return // the proxy taps no body of declared length 0
		}
		ends := 0
		tap := newRequestTap(io.NopCloser(src), contentLength, int64(limit), int64(maxBody), nil, func() { ends++ })
		var got []byte
		var readErr error
		for i := 0; readErr == nil; i++ {
			size := 512
			if len(bufSizes) > 0 {
				size = int(bufSizes[i%len(bufSizes)]) + 1
			}
			buf := make([]byte, size)
			n, err := tap.Read(buf)
			got = append(got, buf[:n]...)
			readErr = err
			if i > 1<<16 {
				t.Fatal("the tap never ended")
			}
		}
		if n, err := tap.Read(make([]byte, 8)); n != 0 || err == nil {
			t.Fatalf("a read after the end gave %d bytes, %v", n, err)
		}
		if !bytes.HasPrefix(body, got) {
			t.Fatalf("forwarded %q, not a prefix of the body %q", got, body)
		}
		if maxBody > 0 && len(got) > int(maxBody) {
			t.Fatalf("forwarded %d bytes past the size limit %d", len(got), maxBody)
		}
		if contentLength >= 0 && int64(src.served) > contentLength {
			t.Fatalf("read %d bytes of the client's body, declared %d", src.served, contentLength)
		}
		var mbe *http.MaxBytesError
		tooLarge := errors.As(readErr, &mbe)
		if tooLarge != (maxBody > 0 && len(body) > int(maxBody)) || tooLarge != tap.overLimit() {
			t.Fatalf("size limit error %v (tap says %v) for %d bytes, limit %d", readErr, tap.overLimit(), len(body), maxBody)
		}
		if ends == 0 {
			t.Fatal("onEnd was not called at the end")
		}
		copied, size, parseErr := tap.finish()
		if size != int64(len(got)) {
			t.Fatalf("finish says %d bytes, %d forwarded", size, len(got))
		}
		whole := readErr == io.EOF && len(got) == len(body)
		if whole && len(body) > 0 && len(body) <= int(limit) {
			if parseErr != "" || !bytes.Equal(copied, body) {
				t.Fatalf("whole body within the limit: copy %q, error %q", copied, parseErr)
			}
		} else if copied != nil && !bytes.Equal(copied, body) {
			t.Fatalf("copy %q of an incomplete or oversized body %q", copied, body)
		}
	})
}
