package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// compressWith encodes b with one content coding.
func compressWith(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		w, err = flate.NewWriter(&buf, flate.DefaultCompression)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		w, err = zstd.NewWriter(&buf)
	default:
		t.Fatalf("unknown coding %q", coding)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecompress(t *testing.T) {
	plain := readFixture(t, "request_turn.json")
	tests := []struct {
		name     string
		encoding string
		body     []byte
	}{
		{"identity empty", "", plain},
		{"identity", "identity", plain},
		{"gzip", "gzip", compressWith(t, "gzip", plain)},
		{"x-gzip upper case", " X-GZIP ", compressWith(t, "gzip", plain)},
		{"deflate zlib", "deflate", compressWith(t, "deflate", plain)},
		{"deflate raw", "deflate", compressWith(t, "raw-deflate", plain)},
		{"br", "br", compressWith(t, "br", plain)},
		{"zstd", "zstd", compressWith(t, "zstd", plain)},
		{"gzip then br", "gzip, br", compressWith(t, "br", compressWith(t, "gzip", plain))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decompress(tt.encoding, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, plain) {
				t.Errorf("got %d bytes, want the %d plain bytes", len(got), len(plain))
			}
		})
	}
}

func TestDecompressErrors(t *testing.T) {
	bomb := make([]byte, MaxDecodedSize+1)
	tests := []struct {
		name     string
		encoding string
		body     []byte
		wantErr  error
		wantText string
	}{
		{"gzip bomb", "gzip", compressWith(t, "gzip", bomb), ErrTooLarge, "decompressing gzip body: decoded body exceeds size limit"},
		{"zstd bomb", "zstd", compressWith(t, "zstd", bomb), ErrTooLarge, "decompressing zstd body"},
		{"br bomb", "br", compressWith(t, "br", bomb), ErrTooLarge, "decompressing br body"},
		{"unsupported", "compress", []byte("x"), nil, "decompressing compress body: unsupported content encoding"},
		{"truncated gzip", "gzip", compressWith(t, "gzip", []byte("hello world"))[:15], nil, "decompressing gzip body"},
		{"garbage zstd", "zstd", []byte("not zstd at all"), nil, "decompressing zstd body"},
		{"garbage deflate", "deflate", []byte{0xff, 0xff, 0xff}, nil, "decompressing deflate body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decompress(tt.encoding, tt.body)
			if err == nil {
				t.Fatalf("Decompress returned %d bytes and no error", len(got))
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}
